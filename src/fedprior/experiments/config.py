"""Experiment configs: TOML with sections data, partition, encoder, algorithm, federation, privacy, system, run.

Every field has a default and a docstring (shown by ``fedprior presets --fields``).
A config is a preset name or a TOML file, plus ``--set section.key=value`` overrides;
all of it is checked here, before any data is loaded, and a problem becomes one
:class:`~fedprior.errors.ConfigError` line naming the field and what it accepts.

A section is defined by the layer that uses it and composed here: ``[encoder]`` is
:class:`~fedprior.encoders.config.EncoderConfig`, ``[partition]`` is
:class:`~fedprior.partition.config.PartitionConfig` (both re-exported from this module).

A run's one-line description is the preset's own where the run is that preset, else one
written from the config that ran (:func:`described`). A preset's description speaks of the
preset's settings ("Fashion-MNIST pixels, 100 clients"). A run made from it with other data,
partition, encoder, algorithm or federation fields (``--set``, ``--algorithm``, the Python
API's overrides) is described by its own fields instead ("fedavg on digits: 6 clients, IID,
50% per round, 3 rounds, ..."), so that report.md, result.json, config.toml and the MLflow
and TensorBoard params never describe a run that did not run. Fields that say only where or
how a run executes (``[run]``, the data's folder, caches, how often to evaluate) and the seed
keep the preset's description. Where a run differs from its preset at all,
:func:`preset_note` names the fields.
"""

from __future__ import annotations

import functools
import tomllib
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from fedprior.algorithms.pieces.async_schedule import ASYNCHRONOUS
from fedprior.algorithms.pieces.async_schedule import check_federation as check_asynchronous
from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation
from fedprior.algorithms.registry import algorithm_spec, import_modules, registers_other_algorithms
from fedprior.encoders.config import EncoderConfig as EncoderConfig  # re-exported: the encoder layer defines it
from fedprior.encoders.config import check_encoder_name
from fedprior.errors import ConfigError
from fedprior.partition.config import PartitionConfig as PartitionConfig  # re-exported: the partition layer defines it
from fedprior.privacy.config import PrivacyConfig, check_privacy
from fedprior.runtime.device import check_device_syntax
from fedprior.runtime.system_config import SystemConfig as SystemConfig  # re-exported: the runtime layer defines it
from fedprior.runtime.system_config import check_asynchronous_system, check_system
from fedprior.seeding import MAX_SEED
from fedprior.validation import CheckedModel, ConfigSection, describe_validation_error


class DataConfig(ConfigSection):
    dataset: str = "fashion-mnist"
    """Dataset name (see `fedprior datasets`), or 'hf:PATH': a Hugging Face dataset saved in the folder PATH (save_to_disk, parquet or arrow files, an imagefolder; docs/huggingface.md), or with data.download = true a Hub name."""
    root: str | None = None
    """Folder holding the dataset's files; unset: the default places (Debian package folder, user cache)."""
    download: bool = False
    """Allow downloading a missing dataset (never happens otherwise)."""
    image_column: str | None = Field(None, min_length=1)
    """With dataset = 'hf:PATH': the column holding the images; unset: 'image', else 'img'."""
    label_column: str | None = Field(None, min_length=1)
    """With dataset = 'hf:PATH': the column holding the labels (a ClassLabel gives the class names); unset: 'label'."""
    group_column: str | None = Field(None, min_length=1)
    """With dataset = 'hf:PATH': the training split's column naming each image's natural owner (e.g. a writer), for partition.scheme = 'natural' or 'flwr:NaturalIdPartitioner' (`fedprior datasets export` writes it as 'group'); unset: none."""
    train_subset: int = Field(0, ge=0)
    """Train on a class-balanced random subset of this many training images (size // classes per class; a fixed draw, the same for every run seed); 0: all of them."""
    validation_fraction: float = Field(0.1, gt=0, lt=1)
    """With run.model_selection='validation' on a dataset without its own validation split: the fraction of the training pool held out (class-stratified) as one."""
    synthetic_alpha: float | None = Field(None, ge=0)
    """With dataset = 'synthetic': alpha of Synthetic(alpha, beta) (Li et al., FedProx, MLSys 2020, Sec. 5.1), the standard deviation of u_k, the mean of client k's model (W_k, b_k ~ N(u_k, 1)): how much the clients' models differ; unset: 1."""
    synthetic_beta: float | None = Field(None, ge=0)
    """With dataset = 'synthetic': beta of Synthetic(alpha, beta), the standard deviation of B_k, the mean of client k's feature mean (v_k ~ N(B_k, 1)): how much the clients' features differ; unset: 1."""
    synthetic_iid: bool | None = None
    """With dataset = 'synthetic': true gives the paper's Synthetic IID (one model W, b for all clients, features N(0, Sigma)), where alpha and beta do not apply; unset: false."""


class AlgorithmConfig(CheckedModel):
    """The algorithm's name plus its hyperparameters (checked against the algorithm's factory)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
    name: str = "fedavg"
    """Algorithm name (see `fedprior algorithms`)."""

    def hyperparameters(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def robust_rule(self) -> str:
        """``algorithm.aggregation_rule``: the robust rule that replaces the mean of the client models; 'mean' where the algorithm has none."""
        return str(self.hyperparameters().get("aggregation_rule", "mean"))


class FederationConfig(ConfigSection):
    rounds: int = Field(10, ge=0)
    """Communication rounds."""
    num_clients: int = Field(100, ge=1)
    """Number of clients the training set is split over."""
    fraction: float = Field(0.1, gt=0, le=1)
    """Fraction of clients sampled each round (at least one)."""
    sampler: str = Field("uniform", min_length=1)
    """How a round's clients are chosen: 'uniform' (m = fraction x num_clients without replacement; the default without DP), 'poisson' (each client joins with probability fraction, a variable number a round; the default with privacy.dp on), 'size-weighted' (without replacement, by training examples), 'power-of-choice' (Cho et al., AISTATS 2022: of power_of_choice_candidates drawn by size, the fraction x num_clients with the highest loss of the global model), or a name registered with fedprior.register_sampler (docs/runs.md, "Client sampling")."""
    power_of_choice_candidates: int | None = Field(None, ge=1)
    """d of sampler 'power-of-choice': the candidates drawn each round whose loss is asked, between the clients a round trains and num_clients; only with that sampler."""
    local_epochs: int = Field(1, ge=1)
    """Local epochs per round on each sampled client."""
    batch_size: int = Field(32, ge=1)
    """Local mini-batch size."""
    evaluate_every: int = Field(1, ge=1)
    """Evaluate the global model every k rounds, and always after the last round of each stage."""
    wait_for_clients: float = Field(0.0, ge=0)
    """Seconds a round in which no sampled client could be reached (Flower: nodes gone, timeouts) is retried before the run stops there, resumable; 0 stops at once. Such a round is never counted as trained."""
    malicious_fraction: float = Field(0.0, ge=0, lt=1)
    """Simulated misbehaving clients: this fraction of the clients (round(fraction x num_clients), the same ones all run, drawn from the run seed) runs federation.attack whenever sampled; 0: none (see fedprior.runtime.attacks)."""
    attack: Literal["none", "sign_flip", "scaled", "gaussian", "label_flip"] = "none"
    """What a malicious client does: 'sign_flip' (replies x - s u, u its honest update), 'scaled' (x + s u), 'gaussian' (x + N(0, s^2)), 'label_flip' (trains on y -> C-1-y); s = attack_scale."""
    attack_scale: float | None = Field(None, gt=0)
    """s of sign_flip, scaled and gaussian; unset: 1 (sign_flip), 10 (scaled), 1 (gaussian); not with label_flip."""


class RunConfig(ConfigSection):
    seed: int = Field(0, ge=0, le=MAX_SEED)
    """The one seed every random stream of the run is derived from: 0 to 2^63 - 1 (TOML's integer range)."""
    vectorize: bool = True
    """Train the sampled clients together where the algorithm supports it (same numbers as one by one)."""
    runtime: Literal["local", "flower-sim", "flower-local"] = "local"
    """Where the run executes: 'local' (in-process), 'flower-sim' (Flower's simulation engine) or 'flower-local' (a Flower SuperLink and SuperNodes as processes on this machine; see docs/flower.md)."""
    threads: int = Field(0, ge=0)
    """Torch CPU threads per process for all work; 0: by the work's size (one per client update, every core for image evaluation and encoding; see fedprior.runtime.threads)."""
    workers: int = Field(0, ge=0)
    """Worker processes that train a round's sampled clients (runtime 'local'); 0: 1 for feature-space heads, min(cores, clients per round) for image models; never more than the most clients a round samples. The numbers do not depend on it."""
    concurrent_clients: int = Field(1, ge=1)
    """Client updates of a round run at once in each process (runtime 'local'), each in its own thread and, on CUDA, its own stream, for algorithms whose updates allow it (FedAvg, FedProx, MOON, FedDB, FixMatch, FedAvg-labeled, FedRGD); 1: one at a time. The numbers do not depend on it. On the CPU the threads share the cores (run.workers is the CPU's lever)."""
    compile: bool = False
    """Compile the network the clients train and the server evaluates with torch.compile (once per process, reused every round; the first rounds pay the compilation), for algorithms whose factory takes 'compile' (FedAvg, FedProx and MOON on image models, FedDB, FixMatch, FedAvg-labeled, FedRGD, SemiFL). The numbers differ from eager ones within float tolerance; a resume may change it."""
    start_method: Literal["auto", "fork", "spawn"] = "auto"
    """How worker processes start: 'fork' (they get the built experiment for free; not with CUDA nor with concurrent_clients > 1, whose threads crash now and then in a forked worker), 'spawn' (they rebuild it), or 'auto': spawn with CUDA or concurrent_clients > 1, else fork where the system has it."""
    device: str = "auto"
    """Where models train and evaluate and frozen encoders run: auto (CUDA when present, else cpu), cpu, cuda, cuda:N."""
    non_finite: Literal["stop", "drop"] = "stop"
    """A client update with NaN or infinite numbers (training diverged): 'stop' the run with an error naming the round and client (the last checkpoint stays resumable), or 'drop' that update from the round's aggregation and count it among the failed clients."""
    deterministic: bool = False
    """Deterministic torch kernels (torch.use_deterministic_algorithms, cuDNN deterministic, no cuDNN autotuning): bit-for-bit repeatable runs on CUDA, at some speed."""
    cudnn_benchmark: Literal["auto", "on", "off"] = "auto"
    """Whether cuDNN autotunes its convolution algorithms for each new input shape (torch.backends.cudnn.benchmark; CUDA only): 'auto' only for algorithms whose client batches keep one shape (not the full-batch semi-supervised family, whose shapes change every client and round: autotuning them made a FedDB round 16-22 s instead of 2-3 s on an H200), 'on', 'off'. Never with run.deterministic."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """Arithmetic of the forward passes in training and evaluation: 'fp32', or 'bf16' (torch.autocast to bfloat16 on the run's device, the CPU included; weights, gradients and optimizer state stay float32, losses are computed in float32). Only algorithms whose factory takes 'precision' accept 'bf16' (see fedprior.algorithms.pieces.precision); numbers differ from fp32 by bfloat16 rounding."""
    client_state_memory_mb: float = Field(1024.0, ge=0)
    """MiB of the clients' persistent states (SCAFFOLD's control variates, FedDyn's gradients, personal heads, FedDB's optimizer state) held in memory; beyond it every client's state is kept on disk, in the checkpoint's folder of parts (one safetensors file per client, checkpointed by reference), and a round reads only its sampled clients' states; 0: on disk from the start. The numbers do not depend on it (runtime 'local')."""
    checkpoint_every: int = Field(1, ge=1)
    """Write the resumable checkpoint every k rounds, and always after the last round and when the run stops (an error, a signal); a resume restarts from the last one written, with the same numbers as an uninterrupted run."""
    model_selection: Literal["last", "validation"] = "last"
    """'validation': also evaluate every round on a validation split and report the test metrics of the round it ranks best (selected_* in the summary, FedBM's code), beside the last round's."""
    test_metrics: Literal["every-evaluation", "selectable"] = "every-evaluation"
    """When the test set is evaluated: at 'every-evaluation' (federation.evaluate_every), or only where its metrics can be reported ('selectable'): each stage's last round and, with model_selection = 'validation', a round whose validation score beats every earlier one. 'selectable' gives the same selected and final metrics at a fraction of the cost (the test curve and best_accuracy then cover only those rounds)."""
    mlflow: str | None = Field(None, min_length=1)
    """Also log the run to MLflow at this tracking URI (e.g. 'sqlite:///mlflow.db' or a server's http URI); needs the mlflow extra (README). TensorBoard files are always written."""
    mlflow_experiment: str = Field("fedprior", min_length=1)
    """The MLflow experiment the run is logged under (with run.mlflow)."""
    wandb: Literal["offline", "online"] | None = None
    """Also log the run to Weights & Biases: 'offline' writes the W&B run to disk only (into the run directory's wandb/ folder, or $WANDB_DIR; upload it later with `wandb sync`), 'online' sends it to the W&B server (needs `wandb login`); needs the wandb extra (README). Nothing reaches the network unless 'online' is asked for."""
    wandb_project: str = Field("fedprior", min_length=1)
    """The W&B project the run is logged under (with run.wandb)."""
    imports: list[str] = []
    """Python modules imported before the config is checked, e.g. ["mypkg.algorithms"]: they register algorithms from your own code (fedprior.register_algorithm; `--import MODULE` adds to it). Kept in the run's config.toml, so `fedprior resume` and `fedprior run RUN/config.toml` import them again."""

    @field_validator("imports")
    @classmethod
    def _module_names(cls, value: list[str]) -> list[str]:
        import re

        from fedprior.algorithms.registry import MODULE_PATTERN

        for name in value:
            if not re.fullmatch(MODULE_PATTERN, name):
                raise PydanticCustomError(
                    "module_name", "{value} is not a module name; give dotted Python module names such as 'mypkg.algorithms'", {"value": repr(name)}
                )
        return list(dict.fromkeys(value))

    @field_validator("device")
    @classmethod
    def _device_syntax(cls, value: str) -> str:
        check_device_syntax(value)  # whether CUDA is there is checked when the run starts (resolve_device)
        return value


class ExperimentConfig(ConfigSection):
    description: str = ""
    """One line saying what the experiment is."""
    data: DataConfig = DataConfig()
    partition: PartitionConfig = PartitionConfig()
    encoder: EncoderConfig = EncoderConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    federation: FederationConfig = FederationConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    system: SystemConfig = SystemConfig()
    run: RunConfig = RunConfig()

    def checked(self) -> ExperimentConfig:
        """Check the algorithm's hyperparameters too (they are free-form until the algorithm is known)."""
        import_modules(self.run.imports, "run.imports")  # first: they register the algorithms of user code
        check_encoder_name(self.encoder.name)
        spec = algorithm_spec(self.algorithm.name)
        values = spec.validate(self.algorithm.hyperparameters())
        federation = self.sampler_as_run()
        check_sampler(federation)
        check_privacy(self.privacy, federation.num_clients, federation.fraction, federation.rounds, federation.sampler)
        if self.privacy.dp == "sample":  # record-level DP-SGD: its checks import torch, which config-only commands do not
            from fedprior.privacy.record_level import check_record_level

            check_record_level(self.privacy, self.algorithm.name, values, self.run.precision, self.run.compile)
        check_robustness(self.algorithm.name, values, federation)
        check_asynchronous(self.algorithm.name, values, federation.num_clients, self.federation.sampler)  # as given: privacy.dp's own error names DP
        if self.algorithm.name in ASYNCHRONOUS:
            check_asynchronous_system(self.algorithm.name, self.system)
        check_private_aggregation(str(values.get("aggregation_rule", "mean")), self.privacy.dp, secagg=False)
        check_tracker_fields(self.run)
        check_synthetic(self)
        check_system(self.system, self.run.runtime, federation.sampler, federation.local_epochs)
        if self.system.partial_work and values.get("model") == "linear":  # batched heads take no step budget (known before any data)
            raise ConfigError(
                "system.partial_work: model = 'linear' trains batched heads, which cannot stop their local work early; accepted with an image model "
                "(fedavg, fedprox, moon), or partial_work = false"
            )
        from fedprior.data.registry import check_columns

        check_columns(self.data.dataset, self.data.root, self.data.image_column, self.data.label_column, self.data.group_column)
        from fedprior.partition.flower_datasets import check_flwr_fields

        check_flwr_fields(self.partition, federation.num_clients, self.run.seed)
        check_domains(self)
        algorithm = AlgorithmConfig(name=self.algorithm.name, **values)
        return self.model_copy(update={"algorithm": algorithm, "partition": self.scenario_partition(), "federation": federation})

    def sampler_as_run(self) -> FederationConfig:
        """The federation section with ``federation.sampler`` resolved: 'poisson' where DP is on and the config does not set a sampler
        (DP-FedAvg's sampling, which the accountant's add-or-remove bound covers), else as given."""
        if self.privacy.dp in ("server", "client") and "sampler" not in self.federation.model_fields_set:
            return self.federation.model_copy(update={"sampler": "poisson"})
        return self.federation

    def scenario_partition(self) -> PartitionConfig:
        """The partition section with ``partition.scenario`` applied (scheme = window, its window), checked against the federation."""
        if not self.partition.scenario:  # unset, or "" (how an override clears a preset's scenario)
            return self.partition.model_copy(update={"scenario": None})
        from fedprior.partition.scenarios import scenario

        named = scenario(self.partition.scenario)
        if self.federation.num_clients != named.num_clients:
            raise ConfigError(
                f"partition.scenario: {named.name} is defined for {named.num_clients} clients (the MFCL paper's {named.table}); "
                f"federation.num_clients is {self.federation.num_clients}"
            )
        return self.partition.model_copy(update={"scenario": named.name, "scheme": "window", "window": named.window})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def to_toml(self, header: str = "") -> str:
        """Every field as TOML, section by section in the config's order; ``fedprior run FILE`` reads it back as this config.

        A field left unset (None: TOML has no null, and its default is None) is a comment line
        ``# key: unset``, so that the text still names every field. ``header`` leads as comment lines.
        """
        values = self.model_dump()
        lines = [f"# {line}".rstrip() for line in header.splitlines()]
        lines += [toml_line(key, value) for key, value in values.items() if key not in SECTIONS]
        for section in SECTIONS:
            lines += ["", f"[{section}]"]
            lines += [f"# {key}: unset" if value is None else toml_line(key, value) for key, value in values[section].items()]
        return "\n".join(lines) + "\n"


TRACKER_FIELDS = (("wandb_project", "wandb", "'offline' or 'online'"), ("mlflow_experiment", "mlflow", "a tracking URI"))
"""(field, the field that turns its tracker on, what that takes): a field read only when its tracker is on."""


def check_tracker_fields(run: RunConfig) -> None:
    """A tracker's field given a value without its tracker (``run.wandb_project`` without ``run.wandb``) would be read by
    nothing: a ConfigError naming both, as ``[privacy]`` and the aggregation rules refuse a field their mode does not read."""
    for field, switch, takes in TRACKER_FIELDS:
        if getattr(run, switch) is None and getattr(run, field) != RunConfig.model_fields[field].default:
            raise ConfigError(f"run.{field}: applies with run.{switch} ({takes}), which is unset; set run.{switch} too, or leave run.{field} out")


def check_robustness(algorithm: str, values: dict[str, Any], federation: FederationConfig) -> None:
    """The robust aggregation rule against a round's size (``algorithm.krum_f``), and the simulated attack's fields against each other
    and the algorithm: one ConfigError line naming the field (``fedprior.algorithms.pieces.robust_aggregation``, ``fedprior.runtime.attacks``)."""
    if "aggregation_rule" in values:
        from fedprior.algorithms.pieces.robust_aggregation_fields import check_round_size, check_rule_fields
        from fedprior.runtime.sampling import clients_per_round

        check_rule_fields(values["aggregation_rule"], values["trim_fraction"], values["krum_f"], values["krum_m"])
        check_round_size(values["aggregation_rule"], values["krum_f"], values["krum_m"], clients_per_round(federation.num_clients, federation.fraction))
    f = federation
    if (f.attack == "none") != (f.malicious_fraction == 0):
        field, other = (
            ("federation.attack", "federation.malicious_fraction > 0")
            if f.attack == "none"
            else ("federation.malicious_fraction", f"federation.attack = {f.attack!r}")
        )
        raise ConfigError(f"{field}: needed with {other}; set both (an attack and the fraction of clients that runs it) or neither")
    if f.attack != "none":
        if int(round(f.malicious_fraction * f.num_clients)) == 0:  # runtime.attacks.malicious_count, without importing torch
            raise ConfigError(
                f"federation.malicious_fraction: round({f.malicious_fraction:g} x {f.num_clients} clients) = 0 malicious clients, so the attack "
                f"never runs; a fraction above {0.5 / f.num_clients:g} makes one (1 / {f.num_clients} = {1 / f.num_clients:g}: exactly one)"
            )
    if f.attack_scale is not None and f.attack in ("none", "label_flip"):
        raise ConfigError(
            f"federation.attack_scale: applies with federation.attack = 'sign_flip', 'scaled' or 'gaussian', not with {f.attack!r}; leave it unset"
        )
    if f.attack != "none" and "aggregation_rule" not in values:
        from fedprior.algorithms.registry import robust_algorithms

        raise ConfigError(
            f"federation.attack: simulated attacks act on clients whose reply is a model trained on labels; algorithm '{algorithm}' is not one of them; "
            f"accepted with: {', '.join(robust_algorithms())}"
        )


SYNTHETIC_FIELDS = ("synthetic_alpha", "synthetic_beta", "synthetic_iid")


def check_synthetic(config: ExperimentConfig) -> None:
    """The fields of ``data.dataset = 'synthetic'`` (``fedprior.data.synthetic``) only with it, and with it only what a federation
    generated per client allows: its own split by client (partition.scheme = 'natural'), no encoder, no files, no subset,
    no validation hold-out, no labeled/unlabeled split, no local test split (each client's 20% test split is its own)."""
    data = config.data
    if data.dataset != "synthetic":
        for name in SYNTHETIC_FIELDS:
            if getattr(data, name) is not None:
                raise ConfigError(f"data.{name}: applies to data.dataset = 'synthetic' only (it is '{data.dataset}'); remove it")
        return
    if data.synthetic_iid and (data.synthetic_alpha is not None or data.synthetic_beta is not None):
        raise ConfigError(
            "data.synthetic_alpha: Synthetic IID (data.synthetic_iid = true) shares one model and one feature distribution; remove synthetic_alpha and synthetic_beta"
        )
    refused = [
        ("partition.scheme", config.partition.scheme != "natural", "the synthetic federation comes split by client; accepted: natural"),
        ("encoder.name", config.encoder.name != "none", "the synthetic federation's features are the model's inputs; accepted: none"),
        ("data.root", data.root is not None, "the synthetic federation is generated, it reads no files; remove data.root"),
        ("data.train_subset", data.train_subset != 0, "applies to image datasets; accepted with data.dataset = 'synthetic': 0"),
        ("partition.num_labeled", config.partition.num_labeled != 0, "the synthetic clients hold labeled data only; accepted: 0"),
        (
            "partition.local_test_fraction",
            config.partition.local_test_fraction != 0,
            "each synthetic client already holds out 20% as its test split; accepted: 0",
        ),
        ("run.model_selection", config.run.model_selection != "last", "the synthetic federation has no validation split; accepted: last"),
    ]
    for name, wrong, why in refused:
        if wrong:
            raise ConfigError(f"{name}: {why} (with data.dataset = 'synthetic')")


def check_domains(config: ExperimentConfig) -> None:
    """``partition.domains`` (docs/feature-shift.md) with what it needs, before any data loads: a dataset of images (one with
    domains of its own for 'dataset'), a client for every synthetic domain, a scheme that splits inside a domain, no labeled split."""
    from fedprior.data.registry import DATASETS
    from fedprior.partition.domains import client_domains, parse_domains

    spec, p = parse_domains(config.partition.domains), config.partition
    if spec is None:
        return
    dataset = DATASETS.get(config.data.dataset)
    if dataset is not None and dataset.generated:
        raise ConfigError(f"partition.domains: '{config.data.dataset}' is generated per client, not a dataset of images; accepted with it: \"\"")
    if dataset is not None and (spec.kind == "dataset") != bool(dataset.domains):
        if spec.kind == "dataset":
            multi = ", ".join(n for n, d in DATASETS.items() if d.domains)
            raise ConfigError(
                f"partition.domains: 'dataset' uses the dataset's own domains, and '{config.data.dataset}' has none; accepted with it: 'rotation:K', 'style' (or use {multi})"
            )
        raise ConfigError(f"partition.domains: '{config.data.dataset}' has its own domains; accepted with it: 'dataset'")
    if spec.names:
        client_domains(config.federation.num_clients, len(spec.names))
    refused = [
        ("partition.scheme", p.scheme == "natural", "the natural owners ignore the domains; accepted: iid, shard, dirichlet, window, quantity"),
        ("partition.scenario", bool(p.scenario), "MFCL's scenarios are class windows over all clients; remove it"),
    ]
    for name, wrong, why in refused:
        if wrong:
            raise ConfigError(f"{name}: {why} (with partition.domains = {p.domains!r})")


def check_sampler(federation: FederationConfig) -> None:
    """``federation.sampler`` names a sampler (the shipped ones or one ``run.imports`` registered), and Power-of-Choice's d lies in [m, N]."""
    from fedprior.runtime.sampling import check_candidates, clients_per_round, sampler_for

    sampler_for(federation.sampler, federation.power_of_choice_candidates)
    check_candidates(federation.power_of_choice_candidates, federation.num_clients, clients_per_round(federation.num_clients, federation.fraction))


SECTIONS = ("data", "partition", "encoder", "algorithm", "federation", "privacy", "system", "run")


def toml_line(key: str, value: Any) -> str:
    """``key = value`` in TOML (the key quoted where it must be); a table (``partition.flwr_kwargs``) as an inline table, so that the
    keys after it stay in their section."""
    import tomli_w

    if isinstance(value, dict):
        name = tomli_w.dumps({key: 0}).rsplit(" = ", 1)[0]
        return f"{name} = {{{', '.join(toml_line(k, v) for k, v in value.items())}}}"
    return tomli_w.dumps({key: value}).rstrip("\n")


def preset_paths() -> dict[str, Path]:
    """Shipped presets by name: ``fedprior/presets/`` and each paper's ``papers/<paper>/presets/``."""
    from fedprior.experiments.paper_registry import preset_dirs  # filled by fedprior.papers

    return dict(presets_in(tuple(preset_dirs())))


@functools.cache
def presets_in(folders: tuple[Path, ...]) -> dict[str, Path]:
    """The presets of ``folders``, listed once per process (shipped files do not change; a sweep reads its config thousands of times)."""
    out: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.toml")):
            if path.stem in out:
                raise RuntimeError(f"preset '{path.stem}' is shipped twice: {out[path.stem]} and {path}")
            out[path.stem] = path
    return out


def list_presets() -> dict[str, str]:
    """Shipped presets: name -> description."""
    out = {}
    for name, path in preset_paths().items():
        with path.open("rb") as handle:
            out[name] = tomllib.load(handle).get("description", "")
    return out


def read_toml(source: str) -> tuple[str, dict[str, Any]]:
    """(name, raw dict) of a preset name or a TOML file path.

    A shipped preset's name wins over a file or folder of that name in the working
    directory; an argument with a slash or ending in ``.toml`` is always a path. The name is
    the file's ``name`` key when it has one (a run directory's own ``config.toml``), else
    its stem. A UTF-8 byte-order mark is accepted.
    """
    presets = preset_paths()
    if not source.strip():  # "" would be the working directory, a folder
        raise ConfigError(f"an empty preset name {source!r}; accepted: {', '.join(list_presets())} (or a path to a .toml file)")
    if source in presets and "/" not in source and not source.endswith(".toml"):
        path, name = presets[source], source
    elif "/" in source or source.endswith(".toml") or Path(source).exists():
        path, name = Path(source), Path(source).stem
        if path.is_dir():
            raise ConfigError(f"config file {source} is a folder, not a file; give the path of a .toml file")
        if not path.is_file():
            raise ConfigError(f"config file {source} does not exist")
    else:
        raise ConfigError(f"unknown preset '{source}'; accepted: {', '.join(list_presets())} (or a path to a .toml file)")
    raw = parse_toml_file(path)
    name = raw.pop("name", name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: name: input should be a non-empty string (got {name!r})")
    return name, raw


def parse_toml_file(path: Path) -> dict[str, Any]:
    """The TOML table of ``path``, or a ConfigError naming the file and what is wrong with it."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at position {error.start}); save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None


def parse_override(text: str, where: str = "--set") -> tuple[list[str], Any]:
    """``section.key=value`` -> (["section", "key"], value); the value is read as TOML, else as a string.

    ``where`` names the override in errors: ``--set`` on the command line, ``overrides[i]`` in the Python API.
    """
    expected = "section.key=value" if where == "--set" else "'section.key=value'"
    if not isinstance(text, str):
        raise ConfigError(f"{where} {text!r}: expected a string {expected}")
    if "=" not in text:
        raise ConfigError(f"{where} {text!r}: expected {expected}")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"{where} {text!r}: the key must be section.key with a section among {', '.join(SECTIONS)}")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return parts, value


def apply_overrides(raw: dict[str, Any], overrides: list[str], api: bool = False) -> dict[str, Any]:
    """``raw`` with ``section.key=value`` overrides applied; ``api``: errors name ``overrides[i]`` instead of ``--set``."""
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    for i, text in enumerate(overrides):
        where = f"overrides[{i}]" if api else "--set"
        (section, key), value = parse_override(text, where)
        if section not in SECTIONS:
            raise ConfigError(f"{where} {text!r}: unknown section '{section}'; accepted: {', '.join(SECTIONS)}")
        raw.setdefault(section, {})[key] = value
    return raw


def validate_config(raw: dict[str, Any]) -> ExperimentConfig:
    try:
        config = ExperimentConfig(**raw)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, (), _accepted_keys)) from None
    return config.checked()


def _accepted_keys(parent: tuple[str, ...]) -> list[str]:
    owner = ExperimentConfig if not parent else ExperimentConfig.model_fields[parent[0]].annotation
    assert isinstance(owner, type) and issubclass(owner, BaseModel), f"{parent[0]} is a section of the config"
    return list(owner.model_fields)


def load_config(
    source: str, overrides: list[str] | None = None, imports: list[str] | None = None, algorithm: str | None = None, name_swept: bool = False
) -> tuple[str, ExperimentConfig]:
    """(name, checked config) from a preset name or TOML path plus ``section.key=value`` overrides.

    ``imports`` (``--import``, already imported) are added to ``run.imports``, after the modules it names, but
    for those that registered only other algorithms than the config's (the run does not need them).
    ``algorithm`` (``--algorithm NAME``) replaces the whole ``[algorithm]`` section by ``name = NAME``
    before the overrides apply (``--set algorithm.KEY=VALUE`` then sets its hyperparameters; the others
    take their defaults). A preset changed by either gets the description of the run it now defines
    (:func:`described`).
    """
    name, raw = read_toml(source)
    given = {**raw, "algorithm": {"name": algorithm}} if algorithm is not None else raw
    changed = apply_overrides(given, overrides or [])
    section = changed.get("algorithm")
    running = str(section.get("name", "fedavg")) if isinstance(section, dict) else ""
    merged = with_imports(changed, [m for m in imports or [] if not registers_other_algorithms(m, running)])
    try:
        config = validate_config(merged)
    except ConfigError as error:
        hint = left_over_algorithm_keys(source, given, merged, overrides or [], name_swept)
        raise ConfigError(f"{error}; {hint}" if hint else str(error)) from None
    note = switched_algorithm_note(source, raw, config, overrides or [], algorithm)
    if note:
        warnings.warn(note, stacklevel=2)
    if name not in preset_paths() and (overrides or algorithm is not None):
        return name, described_file(source, raw, config)
    return name, described(name, config)


def switched_algorithm_note(source: str, raw: dict[str, Any], config: ExperimentConfig, overrides: list[str], algorithm: str | None) -> str:
    """Where the run's algorithm is not the one ``source`` was written for: the preset's algorithm values, away from the run
    algorithm's defaults, that the run takes or loses without being told ('' if none). ``--set algorithm.name=X`` carries them
    into X (only the name changes); ``--algorithm X`` drops them for X's defaults (the whole section is replaced)."""
    before = raw.get("algorithm")
    if not isinstance(before, dict) or before.get("name", "fedavg") == config.algorithm.name:
        return ""
    old, new = before.get("name", "fedavg"), config.algorithm.name
    set_here = {tuple(parse_override(text)[0]) for text in overrides}
    defaults = {key: p.default for key, p in algorithm_spec(new).hyperparameters().items()}
    differ = [key for key in before if key in defaults and ("algorithm", key) not in set_here and before[key] != defaults[key]]
    if not differ:
        return ""
    origin = f"the preset '{source}'" if source in preset_paths() and "/" not in source and not source.endswith(".toml") else source
    if algorithm is None:
        carried = ", ".join(f"algorithm.{key} = {before[key]!r} (its default {defaults[key]!r})" for key in differ)
        return (
            f"--set algorithm.name={new} keeps the other fields of {origin}'s [algorithm], written for '{old}': {carried}; "
            f"--algorithm {new} starts from {new}'s own defaults"
        )
    dropped = ", ".join(f"algorithm.{key} = {defaults[key]!r} ({new}'s default; {origin} has {before[key]!r})" for key in differ)
    keep = " ".join(f"--set algorithm.{key}={before[key]!r}" for key in differ)
    return f"--algorithm {new} replaces the [algorithm] section of {origin}, written for '{old}': {dropped}; {keep} {'keeps them' if len(differ) > 1 else 'keeps it'}"


def left_over_algorithm_keys(source: str, raw: dict[str, Any], merged: dict[str, Any], overrides: list[str], name_swept: bool = False) -> str:
    """Where ``--set algorithm.name=...`` gave a preset another algorithm: the preset's own algorithm keys that the new one
    does not accept, said to come from the preset, with the option that replaces the whole section ('' if none).
    ``name_swept``: the name came from ``--sweep algorithm.name=...``, where ``--algorithm`` (one name for every run) cannot help: a config per algorithm."""
    before, after = raw.get("algorithm"), merged.get("algorithm")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return ""
    old, new = before.get("name", "fedavg"), after.get("name", "fedavg")
    if old == new or not isinstance(new, str):
        return ""
    try:
        accepted = algorithm_spec(new).hyperparameters()
    except ConfigError:
        return ""
    overridden = {tuple(parse_override(text)[0]) for text in overrides}
    left = [f"algorithm.{key}" for key in before if key != "name" and key not in accepted and ("algorithm", key) not in overridden]
    if not left:
        return ""
    keys = ", ".join(left)
    origin = f"the preset '{source}'" if source in preset_paths() and "/" not in source and not source.endswith(".toml") else source
    where = f"{keys} {'come' if len(left) > 1 else 'comes'} from {origin}, written for its algorithm '{old}'"
    if name_swept:
        return (
            f"{where} (--sweep algorithm.name changes only the name): write a config for {new} "
            f"(fedprior presets show {source} --algorithm {new} > {new}.toml) and run it on its own, or sweep only names that take these fields"
        )
    return (
        f"{where} (--set algorithm.name changes only the name): "
        f"give --algorithm {new} instead, which replaces the whole [algorithm] section (then --set algorithm.KEY=VALUE sets its fields)"
    )


def with_imports(raw: dict[str, Any], imports: list[str]) -> dict[str, Any]:
    """``raw`` with ``imports`` appended to its ``run.imports`` (each module once); a ``run.imports`` that is no list is left to the check."""
    run = raw.get("run", {})
    if not imports or not isinstance(run, dict) or not isinstance(run.get("imports", []), list):
        return raw
    return {**raw, "run": {**run, "imports": list(dict.fromkeys([*run.get("imports", []), *imports]))}}


# -- a run's description, and its note, where it was made from a preset ---------------------------------------------

NOT_DESCRIBED = frozenset({"description", "federation.evaluate_every"})
"""Fields besides ``run.*`` and ``compare_groups.PLACEMENT`` that no description speaks of."""


def preset_changes(name: str, config: ExperimentConfig) -> dict[str, tuple[Any, Any]] | None:
    """``{"section.key": (preset's value, run's value)}`` for the fields in which ``config`` differs from the preset ``name``
    (None if ``name`` is no shipped preset). Of the algorithm's fields only the run's own are named: where the run's algorithm
    is not the preset's, the preset algorithm's hyperparameters that this one lacks are left out."""
    from fedprior.results.config_fields import config_differences

    if name not in preset_paths():
        return None
    preset = validate_config(read_toml(name)[1])
    changed = config_differences(preset.to_dict(), config.to_dict())
    own = {f"algorithm.{key}" for key in ("name", *config.algorithm.hyperparameters())}
    return {field: values for field, values in changed.items() if field != "description" and (not field.startswith("algorithm.") or field in own)}


def describes_the_experiment(field: str) -> bool:
    """Whether a change of ``field`` changes what the experiment is (its data, partition, encoder, algorithm or federation)."""
    from fedprior.results.compare_groups import PLACEMENT

    return not field.startswith("run.") and field not in PLACEMENT and field not in NOT_DESCRIBED


def described(name: str, config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with the description of the run it defines: the preset's where it differs from the preset ``name`` only in
    fields no description speaks of, else :func:`own_description` (a config not named after a preset keeps its own)."""
    changes = preset_changes(name, config)
    if not changes or not any(describes_the_experiment(field) for field in changes):
        return config
    return config.model_copy(update={"description": own_description(name, config)})


def described_file(source: str, raw: dict[str, Any], config: ExperimentConfig) -> ExperimentConfig:
    """``config``, made from the TOML file ``source`` (``raw``) by ``--set`` or ``--algorithm``, with the description of the run
    it defines where those changed what the file's description speaks of (its data, clients, algorithm, ...): its own, from
    its fields, naming the file and the fields changed (:func:`own_description`). A file saved by ``fedprior presets show
    NAME`` keeps the preset's words, which no longer say what runs once ``--set data.dataset=digits`` changed it."""
    from fedprior.results.config_fields import config_differences

    try:
        before = validate_config(raw).to_dict()
    except ConfigError:  # the file alone is not a config (the edits complete it): nothing of its description can be trusted
        before = {}
    fields = [field for field in config_differences(before, config.to_dict()) if describes_the_experiment(field)]
    if not fields:
        return config
    return config.model_copy(update={"description": own_description("", config, origin=f"{source}, changed: {', '.join(fields)}")})


def partition_text(config: ExperimentConfig) -> str:
    p = config.partition
    scheme = {
        "iid": "IID",
        "dirichlet": f"Dirichlet {p.alpha:g}" + (f", at least {p.min_size} images each" if p.min_size else "") + (", balanced sizes" if p.balance else ""),
        "shard": f"shards s={p.shards}",
        "window": f"scenario {p.scenario}" if p.scenario else f"class windows of {p.window}",
        "natural": "the dataset's own clients",
        "quantity": f"IID, {p.sizes} sizes up to {p.size_ratio:g}x",
    }.get(p.scheme) or flwr_text(p)
    if p.num_labeled:
        unlabeled = f"{p.num_unlabeled:,}" if p.num_unlabeled else "all other"
        scheme += f", {p.num_labeled:,} labels + {unlabeled} unlabeled images"
    return scheme


def flwr_text(p: PartitionConfig) -> str:
    """``partition.scheme = 'flwr:NAME'`` in words: the partitioner and the arguments fedprior does not set itself."""
    extra = ", ".join(f"{key}={value}" for key, value in p.flwr_kwargs.items())
    return f"flwr-datasets {p.scheme.removeprefix('flwr:')}" + (f" ({extra})" if extra else "") + ("" if p.flwr_shuffle else ", unshuffled")


def own_description(name: str, config: ExperimentConfig, origin: str = "") -> str:
    """The run in words, from its fields: algorithm, data, encoder, partition and budget, and the preset it was made from
    (``origin``: what it was made from in other words, e.g. a file and the fields changed)."""
    d, e, f = config.data, config.encoder, config.federation
    subset = f" ({d.train_subset:,}-image subset)" if d.train_subset else ""
    encoder = f" through the {e.name} encoder" if e.name != "none" else ""
    epochs = f"{f.local_epochs} local epoch{'s' * (f.local_epochs != 1)}"
    made_from = f"the preset '{name}'"
    p = config.privacy
    private = f", client-level DP ({p.dp}-side {p.clipping} clipping, C {p.clip_norm:g}, z {p.noise_multiplier:g})" if p.dp != "none" else ""
    if p.dp == "sample":
        private = f", record-level DP-SGD (Opacus, C {p.clip_norm:g}, z {p.noise_multiplier:g})"
    return (
        f"{config.algorithm.name} on {d.dataset}{subset}{encoder}: {f.num_clients} clients, {partition_text(config)}, "
        f"{100 * f.fraction:g}% per round, {f.rounds} rounds, {epochs}, batch {f.batch_size}{private}{system_text(config.system)} "
        f"(made from {origin or made_from})"
    )


def system_text(system: SystemConfig) -> str:
    """The system model in words for a run's description (``, log-normal devices, deadline 5 s, partial work``); '' without one."""
    if system.speed == "none":
        return f", round timeout {system.deadline:g} s" if system.deadline is not None else ""
    parts = [f"{'log-normal' if system.speed == 'lognormal' else 'constant'} devices"]
    if system.availability != "always":
        parts.append(f"{system.availability} availability {system.availability_p:g}")
    if system.deadline is not None:
        parts.append(f"deadline {system.deadline:g} s")
    if system.partial_work:
        parts.append(f"partial work ({system.straggler_rule})")
    if system.over_selection:
        parts.append(f"over-selection {system.over_selection:g}")
    return ", " + ", ".join(parts)


def preset_note(name: str, config: ExperimentConfig) -> str:
    """A line naming the fields this run changed from the preset it is named after ('' if none or no such preset).

    Where the changes reach what the preset's description speaks of, the run has its own
    description (:func:`described`) and the note quotes the preset's (report.md shows it under
    the description). Only the run's own fields are named: where the run's algorithm is not the
    preset's (``--algorithm``, an algorithm of your own), the preset algorithm's
    hyperparameters that this one does not have are left out, and one it has that the preset
    does not set is marked so.
    """
    changed = preset_changes(name, config)
    if not changed:
        return ""
    listed = ", ".join(f"{field} = {new!r} ({'not in the preset' if old is None else f'preset: {old!r}'})" for field, (old, new) in changed.items())
    preset = list_presets()[name]
    whose = "whose description this is" if config.description == preset else f'described as "{preset}"'
    return f"Changed from the preset '{name}', {whose}: {listed}."
