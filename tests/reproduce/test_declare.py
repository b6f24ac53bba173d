"""The helpers a paper's tables.py declares its tables with (``reproduce/declare.py``, issue 34 item 3)."""

from __future__ import annotations

import pytest

from fedprior.reproduce.declare import printed, quoted
from fedprior.reproduce.tables import Claim, Column, Row

A, B = Row("A", "fedavg-cnn"), Row("B", "fedprox-cnn")
IID, S2 = Column("CIFAR-10", "iid", ()), Column("CIFAR-10", "s=2", ())


def test_printed_reads_a_line_per_row_or_per_column():
    assert printed((A, B), (IID, S2), [[1.0, 2.0], [3.0, 4.0]]) == {
        ("A", "CIFAR-10 iid"): 1.0,
        ("A", "CIFAR-10 s=2"): 2.0,
        ("B", "CIFAR-10 iid"): 3.0,
        ("B", "CIFAR-10 s=2"): 4.0,
    }
    transposed = printed((A, B), (IID, S2), [[1.0, 3.0], [2.0, 4.0]], by_column=True)
    assert transposed == printed(("A", "B"), ("CIFAR-10 iid", "CIFAR-10 s=2"), [[1.0, 2.0], [3.0, 4.0]])


def test_printed_skips_a_row_the_paper_lacks_and_refuses_a_short_line():
    assert printed((A, B), (IID,), [None, [5.0]]) == {("B", "CIFAR-10 iid"): 5.0}
    with pytest.raises(ValueError):
        printed((A, B), (IID, S2), [[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError):
        printed((A, B), (IID,), [[1.0]])


def test_quoted_quotes_the_passage_once_and_cites_it_after():
    first = Claim("A > B (iid)", better="A", worse="B", column="CIFAR-10 iid", source="(74.0 vs 68.7)")
    second = Claim("A > B (s=2)", better="A", worse="B", column="CIFAR-10 s=2", source="(72.0 vs 68.9)")
    third = Claim("A > B (a=0.1)", better="A", worse="B", column="CIFAR-10 a=0.1", source="LDA (71.9 vs 32.4)")
    claims = quoted("4.2.2: 'A beats B'", first, second, third)
    assert [c.source for c in claims] == ["4.2.2: 'A beats B' (74.0 vs 68.7)", "4.2.2, as above (72.0 vs 68.9)", "4.2.2, as above, LDA (71.9 vs 32.4)"]
    assert [(c.name, c.column) for c in claims] == [(c.name, c.column) for c in (first, second, third)]
