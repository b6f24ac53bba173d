"""From a checked config to everything a run needs: data, partition, task, algorithm, device, threads."""

from __future__ import annotations

import functools
import json
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Algorithm, ClientData
from fedprior.algorithms.registry import algorithm_spec, import_modules
from fedprior.data import Dataset, load_dataset
from fedprior.data.standardize import PixelStandardizer
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.partition import Partition, make_partitioner
from fedprior.partition.checks import check_num_clients
from fedprior.partition.subset import balanced_subset
from fedprior.runtime.device import resolve_device, set_deterministic
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import clients_per_round
from fedprior.runtime.simulation import stage_plan
from fedprior.runtime.threads import ThreadPolicy, available_cores, default_workers, thread_policy, torch_threads
from fedprior.runtime.workers import default_start_method
from fedprior.seeding import numpy_rng
from fedprior.task import Task

ROLE_FIELDS = {"train": ("x", "y"), "labeled": ("x_labeled", "y_labeled"), "unlabeled": ("x_unlabeled", "y_unlabeled")}


@dataclass
class Experiment:
    """A run's inputs: the config, the training/test tensors, the partition, the task and the algorithm."""

    name: str
    config: ExperimentConfig
    dataset: Dataset
    train: dict[str, torch.Tensor]
    test: dict[str, torch.Tensor]
    pool: np.ndarray
    partition: Partition
    task: Task
    algorithm: Algorithm
    encoder_name: str = "none"
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    threads: ThreadPolicy = field(default_factory=lambda: ThreadPolicy(1, 1, 1))
    workers: int = 1
    start_method: str | None = None
    """How worker processes start (``fork``/``spawn``; None: the runtime's default)."""

    def client_data(self, client_id: int) -> ClientData:
        """Client ``client_id``'s data: only the fields the algorithm reads (no labels for unsupervised ones),
        plus the ones it takes for diagnostics only (``Algorithm.diagnostics``)."""
        return select_client_data(self.partition, self.train, client_fields(self.algorithm), client_id)

    def client_size(self, client_id: int) -> int:
        """How many training examples client ``client_id`` holds (all roles)."""
        return int(self.partition.holdings(client_id).size)

    def round_loop(self) -> RoundLoop:
        """The round loop's settings from the config, built once and passed whole to every runtime (``runtime/round_loop.py``)."""
        run, federation = self.config.run, self.config.federation
        return RoundLoop(
            seed=run.seed,
            rounds=federation.rounds,
            fraction=federation.fraction,
            vectorize=run.vectorize,
            evaluate_every=federation.evaluate_every,
            test_metrics=run.test_metrics,
            non_finite=run.non_finite,
            wait_for_clients=federation.wait_for_clients,
            threads=self.threads,
            workers=self.workers,
            device=str(self.device),
            start_method=self.start_method,
            checkpoint_every=run.checkpoint_every,
        )

    def client_side(self) -> ClientSide:
        """What a worker process needs to run this experiment's client updates (picklable)."""
        return ClientSide(self.config, self.task, self.train, self.partition)


def client_fields(algorithm: Algorithm) -> tuple[str, ...]:
    """The data fields a client of ``algorithm`` is given: those it trains on and those it only reports diagnostics from."""
    return (*algorithm.inputs, *algorithm.diagnostics)


def select_client_data(partition: Partition, train: dict[str, torch.Tensor], inputs: tuple[str, ...], client_id: int) -> ClientData:
    """Client ``client_id``'s fields among ``inputs`` (x, y, x_labeled, ...), gathered from the training tensors."""
    out: ClientData = {}
    for role, indices in partition.client(client_id).items():
        for name, source in zip(ROLE_FIELDS[role], ("x", "y"), strict=True):
            if name in inputs:
                out[name] = train[source][torch.from_numpy(indices)]
    return out


def build_algorithm(config: ExperimentConfig, task: Task, device: torch.device) -> Algorithm:
    """The configured algorithm, with the runtime-provided local epochs, batch size, device and precision.

    ``run.imports`` are imported first: a spawned worker process (``ClientSide``) starts without them.
    """
    import_modules(config.run.imports, "run.imports")
    return algorithm_spec(config.algorithm.name).build(
        task,
        config.algorithm.hyperparameters(),
        local_epochs=config.federation.local_epochs,
        batch_size=config.federation.batch_size,
        device=device,
        precision=config.run.precision,
    )


@dataclass(frozen=True)
class ClientSide:
    """The client half of an experiment, for worker processes (``fedprior.runtime.workers``).

    Picklable (config, task, training tensors, partition; no closures), so a spawned
    worker (the CUDA case) rebuilds the algorithm from it; a forked worker gets it for free.
    Calling it gives ``(algorithm, client_data)`` in the worker, on the run's device.
    """

    config: ExperimentConfig
    task: Task
    train: dict[str, torch.Tensor]
    partition: Partition

    def __call__(self) -> tuple[Algorithm, Callable[[int], ClientData]]:
        set_deterministic(self.config.run.deterministic)
        algorithm = build_algorithm(self.config, self.task, resolve_device(self.config.run.device))
        return algorithm, functools.partial(select_client_data, self.partition, self.train, client_fields(algorithm))


def build_partition(config: ExperimentConfig, labels: np.ndarray, pool: np.ndarray, groups: np.ndarray | None = None) -> Partition:
    """Split the training ``pool`` (indices into the training set) over ``federation.num_clients`` clients.

    With ``partition.num_labeled > 0`` the clients get a labeled and an unlabeled role
    (feddb.txt 5.1, :class:`~fedprior.partition.labeled_split.LabeledSplitPartitioner`),
    otherwise one ``train`` role. ``groups`` (each training image's natural owner) serves the
    ``natural`` scheme.
    """
    p, f = config.partition, config.federation
    check_num_clients(f.num_clients, pool.size)
    if p.scenario is not None:
        from fedprior.partition.scenarios import scenario

        named, num_classes = scenario(p.scenario), int(labels.max()) + 1
        if num_classes != named.num_classes:
            raise ConfigError(
                f"partition.scenario: {named.name} is defined on {named.num_classes} classes (mfcl.md {named.table}); "
                f"{config.data.dataset} has {num_classes}; use partition.scheme = 'window' with a window instead"
            )
    owners = None if groups is None or p.num_labeled else groups[pool]
    split = make_partitioner(p, f.num_clients, config.run.seed, groups=owners).partition(labels[pool])
    return Partition({role: tuple(pool[part] for part in parts) for role, parts in split.roles.items()})


def check_inputs(algorithm: Algorithm, partition: Partition, config: ExperimentConfig) -> None:
    """Every data field the algorithm reads must come from a role of the partition; a ConfigError says which setting fits."""
    provided = {name for role in partition.roles for name in ROLE_FIELDS[role]}
    missing = [name for name in algorithm.inputs if name not in provided]
    if not missing:
        return
    if config.partition.num_labeled:
        raise ConfigError(
            f"partition.num_labeled: algorithm '{config.algorithm.name}' reads {', '.join(algorithm.inputs)}, which a "
            f"labeled/unlabeled split does not give; set partition.num_labeled = 0, or use a semi-supervised algorithm "
            f"(feddb, fixmatch, fedavg-labeled, fedmatch, fedrgd, semifl)"
        )
    raise ConfigError(
        f"partition.num_labeled: algorithm '{config.algorithm.name}' needs a labeled/unlabeled split "
        f"({', '.join(missing)}); set partition.num_labeled to the number of labeled images (e.g. 4000)"
    )


@dataclass
class Inputs:
    """What the clients train on: pixels or frozen-encoder features, plus prior knowledge and reserved indices."""

    train_x: torch.Tensor
    test_x: torch.Tensor
    prior: dict[str, torch.Tensor]
    reserved: np.ndarray
    encoder_name: str = "none"
    pixel_mean: tuple[float, ...] = ()
    pixel_std: tuple[float, ...] = ()
    val_x: torch.Tensor | None = None
    """The dataset's own validation split, where it has one."""


def encoded_inputs(config: ExperimentConfig, dataset: Dataset, device: torch.device) -> Inputs:
    """Features of a frozen encoder (cached on disk), L2-normalized if encoder.normalize, and the class text features."""
    from fedprior.encoders.registry import build_encoder, class_text_features, encode_dataset

    settings = config.encoder
    encoder = build_encoder(settings, dataset, device)
    train_x = encode_dataset(encoder, dataset, "train", settings)
    test_x = encode_dataset(encoder, dataset, "test", settings)
    val_x = encode_dataset(encoder, dataset, "val", settings) if dataset.val_images is not None else None
    prior = {}
    if hasattr(encoder, "encode_texts"):
        prior["text_features"] = class_text_features(encoder, dataset.class_names, settings.prompt)
    if settings.normalize:
        train_x, test_x = F.normalize(train_x, dim=1), F.normalize(test_x, dim=1)
        val_x = None if val_x is None else F.normalize(val_x, dim=1)
        prior = {k: F.normalize(v, dim=1) for k, v in prior.items()}
    reserved = np.asarray(getattr(encoder, "reserved_train_indices", np.zeros(0, dtype=np.int64)), dtype=np.int64)
    return Inputs(train_x, test_x, prior, reserved, settings.name, val_x=val_x)


def model_inputs(config: ExperimentConfig, dataset: Dataset, device: torch.device) -> Inputs:
    if config.encoder.name != "none":
        return encoded_inputs(config, dataset, device)
    standardizer = PixelStandardizer.fit(dataset.train_images)
    train_x, test_x = standardizer.pixels(dataset.train_images), standardizer.pixels(dataset.test_images)
    val_x = standardizer.pixels(dataset.val_images) if dataset.val_images is not None else None
    return Inputs(train_x, test_x, {}, np.zeros(0, dtype=np.int64), pixel_mean=standardizer.mean, pixel_std=standardizer.std, val_x=val_x)


_PREPARED: dict[str, tuple[Dataset, Inputs]] = {}


def prepared_data(config: ExperimentConfig, device: torch.device = torch.device("cpu")) -> tuple[Dataset, Inputs]:
    """The dataset and its model inputs (the encoder runs on ``device``), kept in memory for the last data+encoder setting.

    A table or a test runs many experiments on the same data: they load and encode once.
    """
    key = json.dumps([config.data.model_dump(), config.encoder.model_dump(), device.type], sort_keys=True)
    if key not in _PREPARED:
        _PREPARED.clear()
        dataset = load_dataset(config.data.dataset, config.data.root, config.data.download)
        if config.encoder.name != "none" and config.run.model_selection == "validation" and dataset.val_images is None:
            check_hold_out(dataset.train_labels, config.data.validation_fraction)  # before encoding; hold_out checks the pool
        _PREPARED[key] = (dataset, model_inputs(config, dataset, device))
    return _PREPARED[key]


def subset_pool(pool: np.ndarray, labels: np.ndarray, size: int) -> np.ndarray:
    """``data.train_subset``: a class-balanced random subset of ``size`` pool indices (``size // classes`` per class,
    :func:`~fedprior.partition.subset.balanced_subset`), a fixed draw (seed 0) that is the same for every run seed,
    so runs with different seeds differ by their training only."""
    if size == 0:
        return pool
    if size > pool.size:
        raise ConfigError(f"data.train_subset: {size} is more than the {pool.size} training images available")
    return balanced_subset(labels, pool, size, seed=0)


def check_hold_out(labels: np.ndarray, fraction: float) -> None:
    """Refuse a ``data.validation_fraction`` that would hold out no image of some class of ``labels`` (the pool's).

    :func:`hold_out` takes ``round(fraction * n)`` images of a class of ``n``: a class that gives
    none leaves the validation split without it (or empty), and model selection cannot rank
    rounds on it. Raised before any training, naming the field and a fraction that works.
    """
    classes, counts = np.unique(labels, return_counts=True)
    held = np.array([int(round(fraction * n)) for n in counts], dtype=np.int64)
    if classes.size == 0 or held.min() > 0:
        return
    smallest = 1.0 / counts.min()
    scale = 10.0 ** (np.floor(np.log10(smallest)) - 1)
    enough = float(np.ceil(smallest / scale) * scale)  # two significant digits, rounded up
    missing = classes[held == 0]
    shown = ", ".join(str(c) for c in missing[:5]) + (", ..." if missing.size > 5 else "")
    what = f"holds out {held.sum()} images" + ("" if held.sum() == 0 else f", none of class {shown}")
    raise ConfigError(
        f"data.validation_fraction: {fraction:g} of the {labels.size} training images {what}; the validation split "
        f"(run.model_selection = 'validation') needs at least one per class ({classes.size}): use at least {enough:g}"
    )


def hold_out(pool: np.ndarray, labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest of the pool, validation indices): ``fraction`` of each class of the pool, drawn from ("validation",).

    A fraction that would leave some class out of the validation split is a :class:`ConfigError` (:func:`check_hold_out`).
    """
    check_hold_out(labels[pool], fraction)
    rng = numpy_rng(seed, "validation")
    chosen = [rng.permutation(members)[: int(round(fraction * members.size))] for members in (pool[labels[pool] == k] for k in np.unique(labels[pool]))]
    validation = np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
    return np.setdiff1d(pool, validation), validation


EVALUATION_FIELDS = {"x_train": "x", "y_train": "y"}
"""Evaluation-data fields an algorithm may ask for (``Algorithm.evaluation_inputs``) -> the training tensor they come from."""


def evaluation_data(algorithm: Algorithm, data: ClientData, train: dict[str, torch.Tensor], pool: np.ndarray) -> ClientData:
    """``data`` (the test or validation set) plus the fields of the labelled training pool ``algorithm.evaluation_inputs`` names.

    The pool is every training image the clients hold (after any validation hold-out);
    the self-supervised methods' linear evaluation trains its dense layer on it (mfcl.md Sec. 3).
    """
    unknown = [k for k in algorithm.evaluation_inputs if k not in EVALUATION_FIELDS]
    if unknown:
        raise ConfigError(f"algorithm '{algorithm.name}': unknown evaluation input(s) {', '.join(unknown)}; accepted: {', '.join(EVALUATION_FIELDS)}")
    if not algorithm.evaluation_inputs:
        return data
    whole = pool.size == train["y"].shape[0] and bool((pool == np.arange(pool.size)).all())
    rows = None if whole else torch.from_numpy(pool)
    extra = {k: train[EVALUATION_FIELDS[k]] if rows is None else train[EVALUATION_FIELDS[k]][rows] for k in algorithm.evaluation_inputs}
    return {**data, **extra}


def with_validation(algorithm: Algorithm, validation: ClientData) -> Algorithm:
    """``algorithm`` whose ``validate`` reports its metrics on ``validation``, prefixed ``validation_`` (per-class lists left out)."""

    def validate(state):
        scores = algorithm.evaluate(state, validation)
        return {f"validation_{k}": v for k, v in scores.items() if not isinstance(v, list)}

    return algorithm.with_(validate=validate)


def worker_start_method(asked: str, device: torch.device) -> str | None:
    """``run.start_method``: 'auto' is spawn with CUDA (CUDA cannot run in a forked process), else the runtime's default."""
    if asked == "auto":
        return "spawn" if device.type == "cuda" else None
    if asked == "fork" and device.type == "cuda":
        raise ConfigError(
            f"run.start_method: 'fork' cannot be used with run.device = {device} (CUDA cannot run in a forked process); accepted with CUDA: auto, spawn"
        )
    if asked == "fork" and default_start_method() != "fork":
        raise ConfigError(f"run.start_method: 'fork' is not safe or not available on {sys.platform}; accepted here: auto, spawn")
    return asked


def worker_processes(config: ExperimentConfig, algorithm: Algorithm, *, feature_space: bool, cuda: bool) -> int:
    """How many worker processes train a round's clients (``fedprior.runtime.threads.default_workers``).

    Never more than the most clients any stage samples in a round (more would only
    idle), which an explicit ``run.workers`` above it is told in a warning; also warned:
    more workers than cores (they then compete for the cores; the numbers stay those of
    ``workers = 1`` either way).
    """
    plan = stage_plan(algorithm, config.federation.rounds, config.federation.fraction)
    per_round = max((clients_per_round(config.federation.num_clients, f) for stage, _, f in plan if not stage.server_only), default=1)
    workers = default_workers(config.run.workers, feature_space=feature_space, clients_per_round=per_round, cuda=cuda)
    asked = config.run.workers
    if asked > workers:
        warnings.warn(
            f"run.workers = {asked}: starting {workers} worker process{'es' if workers != 1 else ''}, the most clients a round trains; more would idle",
            stacklevel=2,
        )
    cores = available_cores()
    if asked and workers > cores:
        warnings.warn(
            f"run.workers = {asked}: {workers} worker processes on {cores} core{'s' if cores != 1 else ''}; they share the cores, which makes a round no faster, often slower, than with run.workers = {cores} (the numbers are the same)",
            stacklevel=2,
        )
    return workers


@dataclass(frozen=True)
class ClientSplit:
    """Which training images the clients hold: the pool, any validation hold-out, and the partition of the pool."""

    config: ExperimentConfig
    """The config as run: a centralized baseline's federation is one client, sampled every round."""
    pool: np.ndarray
    """Training-set indices the clients hold between them (no encoder-reserved, subset-dropped or held-out image)."""
    held_out: np.ndarray | None
    """Training-set indices held out as the validation split (run.model_selection = 'validation' on a dataset without its own)."""
    partition: Partition


def client_split(config: ExperimentConfig, dataset: Dataset, reserved: np.ndarray) -> ClientSplit:
    """The pool of training images and its partition over the clients, as a run of ``config`` gets them.

    ``reserved``: training indices a frozen encoder was fitted on (never given to a client;
    :func:`fedprior.encoders.registry.reserved_train_indices`). Only labels are read, so
    ``fedprior run --dry-run`` calls this without encoding anything.
    """
    labels = dataset.train_labels
    pool = subset_pool(np.setdiff1d(np.arange(labels.size), reserved), labels, config.data.train_subset)
    held = None
    if config.run.model_selection == "validation" and dataset.val_images is None:
        pool, held = hold_out(pool, labels, config.data.validation_fraction, config.run.seed)
    if algorithm_spec(config.algorithm.name).centralized:
        config = config.model_copy(update={"federation": config.federation.model_copy(update={"num_clients": 1, "fraction": 1.0})})
        return ClientSplit(config, pool, held, Partition({"train": (pool,)}))
    return ClientSplit(config, pool, held, build_partition(config, labels, pool, dataset.train_groups))


def build_experiment(name: str, config: ExperimentConfig) -> Experiment:
    """Load the data, encode it if an encoder is set, partition it and build the algorithm.

    Training images an encoder was fitted on (the locked-text stand-in's pretraining
    split) are removed from the pool before partitioning, so no client ever holds them.
    A centralized baseline gets one client holding the whole pool. ``run.device`` is
    resolved first (asking for absent CUDA fails here, before any data is loaded), and
    the thread policy and worker count are chosen (``fedprior.runtime.threads``).
    ``run.imports`` are imported first (a table's cell in a spawned process starts without them).
    """
    import_modules(config.run.imports, "run.imports")
    if config.run.workers > 1 and config.run.runtime != "local":
        raise ConfigError(
            f"run.workers: worker processes serve run.runtime = 'local' only (Flower runs the clients on its nodes); accepted with runtime '{config.run.runtime}': 0, 1"
        )
    set_deterministic(config.run.deterministic)  # before anything touches the GPU
    device = resolve_device(config.run.device)
    start_method = worker_start_method(config.run.start_method, device)
    feature_space = config.encoder.name != "none"
    threads = thread_policy(config.run.threads, feature_space=feature_space)
    with torch_threads(threads.encode):
        dataset, inputs = prepared_data(config, device)
    train_x, test_x = inputs.train_x, inputs.test_x
    clients = client_split(config, dataset, inputs.reserved)
    config, pool, partition = clients.config, clients.pool, clients.partition
    validation = None
    if config.run.model_selection == "validation":
        if inputs.val_x is not None:
            validation = {"x": inputs.val_x, "y": torch.from_numpy(dataset.val_labels)}
        else:
            held = clients.held_out
            assert held is not None, "client_split holds out a validation split where the dataset has none"
            validation = {"x": train_x[torch.from_numpy(held)], "y": torch.from_numpy(dataset.train_labels[held])}
    task = Task(
        num_classes=dataset.num_classes,
        input_shape=tuple(train_x.shape[1:]),
        class_names=dataset.class_names,
        num_clients=config.federation.num_clients,
        prior=inputs.prior,
        pixel_mean=inputs.pixel_mean,
        pixel_std=inputs.pixel_std,
    )
    algorithm = build_algorithm(config, task, device)
    workers = worker_processes(config, algorithm, feature_space=feature_space, cuda=device.type == "cuda") if config.run.runtime == "local" else 1
    check_inputs(algorithm, partition, config)
    train = {"x": train_x, "y": torch.from_numpy(dataset.train_labels)}
    if validation is not None:
        algorithm = with_validation(algorithm, evaluation_data(algorithm, validation, train, pool))
    return Experiment(
        name=name,
        config=config,
        dataset=dataset,
        train=train,
        test=evaluation_data(algorithm, {"x": test_x, "y": torch.from_numpy(dataset.test_labels)}, train, pool),
        pool=pool,
        partition=partition,
        task=task,
        algorithm=algorithm,
        encoder_name=inputs.encoder_name,
        device=device,
        threads=threads,
        workers=workers,
        start_method=start_method,
    )
