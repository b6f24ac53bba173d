"""From a checked config to everything a run needs: data, partition, task, algorithm, device, threads.

The jobs live in their own modules, composed here: ``inputs.py`` (data loading, pixel
standardisation or encoder features, the in-memory cache), ``client_split.py`` (the pool
and its partition), ``client_side.py`` (the algorithm, each client's data, evaluation and
validation data), ``workers_setup.py`` (worker processes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from fedprior.algorithms.base import Algorithm, ClientData, client_fields
from fedprior.algorithms.pieces.personal import with_local_tests
from fedprior.algorithms.pieces.tensors import to_device
from fedprior.algorithms.registry import algorithm_spec, import_modules
from fedprior.data import Dataset
from fedprior.data.standardize import PixelStandardizer
from fedprior.data.synthetic import CLASS_NAMES, DIMENSION, SyntheticFederation
from fedprior.errors import ConfigError
from fedprior.experiments.client_side import (
    ClientSide,
    build_algorithm,
    check_algorithm_fields,
    check_compile,
    evaluation_data,
    misbehaviour,
    with_validation,
)
from fedprior.experiments.client_split import check_inputs, client_split
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.generated import generated_statistics, is_generated, synthetic_federation, test_data
from fedprior.experiments.inputs import prepared_data
from fedprior.experiments.resident import ResidentClients, select_client_data
from fedprior.experiments.workers_setup import concurrent_clients, worker_processes, worker_start_method
from fedprior.partition import Partition
from fedprior.partition.statistics import class_counts, describe
from fedprior.privacy.budget import budget_check
from fedprior.privacy.wrap import warn_if_noisy
from fedprior.runtime.device import resolve_device, set_deterministic
from fedprior.runtime.generated_clients import GeneratedClients
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import sampler_for
from fedprior.runtime.system_config import system_on
from fedprior.runtime.system_model import SystemModel
from fedprior.runtime.threads import ThreadPolicy, thread_policy, torch_threads
from fedprior.task import Task


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
    concurrent_clients: int = 1
    """``run.concurrent_clients``, checked (``workers_setup.concurrent_clients``)."""
    start_method: str | None = None
    """How worker processes start (``fork``/``spawn``; None: the runtime's default)."""
    generated: SyntheticFederation | None = None
    """A federation generated per client (``data.dataset = 'synthetic'``, ``experiments/generated.py``): the clients' data come
    from it when asked for; ``dataset`` then holds the name and class names only, ``train`` is empty and ``partition`` has no client."""
    _resident: tuple[ResidentClients | GeneratedClients, ClientData] | None = field(default=None, init=False, repr=False)

    def client_data(self, client_id: int) -> ClientData:
        """Client ``client_id``'s data: only the fields the algorithm reads (no labels for unsupervised ones),
        plus the ones it takes for diagnostics only (``Algorithm.diagnostics``)."""
        if self.generated is not None:
            return GeneratedClients(self.generated, client_fields(self.algorithm), torch.device("cpu"))(client_id)
        return select_client_data(self.partition, self.train, client_fields(self.algorithm), client_id)

    def resident_inputs(self, device: torch.device | None = None) -> tuple[ResidentClients | GeneratedClients, ClientData]:
        """(each client's data, the test set) on ``device`` (default: the run's): the training and test tensors moved there
        once and kept (``resident.py``), for the in-process runtime; ``client_data`` and ``test`` stay on the host."""
        device = self.device if device is None else device
        if self._resident is None or self._resident[0].device != device:
            if self.generated is not None:
                self._resident = (GeneratedClients(self.generated, client_fields(self.algorithm), device), to_device(self.test, device))
                return self._resident
            self._resident = (
                ResidentClients(
                    self.partition, self.train, client_fields(self.algorithm), device, PixelStandardizer(self.task.pixel_mean, self.task.pixel_std)
                ),
                to_device(self.test, device),
            )
        return self._resident

    def client_size(self, client_id: int) -> int:
        """How many training examples client ``client_id`` holds (all roles)."""
        if self.generated is not None:
            return int(self.generated.train_sizes[client_id])
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
            concurrent_clients=self.concurrent_clients,
            device=str(self.device),
            start_method=self.start_method,
            checkpoint_every=run.checkpoint_every,
            client_state_memory=int(run.client_state_memory_mb * 2**20),
            sampler=sampler_for(federation.sampler, federation.power_of_choice_candidates),
            client_sizes=tuple(int(n) for n in (self.partition.client_sizes() if self.generated is None else self.generated.train_sizes)),
            before_round=budget_check(self.config.privacy, federation.sampler, federation.num_clients, federation.fraction),
            malicious_clients=misbehaviour(self.config, self.task).clients,
            system=SystemModel.of_config(self.config.system, run.seed, federation.num_clients),
            local_epochs=federation.local_epochs,
            batch_size=federation.batch_size,
        )

    def client_side(self) -> ClientSide:
        """What a worker process needs to run this experiment's client updates (picklable)."""
        return ClientSide(self.config, self.task, self.train, self.partition, self.generated)

    def partition_statistics(self) -> dict:
        """The partition's statistics (``partition/statistics.describe``; a generated federation's: ``generated_statistics``)."""
        if self.generated is not None:
            return generated_statistics(self.generated)
        parts = [self.partition.holdings(c) for c in range(self.partition.num_clients)]
        return describe(class_counts(self.dataset.train_labels, parts, self.dataset.num_classes))


def check_runtime_fields(config: ExperimentConfig) -> None:
    """Refuse the fields of the local runtime's client pool with a Flower runtime, which runs the clients on its nodes."""
    if config.run.workers > 1 and config.run.runtime != "local":
        raise ConfigError(
            f"run.workers: worker processes serve run.runtime = 'local' only (Flower runs the clients on its nodes); accepted with runtime '{config.run.runtime}': 0, 1"
        )
    if config.run.concurrent_clients > 1 and config.run.runtime != "local":
        raise ConfigError(
            f"run.concurrent_clients: concurrent client updates serve run.runtime = 'local' only (Flower runs each client on its node); "
            f"accepted with runtime '{config.run.runtime}': 1"
        )
    if config.run.deterministic and config.run.cudnn_benchmark == "on":
        raise ConfigError(
            "run.cudnn_benchmark: 'on' lets cuDNN pick its algorithms by timing, which run.deterministic = true rules out; accepted with it: auto, off"
        )


def check_planned(config: ExperimentConfig, which: str = "") -> None:
    """Every check of ``config`` that needs neither its data nor its device, made for each run a sweep or table plans and
    by ``--dry-run`` before anything trains: the runtime's fields and the algorithm's (:func:`check_algorithm_fields`).
    ``which`` starts the message (the sweep's run, the table's cell)."""
    try:
        check_runtime_fields(config)
        check_algorithm_fields(config)
    except ConfigError as error:
        raise ConfigError(f"{which}{error}") from None


def check_before_data(config: ExperimentConfig, device: torch.device) -> None:
    """What the algorithm's build would refuse of ``run.compile`` and ``run.precision``, refused before any data loads
    (the algorithm itself is built once the data is in)."""
    check_compile(config.run.compile, device)
    algorithm_spec(config.algorithm.name).check_runtime(config.run.precision, config.run.compile)


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
    check_runtime_fields(config)
    set_deterministic(config.run.deterministic)  # before anything touches the GPU
    device = resolve_device(config.run.device)
    check_before_data(config, device)
    start_method = worker_start_method(config.run.start_method, device, config.run.concurrent_clients)
    feature_space = config.encoder.name != "none"
    threads = thread_policy(config.run.threads, feature_space=feature_space)
    if is_generated(config):
        return generated_experiment(name, config, device, start_method)
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
    algorithm = build_algorithm(config, task, device, system_sizes(config, partition.client_sizes))
    f = config.federation
    warn_if_noisy(algorithm, config.privacy, f.num_clients, f.fraction, f.sampler, f.rounds)  # with DP on, once the model's size is known
    workers = worker_processes(config, algorithm, feature_space=feature_space, cuda=device.type == "cuda") if config.run.runtime == "local" else 1
    concurrent = concurrent_clients(config, algorithm, device)
    check_inputs(algorithm, partition, config)
    train = {"x": train_x, "y": torch.from_numpy(dataset.train_labels)}
    if validation is not None:
        algorithm = with_validation(algorithm, to_device(evaluation_data(algorithm, validation, train, pool), device))  # moved once
    if clients.local_tests is not None:  # partition.local_test_fraction: per-client metrics at every evaluation, on the run's device
        if algorithm.evaluation_inputs:
            raise ConfigError(
                f"partition.local_test_fraction: '{algorithm.name}' is scored by a linear evaluation trained on the clients' pool "
                f"({', '.join(algorithm.evaluation_inputs)}), not per client; set partition.local_test_fraction = 0"
            )
        local = [to_device({"x": train_x[torch.from_numpy(rows)], "y": train["y"][torch.from_numpy(rows)]}, device) for rows in clients.local_tests]
        algorithm = with_local_tests(algorithm, local)
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
        concurrent_clients=concurrent,
        start_method=start_method,
    )


def system_sizes(config: ExperimentConfig, sizes: Callable[[], np.ndarray]) -> tuple[int, ...]:
    """The clients' training sizes where the ``[system]`` section is on (a simulated clock's durations need them), else ()."""
    return tuple(int(n) for n in sizes()) if system_on(config.system) else ()


def generated_experiment(name: str, config: ExperimentConfig, device: torch.device, start_method: str | None) -> Experiment:
    """The experiment of a federation generated per client (``data.dataset = 'synthetic'``, ``experiments/generated.py``):
    its sizes drawn, its global test set generated, no client's data made (``Experiment.generated``)."""
    federation = synthetic_federation(config)
    threads = thread_policy(config.run.threads, feature_space=True)
    task = Task(num_classes=len(CLASS_NAMES), input_shape=(DIMENSION,), class_names=CLASS_NAMES, num_clients=config.federation.num_clients)
    algorithm = build_algorithm(config, task, device, system_sizes(config, lambda: federation.train_sizes))
    if algorithm.evaluation_inputs:
        raise ConfigError(
            f"algorithm.name: '{algorithm.name}' is scored by a linear evaluation trained on the clients' pool, which a federation generated "
            "per client does not hold (data.dataset = 'synthetic'); use a supervised algorithm with model = 'linear'"
        )
    nothing = np.zeros((0, 1, 1, DIMENSION), dtype=np.uint8)
    dataset = Dataset(config.data.dataset, nothing, np.zeros(0, dtype=np.int64), nothing, np.zeros(0, dtype=np.int64), CLASS_NAMES, source="generated")
    partition = Partition({"train": ()})
    check_inputs(algorithm, partition, config)
    workers = worker_processes(config, algorithm, feature_space=True, cuda=device.type == "cuda") if config.run.runtime == "local" else 1
    return Experiment(
        name=name,
        config=config,
        dataset=dataset,
        train={},
        test=test_data(federation),
        pool=np.zeros(0, dtype=np.int64),
        partition=partition,
        task=task,
        algorithm=algorithm,
        device=device,
        threads=threads,
        workers=workers,
        concurrent_clients=concurrent_clients(config, algorithm, device),
        start_method=start_method,
        generated=federation,
    )
