"""The power of a benchmark's own verdicts over seeds, and re-reading a committed record to add it (issue 52).

The paper tables' findings carry ``detectable``, ``gap`` and ``seeds_needed`` (:mod:`fedprior.reproduce.findings`);
the benchmarks that declare claims of their own and judge them over seeds (``system_heterogeneity.py``,
``synthetic_fedprox.py``) add the same three fields to each judged difference with :func:`power_fields`:

* ``detectable``: the smallest paired mean difference the n seeds detect with 80% power at their observed paired sd
  (:func:`fedprior.results.power.detectable_effect`: the two-sided one-sample t test, noncentral t);
* ``gap``: the difference the cited paper states for the claim, in the benchmark's units (None where it states none:
  the page then says "no paper gap: detectable only");
* ``seeds_needed``: the fewest seeds whose power at that gap reaches 80% at the observed sd
  (:func:`fedprior.results.power.seeds_needed`; None without a gap).

:func:`rewrite_verdicts` judges a committed record's claims again from the per-seed runs it holds (nothing trained),
refuses to write if any committed value of its verdicts would change, and writes the record back with the new fields
added: the per-seed values, means and verdicts stay byte for byte what they were.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedprior.results.paired import paired
from fedprior.results.power import detectable_effect, seeds_needed

NO_GAP = "no paper gap: detectable only"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def power_fields(differences: Sequence[float], gap: float | None = None) -> dict[str, Any]:
    """``detectable``, ``gap`` and ``seeds_needed`` of one claim's paired differences (one per seed)."""
    stats = paired(differences)
    return {"detectable": _round(detectable_effect(stats.n, stats.sd)), "gap": _round(gap), "seeds_needed": seeds_needed(gap, stats.sd)}


def changed(committed: Any, again: Any, path: str = "verdicts") -> list[str]:
    """Where ``again`` differs from ``committed`` in a value ``committed`` holds (keys only ``again`` has are new: allowed)."""
    if isinstance(committed, dict) and isinstance(again, dict):
        return [p for key, value in committed.items() for p in (changed(value, again[key], f"{path}.{key}") if key in again else [f"{path}.{key} (gone)"])]
    if isinstance(committed, list) and isinstance(again, list) and len(committed) == len(again):
        return [p for i, (a, b) in enumerate(zip(committed, again, strict=True)) for p in changed(a, b, f"{path}[{i}]")]
    return [] if committed == again else [f"{path}: {committed!r} -> {again!r}"]


def rewrite_verdicts(path: Path, judge: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Judge the record at ``path`` again (``judge(record)`` -> its verdicts, from the runs it holds) and write the new fields.

    Raises SystemExit, writing nothing, where a committed value of its verdicts would change. Returns the verdicts written.
    """
    record = json.loads(path.read_text())
    again = judge(record)
    moved = changed(record["verdicts"], again)
    if moved:
        raise SystemExit(f"{path}: judged again from its runs, its verdicts differ from the committed ones; not rewritten: {'; '.join(moved)}")
    record["verdicts"] = again
    path.write_text(json.dumps(record, indent=1) + "\n")
    return again
