"""MFCL's data scenarios by name: Sc1-Sc10 (the MFCL paper's Table 1) and Sc11-Sc110 (Table 4).

Every scenario is a class-window partition (:mod:`fedprior.partition.window`): client m
holds W consecutive classes (wrapping around), the same number of samples of each.

- ``Sc1`` .. ``Sc10``: CIFAR-10, M = 10 clients, W = the scenario number (Sc1: one class
  per client, the most heterogeneous and class-imbalanced; Sc10: every client holds all
  ten classes, homogeneous and class-balanced).
- ``Sc11`` .. ``Sc110``: CIFAR-100, M = 100 clients, W = number - 10 (Sc11: one class
  per client; Sc110: all 100). Table 4 prints Sc11, 12, 13, 20, 30, 70, 109 and 110; the
  numbering covers every W in between.

Their beta^CIB and beta^hetero are reproduced by tests/partition/test_statistics.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fedprior.errors import ConfigError


@dataclass(frozen=True)
class Scenario:
    name: str
    window: int
    num_clients: int
    num_classes: int

    @property
    def table(self) -> str:
        return "Table 1" if self.num_classes == 10 else "Table 4"


def scenario(name: str) -> Scenario:
    """The scenario called ``name`` ('Sc2', case-insensitive); ConfigError naming ``partition.scenario`` otherwise."""
    match = re.fullmatch(r"sc(\d+)", str(name).strip().lower())
    number = int(match.group(1)) if match else 0
    if 1 <= number <= 10:
        return Scenario(f"Sc{number}", number, 10, 10)
    if 11 <= number <= 110:
        return Scenario(f"Sc{number}", number - 10, 100, 100)
    raise ConfigError(
        f"partition.scenario: unknown scenario {name!r}; accepted: Sc1..Sc10 (the MFCL paper's Table 1, 10 clients) and Sc11..Sc110 (Table 4, 100 clients)"
    )
