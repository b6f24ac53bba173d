"""Read the results: a run folder's files, written while a run runs and read back afterwards, and runs compared side by side.

It owns the run directory (:mod:`~fedprior.results.run_dir`: its file names, its lock, the checkpoint to resume
from), its log (:mod:`~fedprior.results.run_log`, the same lines the CLI prints), its report
(:mod:`~fedprior.results.report`), the numbers that tell a rerun from the run it reran
(:mod:`~fedprior.results.fingerprints`), configs as flat ``section.key`` dicts
(:mod:`~fedprior.results.config_fields`), a run's TensorBoard and MLflow records (:mod:`~fedprior.results.trackers`),
and ``fedprior compare`` (:mod:`~fedprior.results.run_view` reads one
folder, :mod:`~fedprior.results.compare` puts them side by side, grouped by :mod:`~fedprior.results.compare_groups`
and drawn by :mod:`~fedprior.results.compare_plot`). It may import the layers up to ``flower/``, never
``experiments/``, ``reproduce/`` or ``papers/``: reading a run folder needs neither the config models nor a built
experiment (``tests/test_layers.py`` checks it).
"""
