"""Declaring a paper's table as the paper prints it: its numbers line by line, and the claims of one passage.

A paper's ``papers/<paper>/tables.py`` builds :class:`~fedprior.reproduce.tables.PaperTable` objects. Two shapes
recur in all of them: the published numbers, printed as lines (one per row, or one per column where the
paper's table is transposed, as MFCL's Tables 2-3 are), and several claims resting on one passage of the
paper, the first quoting it and the others citing it "as above". :func:`printed` and :func:`quoted` write
each as the paper has it, so that adding a table is its rows, its columns, its printed lines and its claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fedprior.reproduce.tables import Claim, Column, Row


def label(item: Row | Column | str) -> str:
    """A row's or a column's label (a string is one already)."""
    return item if isinstance(item, str) else item.label


def printed(
    rows: Sequence[Row | str], columns: Sequence[Column | str], lines: Sequence[Sequence[float] | None], by_column: bool = False
) -> dict[tuple[str, str], float]:
    """``{(row label, column label): number}`` from the lines the paper prints.

    ``lines[i]`` is the line of ``rows[i]``: its number in each column, in order; with ``by_column``, the
    line of ``columns[i]``: each row's number in it, in order. A line None: the paper prints no numbers
    there (a row it does not have). The counts must match: a line too short or too long is an error.
    """
    outer, inner = (columns, rows) if by_column else (rows, columns)
    out: dict[tuple[str, str], float] = {}
    for item, line in zip(outer, lines, strict=True):
        if line is None:
            continue
        for other, value in zip(inner, line, strict=True):
            out[(label(other), label(item)) if by_column else (label(item), label(other))] = value
    return out


def quoted(passage: str, first: Claim, *others: Claim) -> tuple[Claim, ...]:
    """Claims that rest on one passage of the paper, ``passage`` being its section and quote (``"IV-B: 'quote'"``).

    Each claim's own ``source`` holds only what it adds: the numbers it compares. The first quotes the
    passage (``"IV-B: 'quote' (84.55 vs 74.47)"``), the others cite it by its section
    (``"IV-B, as above (88.16 vs 81.67)"``; where the claim adds words before its numbers, after a comma:
    ``"4.2.2, as above, LDA (71.9 vs 32.4)"``).
    """
    section = passage.partition(":")[0]

    def cite(own: str) -> str:
        return f"{section}, as above{' ' if own.startswith('(') else ', '}{own}"

    return (replace(first, source=f"{passage} {first.source}"), *(replace(claim, source=cite(claim.source)) for claim in others))
