"""What a SuperNode needs on its own disk: the task, and the partitions of the clients it hosts.

A node never builds the experiment (no dataset, no encoder): it rebuilds the
algorithm from the :class:`~fedprior.task.Task` and the algorithm's
config, and reads its clients' data from local files. A node folder holds::

    task.json              the task (classes, input shape, number of clients), the
                           algorithm's name and hyperparameters, local epochs, batch size
    prior.safetensors      the task's prior tensors (e.g. class text features)
    clients.safetensors    each hosted client's data, "<client id>/<field>"
    node.json              the ids of the clients this node hosts (a generated federation's: a range, three numbers)

Only the fields the algorithm reads are written (an unsupervised algorithm's node
gets no labels). :func:`export_nodes` splits the clients over N node folders
(client c on node c mod N); :func:`export_all` writes one folder with every client
(Flower's simulation, where each virtual node reads its own client's tensors only).

A federation generated per client (``data.dataset = 'synthetic'``, ``fedprior.runtime.generated_clients``)
writes no client data: ``task.json`` gets the generator's description (``generated``: seed, alpha,
beta, iid, N and the fields the algorithm reads), and :meth:`NodeData.client_data` generates a
client's training split when a round asks for it, the arrays of the in-process run. The export
then costs the same at N = 10^6 as at N = 10 (a few kB, no list of N ids).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from fedprior.algorithms.base import Algorithm, ClientData, client_fields
from fedprior.atomic import save_tensors
from fedprior.data.synthetic import SyntheticFederation
from fedprior.errors import FedpriorError
from fedprior.runtime.generated_clients import GeneratedClients
from fedprior.task import Task

TASK_FILE = "task.json"
PRIOR_FILE = "prior.safetensors"
CLIENTS_FILE = "clients.safetensors"
NODE_FILE = "node.json"
FORMAT = 1


def node_of(client_id: int, nodes: int) -> int:
    """The node folder that hosts ``client_id`` when the clients are split over ``nodes`` nodes."""
    return client_id % nodes


def task_description(experiment) -> dict[str, Any]:
    """The JSON part of what a node needs to rebuild the algorithm (see the module docstring)."""
    task, config = experiment.task, experiment.config
    return {
        "format": FORMAT,
        "name": experiment.name,
        "task": {
            "num_classes": task.num_classes,
            "input_shape": list(task.input_shape),
            "class_names": list(task.class_names),
            "num_clients": task.num_clients,
            "pixel_mean": list(task.pixel_mean),
            "pixel_std": list(task.pixel_std),
        },
        "algorithm": {"name": config.algorithm.name, "hyperparameters": config.algorithm.hyperparameters()},
        "federation": {
            "local_epochs": config.federation.local_epochs,
            "batch_size": config.federation.batch_size,
            "fraction": config.federation.fraction,
            "sampler": config.federation.sampler,
        },
        "privacy": config.privacy.model_dump(),  # client-side clipping runs on the nodes
        "attack": attack_description(experiment),  # the simulated misbehaving clients run on the nodes too
        "threads": experiment.threads.train,  # the run's thread policy for client updates (one unless run.threads)
        "device": config.run.device,
        "precision": config.run.precision,  # the clients' forward passes: what the run asked for, not fp32 on the nodes
        "compile": config.run.compile,
        "deterministic": config.run.deterministic,
        "cudnn_benchmark": config.run.cudnn_benchmark,
        **({"generated": generator_description(experiment)} if getattr(experiment, "generated", None) is not None else {}),
    }


def generator_description(experiment) -> dict[str, Any]:
    """What a node needs to generate the clients of ``experiment.generated`` itself (``fedprior.data.synthetic``):
    the Synthetic(alpha, beta) federation's parameters and the fields the algorithm reads."""
    federation = experiment.generated
    return {
        "dataset": "synthetic",
        "num_clients": federation.num_clients,
        "alpha": federation.alpha,
        "beta": federation.beta,
        "iid": federation.iid,
        "seed": federation.seed,
        "fields": list(client_fields(experiment.algorithm)),
    }


def attack_description(experiment) -> dict[str, Any] | None:
    """The run's simulated misbehaving clients as JSON (``fedprior.runtime.attacks.Misbehaviour``), None where none misbehaves."""
    from fedprior.runtime.attacks import Misbehaviour

    f = experiment.config.federation
    m = Misbehaviour.of_run(f.attack, f.attack_scale, experiment.config.run.seed, f.num_clients, f.malicious_fraction, experiment.task.num_classes)
    if m.attack == "none":
        return None
    return {"attack": m.attack, "scale": m.scale, "clients": sorted(m.clients), "num_classes": m.num_classes}


def _atomic_save(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Save atomically, with each tensor's strides in the metadata (see :meth:`NodeData.client_data`)."""
    strides = {k: list(v.stride()) for k, v in tensors.items()}
    save_tensors(tensors, path, metadata={"strides": json.dumps(strides)})


def _write_json(value: Any, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


def export_node(experiment, directory: Path, client_ids: Iterable[int]) -> Path:
    """Write one node folder holding ``client_ids``. A generated federation's clients are not written (the node
    generates them, see the module docstring), and a ``range`` of them is written as its three numbers."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    generated = getattr(experiment, "generated", None) is not None
    ids: range | list[int] = client_ids if generated and isinstance(client_ids, range) and client_ids.step > 0 else sorted(int(c) for c in client_ids)
    _write_json(task_description(experiment), directory / TASK_FILE)
    _atomic_save(dict(experiment.task.prior), directory / PRIOR_FILE)
    if generated:
        (directory / CLIENTS_FILE).unlink(missing_ok=True)  # a stale export's data must not be read instead
    else:
        tensors = {}
        for client_id in ids:
            for field, value in experiment.client_data(client_id).items():
                tensors[f"{client_id}/{field}"] = value
        _atomic_save(tensors, directory / CLIENTS_FILE)
    hosted = {"range": [ids.start, ids.stop, ids.step]} if isinstance(ids, range) else {"clients": ids}
    _write_json({"format": FORMAT, **hosted}, directory / NODE_FILE)
    return directory


def export_nodes(experiment, root: Path, nodes: int) -> list[Path]:
    """``nodes`` folders ``root/node-<k>``, node k hosting the clients c with c mod nodes = k."""
    num_clients = experiment.task.num_clients
    if not 1 <= nodes <= num_clients:
        raise FedpriorError(f"--nodes: {nodes} nodes for {num_clients} clients; accepted: 1..{num_clients}")
    return [export_node(experiment, Path(root) / f"node-{k}", range(k, num_clients, nodes)) for k in range(nodes)]  # node_of(c, nodes) == k


def export_all(experiment, directory: Path) -> Path:
    """One folder with every client (for Flower's simulation engine)."""
    return export_node(experiment, directory, range(experiment.task.num_clients))


class NodeData:
    """A node's view of its folder: the task, the rebuilt algorithm, its clients' data (read lazily)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        if not (self.directory / TASK_FILE).is_file():
            raise FedpriorError(f"{self.directory} holds no {TASK_FILE}: export the node's data first (docs/flower.md)")
        self.description = json.loads((self.directory / TASK_FILE).read_text())
        node_file = self.directory / NODE_FILE
        self.hosted: range | list[int] = read_hosted(json.loads(node_file.read_text())) if node_file.is_file() else []
        self._lock = threading.Lock()

    @cached_property
    def generated(self) -> GeneratedClients | None:
        """The generator of a federation generated per client (the export's ``generated``), None where the clients' data are files."""
        g = self.description.get("generated")
        if g is None:
            return None
        if g.get("dataset") != "synthetic":
            raise FedpriorError(f"{self.directory / TASK_FILE}: generated dataset {g.get('dataset')!r}; accepted: 'synthetic'")
        federation = SyntheticFederation(int(g["num_clients"]), alpha=float(g["alpha"]), beta=float(g["beta"]), iid=bool(g["iid"]), seed=int(g["seed"]))
        return GeneratedClients(federation, tuple(g["fields"]), torch.device("cpu"))

    @cached_property
    def task(self) -> Task:
        with safe_open(str(self.directory / PRIOR_FILE), framework="pt") as handle:
            prior = {k: handle.get_tensor(k) for k in handle.keys()}
        t = self.description["task"]
        return Task(
            num_classes=int(t["num_classes"]),
            input_shape=tuple(int(s) for s in t["input_shape"]),
            class_names=tuple(t["class_names"]),
            num_clients=int(t["num_clients"]),
            prior=prior,
            pixel_mean=tuple(float(v) for v in t.get("pixel_mean", ())),
            pixel_std=tuple(float(v) for v in t.get("pixel_std", ())),
        )

    @cached_property
    def algorithm(self) -> Algorithm:
        from fedprior.algorithms.base import Runtime
        from fedprior.algorithms.registry import algorithm_spec
        from fedprior.runtime.device import cudnn_autotune, resolve_device, set_deterministic

        if self.description.get("threads"):
            torch.set_num_threads(int(self.description["threads"]))
        deterministic = bool(self.description.get("deterministic", False))
        set_deterministic(deterministic)  # before anything touches the GPU, as on the server
        a, f = self.description["algorithm"], self.description["federation"]
        runtime = Runtime(
            local_epochs=int(f["local_epochs"]),
            batch_size=int(f["batch_size"]),
            device=resolve_device(self.description.get("device", "cpu")),
            precision=self.description.get("precision", "fp32"),
            compile=bool(self.description.get("compile", False)),
        )
        algorithm = algorithm_spec(a["name"]).build(self.task, a["hyperparameters"], runtime)
        cudnn_autotune(self.description.get("cudnn_benchmark", "auto"), deterministic, algorithm.batch_shapes)
        if "privacy" in self.description:  # the hosted clients' side of [privacy]: DP-SGD ('sample'), clipping ('client')
            from fedprior.privacy.config import PrivacyConfig
            from fedprior.privacy.record_level import with_record_level_dp
            from fedprior.privacy.wrap import with_privacy

            privacy = PrivacyConfig(**self.description["privacy"])
            algorithm = with_record_level_dp(algorithm, privacy, self.task, a["hyperparameters"], runtime)
            algorithm = with_privacy(
                algorithm, privacy, self.task.num_clients, float(f.get("fraction", 1.0)), str(f.get("sampler", "uniform")), accounted=False
            )
        attack = self.description.get("attack")
        if attack:  # after the honest clip, as in process (experiments.client_side.build_algorithm): an attacker sends what it wants
            from fedprior.runtime.attacks import Misbehaviour, with_attack

            algorithm = with_attack(algorithm, Misbehaviour(attack["attack"], float(attack["scale"]), frozenset(attack["clients"]), int(attack["num_classes"])))
        return algorithm

    def client_data(self, client_id: int) -> ClientData:
        """The data of one hosted client (only its tensors are read from disk).

        Each tensor gets back the strides it had in the process that exported it:
        kernels choose their memory format from the strides (a (N, 1, H, W) batch can
        be both contiguous and channels-last), and a different choice changes the
        last bits of a convolution's gradient, hence of the run's numbers.
        A generated federation's client is generated here (:attr:`generated`), as in process.
        """
        if self.generated is not None:
            if not 0 <= int(client_id) < self.generated.federation.num_clients:
                raise FedpriorError(f"client {client_id} is not one of the {self.generated.federation.num_clients} generated clients")
            return self.generated(int(client_id))
        prefix = f"{int(client_id)}/"
        with self._lock, safe_open(str(self.directory / CLIENTS_FILE), framework="pt") as handle:
            strides = json.loads((handle.metadata() or {}).get("strides", "{}"))
            data = {k[len(prefix) :]: _restride(handle.get_tensor(k), strides.get(k)) for k in handle.keys() if k.startswith(prefix)}
        if not data:
            raise FedpriorError(f"client {client_id} is not hosted in {self.directory}")
        return data


def read_hosted(node: dict[str, Any]) -> range | list[int]:
    """The client ids of a ``node.json``: its ``range`` (start, stop, step) or its list of ``clients``."""
    if "range" in node:
        start, stop, step = (int(v) for v in node["range"])
        return range(start, stop, step)
    return [int(c) for c in node["clients"]]


def _restride(tensor: torch.Tensor, strides: list[int] | None) -> torch.Tensor:
    if strides is None or tuple(strides) == tensor.stride() or len(strides) != tensor.dim():
        return tensor
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(tensor.shape, strides, strict=True) if n > 0)
    if tensor.numel() == 0 or span != tensor.numel() or any(s == 0 for n, s in zip(tensor.shape, strides, strict=True) if n > 1):
        return tensor  # not a dense layout: keep the standard one
    out = torch.empty_strided(tensor.shape, tuple(strides), dtype=tensor.dtype)
    return out.copy_(tensor)


_NODES: dict[str, tuple[int, NodeData]] = {}  # folder: (its task file's mtime, its NodeData)
_NODES_LOCK = threading.Lock()


def node_data(directory: Path) -> NodeData:
    """The process-wide NodeData of a folder (a Flower worker serves many messages; it reads the task once)."""
    key = str(Path(directory).resolve())
    stamp = (Path(key) / TASK_FILE).stat().st_mtime_ns if (Path(key) / TASK_FILE).is_file() else 0
    with _NODES_LOCK:
        cached = _NODES.get(key)
        if cached is None or cached[0] != stamp:
            cached = (stamp, NodeData(Path(key)))
            _NODES[key] = cached
        return cached[1]
