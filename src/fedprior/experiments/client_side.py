"""The algorithm a run builds, what each client is given, and what evaluation and validation read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fedprior.algorithms.base import Algorithm, ClientData, Runtime, client_fields
from fedprior.algorithms.registry import algorithm_spec, import_modules
from fedprior.data.standardize import PixelStandardizer
from fedprior.data.synthetic import SyntheticFederation
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.resident import ResidentClients
from fedprior.partition import Partition
from fedprior.privacy.record_level import with_record_level_dp
from fedprior.privacy.wrap import with_privacy
from fedprior.runtime.attacks import Misbehaviour, with_attack
from fedprior.runtime.device import cudnn_autotune, resolve_device, set_deterministic
from fedprior.runtime.generated_clients import GeneratedClients
from fedprior.runtime.system_model import SystemModel, update_durations
from fedprior.task import Task


def build_algorithm(config: ExperimentConfig, task: Task, device: torch.device, client_sizes: Sequence[int] = ()) -> Algorithm:
    """The configured algorithm, given the run's :class:`~fedprior.algorithms.base.Runtime` (:func:`runtime_of`; ``client_sizes``,
    the clients' training sizes, for a server on a simulated clock under the ``[system]`` section).

    cuDNN's autotuning is set for it here (``run.cudnn_benchmark``, :func:`~fedprior.runtime.device.cudnn_autotune`).

    ``run.imports`` are imported first: a spawned worker process (``ClientSide``) starts without them.
    """
    import_modules(config.run.imports, "run.imports")
    check_compile(config.run.compile, device)
    algorithm = algorithm_spec(config.algorithm.name).build(task, config.algorithm.hyperparameters(), runtime_of(config, device, client_sizes))
    cudnn_autotune(config.run.cudnn_benchmark, config.run.deterministic, algorithm.batch_shapes)
    algorithm = with_record_level_dp(algorithm, config.privacy, task, config.algorithm.hyperparameters(), runtime_of(config, device))  # privacy.dp = 'sample'
    algorithm = with_privacy(algorithm, config.privacy, config.federation.num_clients, config.federation.fraction, config.federation.sampler)
    return with_misbehaving_clients(algorithm, config, task)  # after the honest clip: an attacker sends what it wants (docs/privacy-robustness.md)


def with_misbehaving_clients(algorithm: Algorithm, config: ExperimentConfig, task: Task) -> Algorithm:
    """``algorithm`` whose malicious clients (``federation.malicious_fraction``) run ``federation.attack`` (``fedprior.runtime.attacks``)."""
    return with_attack(algorithm, misbehaviour(config, task))


def misbehaviour(config: ExperimentConfig, task: Task) -> Misbehaviour:
    """What the config's malicious clients do, and who they are (drawn from ``run.seed``); also what a Flower node is told (``flower/export.py``)."""
    f = config.federation
    return Misbehaviour.of_run(f.attack, f.attack_scale, config.run.seed, f.num_clients, f.malicious_fraction, task.num_classes)


def runtime_of(config: ExperimentConfig, device: torch.device, client_sizes: Sequence[int] = ()) -> Runtime:
    """What the run gives an algorithm's factory beside its hyperparameters: ``[federation]``'s local epochs and batch size,
    ``device`` (``run.device`` resolved), ``run.precision`` and ``run.compile``; with the ``[system]`` section on and the
    clients' training sizes given, each client's update duration on it (``Runtime.client_duration``: the simulated clock of
    ``fedbuff`` and ``fedasync``, ``runtime.system_model.update_durations``)."""
    federation, run = config.federation, config.run
    system = SystemModel.of_config(config.system, run.seed, federation.num_clients) if client_sizes else None
    duration = update_durations(system, client_sizes, federation.local_epochs) if system is not None else None
    return Runtime(federation.local_epochs, federation.batch_size, device, run.precision, run.compile, client_duration=duration)


def check_algorithm_fields(config: ExperimentConfig) -> None:
    """What the algorithm's build refuses of its fields without looking at data (``run.precision``, ``run.compile``, a field that
    applies only with another: :meth:`~fedprior.algorithms.registry.AlgorithmSpec.check_without_data`), refused for a config
    before anything loads or trains: every planned run of a sweep or table, and ``--dry-run``."""
    import_modules(config.run.imports, "run.imports")
    algorithm_spec(config.algorithm.name).check_without_data(config.algorithm.hyperparameters(), runtime_of(config, torch.device("cpu")))


def check_compile(compile: bool, device: torch.device) -> None:
    """``run.compile = true`` on the CPU is refused (docs/runtime.md, run.compile): a compiled graph costs 15-25 s to build
    there, and torch 2.13's CPU backend trained the ``cnn`` model with zero gradients in its convolutions on one torch thread
    (fedprior's default), where eager and two threads are right; on CUDA its kernels come from another backend (Triton)."""
    if compile and device.type == "cpu":
        raise ConfigError(
            "run.compile: compiles on an accelerator only; on the CPU torch 2.13's compiled backward gave wrong gradients "
            "(zero in the 'cnn' model's convolutions with one torch thread; docs/runtime.md); accepted with run.device = 'cpu': false"
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
    generated: SyntheticFederation | None = None
    """A federation generated per client (``data.dataset = 'synthetic'``): the worker generates its clients' data from it."""

    def __call__(self) -> tuple[Algorithm, Callable[[int], ClientData]]:
        set_deterministic(self.config.run.deterministic)
        device = resolve_device(self.config.run.device)
        algorithm = build_algorithm(self.config, self.task, device)
        if self.generated is not None:
            return algorithm, GeneratedClients(self.generated, client_fields(algorithm), device)
        return algorithm, ResidentClients(
            self.partition, self.train, client_fields(algorithm), device, PixelStandardizer(self.task.pixel_mean, self.task.pixel_std)
        )  # the data moved once per worker


EVALUATION_FIELDS = {"x_train": "x", "y_train": "y"}
"""Evaluation-data fields an algorithm may ask for (``Algorithm.evaluation_inputs``) -> the training tensor they come from."""


def evaluation_data(algorithm: Algorithm, data: ClientData, train: dict[str, torch.Tensor], pool: np.ndarray) -> ClientData:
    """``data`` (the test or validation set) plus the fields of the labelled training pool ``algorithm.evaluation_inputs`` names.

    The pool is every training image the clients hold (after any validation hold-out);
    the self-supervised methods' linear evaluation trains its dense layer on it (the MFCL paper's Sec. 3).
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
