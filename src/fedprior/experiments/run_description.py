"""A run's one-line description: the preset's own where the run is that preset, else one written from the config that ran.

A preset's description speaks of the preset's settings ("Fashion-MNIST pixels, 100
clients"). A run made from it with other data, partition, encoder, algorithm or federation
fields (``--set``, ``--algorithm``, the Python API's overrides) is described by its own
fields instead ("fedavg on digits: 6 clients, IID, 50% per round, 3 rounds, ..."), so that
report.md, result.json, config.toml and the MLflow and TensorBoard params never describe a
run that did not run. Fields that say only where or how a run executes (``[run]``, the
data's folder, caches, how often to evaluate) and the seed keep the preset's description.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedprior.experiments.config import ExperimentConfig

NOT_DESCRIBED = frozenset({"description", "federation.evaluate_every"})
"""Fields besides ``run.*`` and ``compare_groups.PLACEMENT`` that no description speaks of."""


def preset_changes(name: str, config: ExperimentConfig) -> dict[str, tuple[Any, Any]] | None:
    """``{"section.key": (preset's value, run's value)}`` for the fields in which ``config`` differs from the preset ``name``
    (None if ``name`` is no shipped preset). Of the algorithm's fields only the run's own are named: where the run's algorithm
    is not the preset's, the preset algorithm's hyperparameters that this one lacks are left out."""
    from fedprior.experiments.config import preset_paths, read_toml, validate_config
    from fedprior.experiments.config_fields import config_differences

    if name not in preset_paths():
        return None
    preset = validate_config(read_toml(name)[1])
    changed = config_differences(preset.to_dict(), config.to_dict())
    own = {f"algorithm.{key}" for key in ("name", *config.algorithm.hyperparameters())}
    return {field: values for field, values in changed.items() if field != "description" and (not field.startswith("algorithm.") or field in own)}


def describes_the_experiment(field: str) -> bool:
    """Whether a change of ``field`` changes what the experiment is (its data, partition, encoder, algorithm or federation)."""
    from fedprior.experiments.compare_groups import PLACEMENT

    return not field.startswith("run.") and field not in PLACEMENT and field not in NOT_DESCRIBED


def described(name: str, config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with the description of the run it defines: the preset's where it differs from the preset ``name`` only in
    fields no description speaks of, else :func:`own_description` (a config not named after a preset keeps its own)."""
    changes = preset_changes(name, config)
    if not changes or not any(describes_the_experiment(field) for field in changes):
        return config
    return config.model_copy(update={"description": own_description(name, config)})


def partition_text(config: ExperimentConfig) -> str:
    p = config.partition
    scheme = {
        "iid": "IID",
        "dirichlet": f"Dirichlet {p.alpha:g}" + (f", at least {p.min_size} images each" if p.min_size else "") + (", balanced sizes" if p.balance else ""),
        "shard": f"shards s={p.shards}",
        "window": f"scenario {p.scenario}" if p.scenario else f"class windows of {p.window}",
        "natural": "the dataset's own clients",
    }[p.scheme]
    if p.num_labeled:
        unlabeled = f"{p.num_unlabeled:,}" if p.num_unlabeled else "all other"
        scheme += f", {p.num_labeled:,} labels + {unlabeled} unlabeled images"
    return scheme


def own_description(name: str, config: ExperimentConfig) -> str:
    """The run in words, from its fields: algorithm, data, encoder, partition and budget, and the preset it was made from."""
    d, e, f = config.data, config.encoder, config.federation
    subset = f" ({d.train_subset:,}-image subset)" if d.train_subset else ""
    encoder = f" through the {e.name} encoder" if e.name != "none" else ""
    epochs = f"{f.local_epochs} local epoch{'s' * (f.local_epochs != 1)}"
    return (
        f"{config.algorithm.name} on {d.dataset}{subset}{encoder}: {f.num_clients} clients, {partition_text(config)}, "
        f"{100 * f.fraction:g}% per round, {f.rounds} rounds, {epochs}, batch {f.batch_size} (made from the preset '{name}')"
    )
