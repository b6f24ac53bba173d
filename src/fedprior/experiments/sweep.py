"""A sweep of one experiment (``fedprior run NAME --seeds 3 --sweep algorithm.lr=0.01,0.03 --out OUT``): its grid of runs.

The grid is the product of every ``--sweep KEY=V1,V2,...`` and the seeds; each point is one
run in its own folder of ``OUT``, named by the swept values and the seed
(``OUT/lr=0.01--seed0``; ``OUT/seed0`` when only seeds vary; a key is named by its last part
unless two swept keys share it). The runs are planned and executed by
:mod:`fedprior.experiments.table_runs`, as a paper table's cells are: the same command with
the same ``OUT`` reuses the finished runs, resumes the stopped ones from their checkpoints,
and refuses a folder holding a run of another config. ``fedprior compare OUT`` then groups
the runs by config and folds the seeds into mean ± sd.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedprior.errors import ConfigError
from fedprior.seeding import MAX_SEED

if TYPE_CHECKING:
    from fedprior.experiments.table_runs import CellRun


MAX_SEEDS = 10_000
"""The largest count ``--seeds N`` takes: a grid of N runs (each planned in about 2 ms, each its own folder)."""

NOTE_PLANNING_FROM = 1_000
"""A grid of this many runs or more says, before it is planned, that every run's config and folder is checked first."""


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: ``N`` is seeds 0..N-1; a comma-separated list (``0,3,5``, or ``7,`` for seed 7 alone) is those seeds."""
    parts = [part.strip() for part in text.split(",")]
    listed = "," in text
    values = [part for part in parts if part]
    if not values or not all(part.isdigit() for part in values):
        raise ConfigError(f"--seeds {text!r}: expected a count N (seeds 0..N-1) or a comma-separated list of seeds (0,3,5), non-negative integers")
    numbers = [int(part) for part in values]
    if not listed:
        if numbers[0] < 1:
            raise ConfigError(f"--seeds {text!r}: the count must be at least 1 (for seed 0 alone: --seeds 1 or --seeds 0,)")
        if numbers[0] > MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: a count of at most {MAX_SEEDS:,} seeds (one run each); for given seeds, list them: 0,3,5")
        return list(range(numbers[0]))
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    if repeated:
        raise ConfigError(f"--seeds {text!r}: seed(s) {', '.join(map(str, repeated))} given twice")
    beyond = [str(n) for n in numbers if n > MAX_SEED]
    if beyond:
        raise ConfigError(f"--seeds {text!r}: seed(s) {', '.join(beyond)} beyond 2^63 - 1 ({MAX_SEED}), the range of a run's seed (TOML's integers)")
    return numbers


def split_values(text: str) -> list[str]:
    """``0.01,0.03`` -> ["0.01", "0.03"]: split at the commas outside brackets, braces and quotes (a TOML list stays one value)."""
    values, current, depth, quote = [], "", 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            values.append(current.strip())
            current = ""
            continue
        current += char
    return [*values, current.strip()]


@dataclass(frozen=True)
class Swept:
    """One ``--sweep KEY=V1,V2``: the field and its values (as written: each is read as ``--set KEY=VALUE`` reads it)."""

    key: str
    values: tuple[str, ...]


def parse_sweep(text: str) -> Swept:
    """``--sweep section.key=v1,v2,...``; a ConfigError naming the option for a malformed one."""
    from fedprior.experiments.config import SECTIONS

    if "=" not in text:
        raise ConfigError(f"--sweep {text!r}: expected section.key=value1,value2,...")
    key, raw = text.split("=", 1)
    if not key.strip():
        raise ConfigError(f"--sweep {text!r}: no field name before '='; give section.key=value1,value2,... (e.g. algorithm.lr=0.01,0.03)")
    values = split_values(raw)
    if not all(values):
        raise ConfigError(f"--sweep {text!r}: an empty value (two commas, or one at an end); give section.key=value1,value2,...")
    parts = key.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--sweep {text!r}: the key must be section.key with a section among {', '.join(SECTIONS)}")
    section = parts[0]
    if section not in SECTIONS:
        raise ConfigError(f"--sweep {text!r}: unknown section '{section}'; accepted: {', '.join(SECTIONS)}")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"--sweep {text!r}: value(s) {', '.join(repeated)} given twice")
    return Swept(key.strip(), tuple(values))


def overridden_keys(overrides: list[str]) -> list[str]:
    """The ``section.key`` each ``--set`` sets."""
    return [text.split("=", 1)[0].strip() for text in overrides if "=" in text]


def check_grid(sweeps: list[Swept], set_: list[str], seeds_given: bool) -> None:
    """Refuse a field swept twice, swept and also set, or a seed given outside ``--seeds``."""
    keys = [s.key for s in sweeps]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(f"--sweep: {', '.join(twice)} swept twice; give all its values in one --sweep {twice[0]}=V1,V2,...")
    both = [k for k in keys if k in overridden_keys(set_)]
    if both:
        raise ConfigError(f"--sweep {both[0]} and --set {both[0]}: give the field in one of them")
    if "run.seed" in keys:
        raise ConfigError("--sweep run.seed: give the seeds with --seeds (a count N, or a list such as 0,3,5)")
    if seeds_given and "run.seed" in overridden_keys(set_):
        raise ConfigError("--seeds and --set run.seed: give the seeds with --seeds alone")


def short_keys(keys: list[str]) -> dict[str, str]:
    """Each key's last part (``lr``), or the whole key where two swept keys share it."""
    from fedprior.results.compare_groups import short_names

    return short_names(keys)


@dataclass
class Point:
    """One run of the grid: its swept overrides (``section.key=value``) and its label in folder names and progress lines."""

    overrides: list[str]
    label: str


def points(sweeps: list[Swept]) -> list[Point]:
    """Every combination of the swept values, the first sweep varying slowest; one empty point without sweeps."""
    short = short_keys([s.key for s in sweeps])
    out = []
    for values in itertools.product(*(s.values for s in sweeps)):
        pairs = list(zip((s.key for s in sweeps), values, strict=True))
        out.append(Point([f"{k}={v}" for k, v in pairs], "--".join(f"{short[k]}={v}" for k, v in pairs)))
    return out


def plan_sweep(
    preset: str,
    set_: list[str],
    sweeps: list[Swept],
    seeds: list[int],
    folder: Path,
    imports: list[str] | None = None,
    seeds_given: bool = True,
    algorithm: str | None = None,
) -> list[CellRun]:
    """Every run of the grid (points x seeds), each config checked whole (:func:`~fedprior.experiments.build.check_planned`,
    and on its built algorithm where that has something to refuse: :func:`~fedprior.experiments.dry_run.check_planned_algorithms`)
    and each folder looked at before anything runs; a refusal names the run (``--sweep: the run lr=0.1: ...``).

    A run's overrides are ``--set``'s, then its swept values, then ``run.seed``. Two runs whose
    folder names would be the same (values that differ only in characters a folder name
    cannot hold) are refused. ``seeds_given``: the seeds came from ``--seeds`` (a ``--set run.seed`` beside it is refused).
    ``algorithm`` (``--algorithm NAME``): every run's algorithm section is ``name = NAME`` before the overrides apply."""
    from fedprior.experiments.build import check_planned
    from fedprior.experiments.cell import Cell
    from fedprior.experiments.config import ExperimentConfig, load_config
    from fedprior.experiments.dry_run import check_planned_algorithms
    from fedprior.experiments.table_runs import cell_folder, plan_cell

    check_grid(sweeps, set_, seeds_given)
    name_swept = any(s.key == "algorithm.name" for s in sweeps)
    runs: list[CellRun] = []
    folders: dict[Path, str] = {}
    built: list[tuple[ExperimentConfig, str]] = []
    for point in points(sweeps):
        cell = Cell(row=point.label, column="", preset=preset, overrides=[*set_, *point.overrides], paper=None)
        for seed in seeds:
            path = cell_folder(folder, cell, seed)
            if path in folders:
                raise ConfigError(
                    f"--sweep: {folders[path]} and {point.label} seed {seed} would share the folder {path}; give values that differ in letters or digits"
                )
            folders[path] = f"{point.label} seed {seed}"
            which = f"--sweep: the run {point.label}: " if point.label else ""
            try:
                name, config = load_config(preset, [*cell.overrides, f"run.seed={seed}"], imports or [], algorithm, name_swept=name_swept)
            except ConfigError as error:
                raise ConfigError(f"{which}{error}") from None
            if seed == seeds[0]:
                check_planned(config, which)
                built.append((config, which))
            runs.append(plan_cell(folder, cell, seed, name, config, command="sweep"))
    check_planned_algorithms(built)  # what needs the built algorithm (privacy.dp, Power-of-Choice, concurrent clients), before any run trains
    return runs


def other_runs(folder: Path, runs: list[CellRun]) -> list[Path]:
    """Run folders in ``folder`` that are not part of this grid (an earlier sweep's with other values): ``compare`` would read them too."""
    mine = {run.path for run in runs}
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "config.toml").is_file() and p not in mine)
