"""Reproduce a paper: its tables as grids beside the published numbers, their claims and controls, and the verdicts.

It owns the table model (:mod:`~fedprior.reproduce.tables`: rows, columns, claims, controls, the cells of the
embedded and the paper's grid, the cells' results gathered from their runs), the pipeline that runs a table from
start to end (:func:`~fedprior.reproduce.pipeline.reproduce_table`, ``fedprior table`` and ``fedprior.reproduce_table``)
with its typed results (:mod:`~fedprior.reproduce.table_result`) and its page, table.md
(:mod:`~fedprior.reproduce.table_page`), the helpers that let a paper's ``tables.py`` read as the paper
prints its table (:mod:`~fedprior.reproduce.declare`), the findings (:mod:`~fedprior.reproduce.findings`:
controls checked, each claim's paired interval over seeds and its verdict), the rerun of a committed table cell
by cell (:mod:`~fedprior.reproduce.table_verify`) and the tables of every registered paper by name
(:mod:`~fedprior.reproduce.paper_tables`). It may import ``experiments/`` (configs, grids of runs), ``results/``
and every layer below; ``papers/`` declare their tables with it, and it never imports them.
"""
