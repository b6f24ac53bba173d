"""Every paper table's definition is what it was when ``tests/support/data/table_definitions.json`` was written (issue 34 item 3).

The dump holds, per table, every field of its definition (rows, columns, the paper's numbers, overrides, metrics,
claims, controls; a function by its qualified name) and the cells both grids run (``cells(table, embedded)`` for the
embedded grid and the paper's: each cell's row, column, preset, resolved overrides and paper numbers). A change of the
declarations' form (helpers that print a table as the paper does) must leave it equal; a change of a table's content
regenerates it, on purpose, with

    PYTHONPATH=src python tests/reproduce/test_paper_tables.py --write

and the diff of the JSON shows what changed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

DUMP = Path(__file__).parents[1] / "support" / "data" / "table_definitions.json"


def plain(value: Any) -> Any:
    """``value`` as JSON: dataclasses by field, tuples as lists, dicts with tuple keys as sorted [key..., value] lists, functions by name."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__, **{f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        if any(isinstance(key, tuple) for key in value):
            return sorted([[*key, plain(item)] for key, item in value.items()], key=json.dumps)
        return {str(key): plain(item) for key, item in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if callable(value):
        return f"{value.__module__}.{value.__qualname__}"
    return value


def cell_lines(cells: list[Any]) -> list[str]:
    """One line per cell: ``row | column | preset | paper | paper_metrics | overrides...`` (one JSON line each in the dump)."""
    return [" | ".join([c.row, c.column, c.preset, repr(c.paper), json.dumps(c.paper_metrics, sort_keys=True), " ".join(c.overrides)]) for c in cells]


def definitions() -> dict[str, Any]:
    """Every registered table: its definition and the cells of both grids."""
    from fedprior.papers import all_tables
    from fedprior.reproduce.tables import cells

    return {
        name: {"definition": plain(table), "embedded_cells": cell_lines(cells(table, True)), "paper_cells": cell_lines(cells(table, False))}
        for name, table in sorted(all_tables().items())
    }


def test_every_table_is_defined_as_recorded():
    recorded = json.loads(DUMP.read_text())
    now = json.loads(json.dumps(definitions()))
    assert sorted(now) == sorted(recorded), "tables added or removed: regenerate the dump (see the module docstring)"
    changed = [name for name in recorded if now[name] != recorded[name]]
    assert changed == [], f"these tables' definitions or cells changed: {changed}"


def test_the_dump_sees_a_changed_cell():
    """The comparison is not vacuous: one override more in one row changes the dump."""
    from fedprior.papers import all_tables
    from fedprior.reproduce.tables import cells

    table = next(iter(sorted(all_tables().items())))[1]
    row = dataclasses.replace(table.rows[0], overrides=(*table.rows[0].overrides, "run.seed=1"))
    changed = dataclasses.replace(table, rows=(row, *table.rows[1:]))
    assert cell_lines(cells(changed, True)) != cell_lines(cells(table, True))
    assert plain(changed) != plain(table)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    DUMP.parent.mkdir(exist_ok=True)
    DUMP.write_text(json.dumps(definitions(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DUMP}")
