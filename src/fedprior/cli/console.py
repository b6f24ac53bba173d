"""The Rich consoles the commands print with: full-width lines where the output is not a terminal, and a ± that the output can encode.

On a terminal Rich fits tables and text to its width. Piped into a file, ``grep`` or
``less`` it would wrap at 80 columns (a table cell's ``(72.3 s)`` on a line of its own, a
preset's description over three lines); there every line is written whole instead: the
console is as wide as :data:`PIPE_WIDTH`, unless ``COLUMNS`` asks for a width.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPE_WIDTH = 100_000
"""The width of a console whose output is not a terminal: wide enough that no table row nor line is ever wrapped."""


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that wraps at the terminal's width on a terminal and never elsewhere."""
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPE_WIDTH
    return console


def plus_minus(stream=None) -> str:
    """``±`` where ``stream`` (default stdout) can encode it, else ``+-`` (an ASCII locale, ``PYTHONIOENCODING=ascii``)."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    try:
        "±".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return "+-"
    return "±"


def print_table(console: Console, table) -> None:
    """Print a Rich table; where the output is not a terminal its title and caption are written whole, a line each, not wrapped at the table's width nor padded."""
    from rich.text import Text

    if not console.is_terminal:
        for part in ("title", "caption"):
            text = getattr(table, part)
            if text:
                setattr(table, part, Text(str(text), no_wrap=True, overflow="ignore"))
                setattr(table, f"{part}_justify", "default")
    console.print(table, highlight=False)
