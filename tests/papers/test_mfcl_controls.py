"""MFCL's tables: every row a claim compares has the control its claim needs (issue 52)."""

from __future__ import annotations

from fedprior.papers.mfcl.tables import TABLE2, TABLE3, TABLE7
from fedprior.reproduce.tables import Control

SUPERVISED = ("FedAvg", "FedAvg (supervised)")


def test_every_compared_row_has_its_own_control():
    """A self-supervised row: above the same network untrained (its own norm), gating that row; FedAvg: at least the
    raw pixels' linear probe, gating FedAvg."""
    for table in (TABLE2, TABLE3, TABLE7):
        compared = {row for claim in table.claims for row in (claim.better, claim.worse)}
        for row in compared:
            own = [c for c in table.controls if isinstance(c, Control) and c.above == row and row in c.gates]
            expected = "raw pixels" if row in SUPERVISED else f"{row} untrained"
            assert [c.below for c in own] == [expected], (table.name, row)
            assert own[0].gates == (row,)
