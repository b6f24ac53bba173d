"""Configure and run: an experiment's config, how a run is built from it, and running, resuming and sweeping it.

It owns the config (:mod:`~fedprior.experiments.config`: TOML, presets, overrides, every check, a run's
description), the experiment built from it (:mod:`~fedprior.experiments.build`, composing ``inputs``,
``client_split``, ``client_side``, ``resident`` and ``workers_setup``; ``dry_run`` shows a split without
building it), the run into its folder and its resume (:mod:`~fedprior.experiments.runner`, with ``run_config``,
``resume_check`` and ``import_origins``; the trackers are :mod:`~fedprior.results.trackers`), grids of
runs continued where they stopped (:mod:`~fedprior.experiments.table_runs`, their ``cell``, and
:mod:`~fedprior.experiments.sweep`), the ServerApp of ``flwr run`` (:mod:`~fedprior.experiments.flower_app`),
and the registry through which the papers add presets and report hooks
(:mod:`~fedprior.experiments.paper_registry`). It may import every layer below it, ``results/`` included (a
run writes its folder), never ``reproduce/`` or ``papers/``.
"""
