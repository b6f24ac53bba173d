"""A run directory: everything needed to inspect, resume and report one run.

    config.toml              the resolved config (every field), with the experiment name
    partition.npz            each client's training indices, by role
    partition.json           partition statistics (sizes, class counts, beta_cib, beta_hetero)
    partition.png            clients x classes heatmap
    metrics.jsonl            one JSON line per round
    checkpoint.safetensors   the whole run state after the last completed round (atomic)
    result.json              the summary, once the run has finished
    report.md, accuracy.png  a short report
    tensorboard/             TensorBoard event files (per-round metrics, the report's figures)
    tracking.json            the MLflow run this run logs to, when run.mlflow is set
"""

from __future__ import annotations

import json
import tomllib
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import tomli_w

from fedprior.errors import FedpriorError

if TYPE_CHECKING:  # reading a run folder (fedprior compare) needs neither the config models nor torch
    from fedprior.experiments.config import ExperimentConfig
    from fedprior.partition import Partition


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    config = property(lambda self: self.path / "config.toml")
    checkpoint = property(lambda self: self.path / "checkpoint.safetensors")
    metrics = property(lambda self: self.path / "metrics.jsonl")
    result = property(lambda self: self.path / "result.json")
    partition_indices = property(lambda self: self.path / "partition.npz")
    partition_stats = property(lambda self: self.path / "partition.json")
    partition_plot = property(lambda self: self.path / "partition.png")
    report = property(lambda self: self.path / "report.md")
    accuracy_plot = property(lambda self: self.path / "accuracy.png")
    tensorboard = property(lambda self: self.path / "tensorboard")
    tracking = property(lambda self: self.path / "tracking.json")

    @classmethod
    def new(cls, name: str, base: Path = Path("runs")) -> "RunDir":
        """A fresh folder ``runs/<name>-<timestamp>`` (suffixed if it exists)."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = base / f"{name}-{stamp}"
        suffix = 1
        while path.exists():
            suffix += 1
            path = base / f"{name}-{stamp}-{suffix}"
        return cls(path)

    @classmethod
    def existing(cls, path: Path) -> "RunDir":
        run = cls(path)
        if not run.config.is_file():
            raise FedpriorError(f"{path} is not a fedprior run directory (no config.toml)")
        return run

    def write_config(self, name: str, config: ExperimentConfig) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.config.write_text(tomli_w.dumps({"name": name, **config.to_dict()}))

    def read_config(self) -> tuple[str, ExperimentConfig]:
        from fedprior.experiments.config import validate_config

        raw = tomllib.loads(self.config.read_text())
        name = raw.pop("name", self.path.name)
        return name, validate_config(raw)

    def write_partition(self, partition: Partition, stats: dict[str, Any]) -> None:
        arrays = {f"{role}/{client}": idx for role, parts in partition.roles.items() for client, idx in enumerate(parts)}
        np.savez_compressed(self.partition_indices, **arrays)
        self.partition_stats.write_text(json.dumps(stats))

    def append_metrics(self, record: dict[str, Any]) -> None:
        with self.metrics.open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    def rewrite_metrics(self, records: list[dict[str, Any]]) -> None:
        self.metrics.write_text("".join(json.dumps(r) + "\n" for r in records))

    def write_result(self, summary: dict[str, Any]) -> None:
        self.result.write_text(json.dumps(summary, indent=2))
