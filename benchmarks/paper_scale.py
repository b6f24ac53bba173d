"""The papers' own settings against the device's FLOP bound (issue 19 item 6): seconds per round, TFLOP/s, ratio to peak.

Three settings, each on synthetic data of the real shapes (random uint8 images, balanced
random labels; no dataset needed), registered as an in-memory dataset and run by the
library's own code path: ``load_config(preset, overrides)`` -> ``build_experiment`` ->
``simulate``, as ``fedprior run`` does (the algorithm from the registry, its data per
client from the partition, the round loop, sampling, aggregation):

- ``feddb``: FedDB ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1; ``papers/feddb/tables.py`` REAL): CIFAR-10-shaped
  images (50,000 x 3x32x32, 10,000 test), WRN-28-2, 100 clients, 10% a round, E = 5
  full-batch local steps, 4,000 labels and every other image unlabeled, Dirichlet 0.3,
  lr 0.03 cosine over 800 rounds, FixMatch's views (flip, a shift of 1/8, two RandAugment operations,
  Cutout of half the side); budget 800 rounds. ``fixmatch``, ``fedmatch``, ``semifl`` and ``fedrgd``: the
  baselines that share FedDB's engine, in the same setting.
- ``mfcl``: MFCL's server phase (the MFCL paper; ``papers/mfcl/tables.py`` FULL_MFCL): the
  representations of CIFAR-10 (50,000 images, two views each: 100,000 of 64x16x16, from
  the 64-wide sensor module) sent by 10 clients in scenario Sc2, then epochs of the
  64-wide ResNet-18 discriminator with NT-Xent over batches of 512 pairs; budget 100
  server epochs. The sensor stage is skipped (``federation.rounds = 0``): an epoch's cost
  does not depend on what the sensor learned. The upload (one round) is not timed.
- ``fedbm``: FedBM on OCT-C8 ("FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. IV-A2; ``papers/fedbm/tables.py`` REAL, OCT-C8
  beta 0.05 with the authors' README values): 18,400 training images of 3x128x128 (2,800
  validation, 2,800 test), 8 classes, ResNet-18 (the FedBM authors' ImageNet-stem form, ``resnet18-imagenet``), 12 clients,
  half a round, batch 8, 2 local epochs, the generator (CGDE, 64 wide) every 5 rounds;
  budget 200 rounds.

``--scale small`` keeps each setting's structure at a size the CPU runs in seconds (fewer
images and clients, narrower networks; FedDB's ConvNet instead of the WRN). ``--rounds N``
times N rounds (MFCL: N server epochs) after one warm-up round that is not timed (CUDA
kernels chosen, memory allocated). Every setting runs with ``run.workers = 1`` (one
process: what a GPU run should use), no checkpoint, and the test/validation evaluation
left out of the timed rounds: one evaluation is timed apart (``evaluation_seconds``) and
the projection adds one every ``federation.evaluate_every`` rounds (10: item 4 of the
issue). FedDB and its baselines keep an image only if its pseudo-label is confident; on
random images almost none is, so ``algorithm.threshold = 0.01`` keeps all of them: the
cost of a round late in training, when the strong view of every unlabeled image is
trained on (an upper bound).

How a round's FLOPs are counted: the timed rounds are run a second time, with the same
seed (so the same clients, data and steps), inside ``FlopCounterMode``
(:class:`fedprior.runtime.flops.FlopTally`): every matrix product and convolution of the
round, forward and backward, as the algorithm issues them (pseudo-labeling and APP-U
forward passes, augmentation, the generator, the aggregation), 2 FLOPs a multiply-add;
elementwise, normalization and optimizer work is not counted. The FLOPs inside the client
updates are counted apart (``client``), as are their seconds (the update wrapped with a
device synchronization on each side). A round is counted whole rather than as one batch's
forward and backward times the batches: FedDB's "batch" is a client's whole data (full-batch
steps over clients of different sizes), its rounds also run forward-only passes
(pseudo-labels, APP-U), and FedBM's add the generator's images; counting what runs leaves
nothing to model by hand (``tests/runtime/test_flops.py`` checks the counter against a hand count
of a ConvNet batch's convolutions). TFLOP/s = counted FLOPs / timed seconds, over the
timed rounds. The ratio to peak uses the dense peak of the device for the precision
(:data:`fedprior.runtime.flops.PEAK_TFLOPS`: H100/H200 ~989 bf16, ~67 fp32); the CPU has
no peak in the table: ``peak_tflops`` and the ratios are null there.

    python benchmarks/paper_scale.py [--device cpu|cuda] [--precision fp32|bf16] [--rounds N] [--scale small|paper] [--only feddb mfcl fedbm] [--no-evaluation] [--set KEY=VALUE] [--concurrent K] [--compile]

``--concurrent K`` and ``--compile`` decide the defaults of ``run.concurrent_clients`` and
``run.compile`` on a GPU: after the measurement above, the same rounds run again, on the
client data resident on the device as in a run, timed as whole rounds (a device sync at each
end, no update timed apart, evaluation left out): first one update at a time and eager (the
baseline, in this same process), then with K updates at once (``concurrent``: each on its own
CUDA stream), compiled (``compile``; its warm-up round holds the compilation), and both
(``compile_and_concurrent``). Each gets its seconds per round, ``speedup`` (baseline seconds
per round / its own: above 1 is faster) and ``largest_state_difference`` from the baseline's
final state (concurrent updates: 0 expected; compiled: float tolerance). An algorithm that
cannot (FedBM and MFCL train their clients one at a time and do not compile) is listed as
skipped; on the CPU compiling is skipped (a run refuses it there) and the concurrent lanes
are threads without streams (their speed there says nothing about a GPU's). E.g.
``python benchmarks/paper_scale.py --device cuda --precision bf16 --scale paper --only feddb --rounds 5 --concurrent 2 --compile``.

Prints one JSON line per setting and writes ``benchmarks/results/paper_scale_<device>.json``
(the command, the machine, the numbers); on a GPU at paper scale:
``python benchmarks/paper_scale.py --device cuda --precision bf16 --scale paper``.
Targets (issue 19): FedDB's 800 rounds within 10 minutes on one H100, at least 30% of dense
bf16 peak in the client updates; an MFCL server epoch within 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from shared import command_line, load, machine

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, State
from fedprior.data.cinic import CLASS_NAMES as CINIC_CLASSES
from fedprior.data.dataset import Dataset
from fedprior.data.oct_c8 import CLASS_NAMES as OCT_C8_CLASSES
from fedprior.data.registry import DatasetSpec, register
from fedprior.errors import ConfigError
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.client_side import build_algorithm
from fedprior.experiments.config import load_config
from fedprior.papers.feddb.tables import PAPER_STRONG_VIEWS, PAPER_WEAK_VIEWS
from fedprior.runtime.flops import FlopTally, device_name, peak_tflops
from fedprior.runtime.simulation import simulate

RESULTS = Path(__file__).parent / "results"
EVALUATE_EVERY = 10
CIFAR_CLASSES = CINIC_CLASSES  # CINIC-10 has CIFAR-10's classes
OCT_CLASSES = OCT_C8_CLASSES


@dataclass(frozen=True)
class Shape:
    """A synthetic dataset: split sizes, image shape and class names."""

    train: int
    test: int
    image: tuple[int, int, int]
    classes: tuple[str, ...]
    val: int = 0


@dataclass(frozen=True)
class Setting:
    preset: str
    what: str
    budget: int
    """The paper's rounds (MFCL: server epochs) for the projection."""
    timed_stage: str
    """The stage whose rounds are timed (MFCL: ``server``, one epoch a round)."""
    data: dict[str, Shape]
    """By scale."""
    overrides: dict[str, tuple[str, ...]]
    """By scale."""
    small: str = ""
    """What the small scale changes."""
    common: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    full_batch: bool = False
    """Client steps on a client's whole data (the FedDB family): the plain loop's batch is the images a client holds on
    average; else ``federation.batch_size``."""


FEDDB_COMMON = (
    "partition.scheme=dirichlet",
    "partition.alpha=0.3",
    "partition.num_unlabeled=0",
    "federation.fraction=0.1",
    "federation.local_epochs=5",
    "algorithm.lr=0.03",
    "algorithm.lr_decay_rounds=800",
    "algorithm.threshold=0.01",
    *PAPER_WEAK_VIEWS,  # FixMatch's views on 32x32 images, as the paper: not the embedded presets' mild ones
    *PAPER_STRONG_VIEWS,
)
MFCL_COMMON = ("data.train_subset=0", "federation.rounds=0", "federation.num_clients=10", "federation.fraction=1.0")
FEDBM_COMMON = (
    "federation.batch_size=8",
    "federation.fraction=0.5",
    "federation.local_epochs=2",
    "data.train_subset=0",
    "partition.alpha=0.05",
    "algorithm.prompts=oct",
    "algorithm.tau=17.5",
    "algorithm.lambda_dis=0.1",
    "algorithm.synthetic_batch=16",
)

SETTINGS: dict[str, Setting] = {
    "feddb": Setting(
        preset="feddb",
        what="FedDB, CIFAR-10 shape: WRN-28-2, 100 clients, 10% a round, E = 5 full-batch steps, 4,000 labels + 46,000 unlabeled",
        budget=800,
        timed_stage="federated",
        small="2,000 images (200 labeled), 20 clients (2 a round), ConvNet 8 wide instead of the WRN",
        data={
            "paper": Shape(50000, 10000, (3, 32, 32), CIFAR_CLASSES),
            "small": Shape(2000, 500, (3, 32, 32), CIFAR_CLASSES),
        },
        overrides={
            "paper": ("algorithm.model=wrn28-2", "federation.num_clients=100", "partition.num_labeled=4000"),
            "small": ("algorithm.model=convnet", "algorithm.width=8", "federation.num_clients=20", "partition.num_labeled=200"),
        },
        common=FEDDB_COMMON,
        notes=("algorithm.threshold = 0.01: every unlabeled image is pseudo-labeled (random images are never confident at 0.95): a late round's cost",),
        full_batch=True,
    ),
    "mfcl": Setting(
        preset="mfcl",
        what="MFCL server phase, CIFAR-10 shape: 100,000 representations (50,000 pairs of 64x16x16), ResNet-18 64 wide, NT-Xent, batches of 512 pairs",
        budget=100,
        timed_stage="server",
        small="1,000 images (1,000 pairs of 16x16x16), sensor module 16 wide, ResNet-18 8 wide, batches of 256 pairs",
        data={
            "paper": Shape(50000, 10000, (3, 32, 32), CIFAR_CLASSES),
            "small": Shape(1000, 200, (3, 32, 32), CIFAR_CLASSES),
        },
        overrides={
            "paper": ("algorithm.sensor_width=64", "algorithm.disc_width=64", "algorithm.server_batch_size=512"),
            "small": ("algorithm.sensor_width=16", "algorithm.disc_width=8", "algorithm.server_batch_size=256"),
        },
        common=MFCL_COMMON,
        notes=(
            "MFCL takes fp32 only (its factory has no precision): --precision bf16 runs it in fp32",
            "the sensor stage is skipped (federation.rounds = 0) and the upload round is not timed; the budget is the server phase alone",
        ),
    ),
    "fedbm": Setting(
        preset="fedbm",
        what="FedBM, OCT-C8 shape: 18,400 images of 3x128x128, ResNet-18 (the authors', ImageNet stem), 12 clients, half a round, batch 8, E = 2, CGDE every 5 rounds",
        budget=200,
        timed_stage="federated",
        small="360 images of 3x64x64, 6 clients, the small ConvNet instead of ResNet-18, generator 8 wide, 2 steps of 8, every round",
        data={
            "paper": Shape(18400, 2800, (3, 128, 128), OCT_CLASSES, val=2800),
            "small": Shape(360, 80, (3, 64, 64), OCT_CLASSES, val=80),
        },
        overrides={
            "paper": ("algorithm.model=resnet18-imagenet", "federation.num_clients=12", "algorithm.generator_width=64"),
            "small": (
                "algorithm.model=convnet-small",
                "federation.num_clients=6",
                "algorithm.generator_width=8",
                "algorithm.generator_steps=2",
                "algorithm.generator_batch=8",
                "algorithm.generator_every=1",
            ),
        },
        common=FEDBM_COMMON,
        notes=(
            "a round's cost depends on whether CGDE trains in it (every 5 rounds in the paper's setting): time 5 rounds (or a multiple) for a fair mean; "
            "the small scale trains CGDE every round (generator_every = 1), so each timed round runs it",
        ),
    ),
}


SEMI_SUPERVISED_BASELINES = {
    # the baselines that share the semi-supervised engine, in FedDB's setting; FedMatch keeps its code's own optimizer and
    # schedule (SGD lr 1e-3, plateau decay: its factory has no cosine schedule), the others take FedDB's lr and cosine
    "fixmatch": FEDDB_COMMON,
    "fedrgd": FEDDB_COMMON,
    "semifl": FEDDB_COMMON,
    "fedmatch": tuple(o for o in FEDDB_COMMON if not o.startswith(("algorithm.lr=", "algorithm.lr_decay_rounds="))),
}
for _name, _common in SEMI_SUPERVISED_BASELINES.items():
    SETTINGS[_name] = replace(SETTINGS["feddb"], preset=_name, what=SETTINGS["feddb"].what.replace("FedDB", _name, 1), common=_common)


def synthetic(name: str, shape: Shape, seed: int = 0) -> Dataset:
    """Random uint8 images of ``shape`` with balanced random labels (every class equally often, shuffled)."""
    rng = np.random.default_rng(seed)

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        images = rng.integers(0, 256, size=(n, *shape.image), dtype=np.uint8)
        return images, rng.permutation(np.arange(n) % len(shape.classes)).astype(np.int64)

    (train_x, train_y), (test_x, test_y) = split(shape.train), split(shape.test)
    val = split(shape.val) if shape.val else (None, None)
    return Dataset(name, train_x, train_y, test_x, test_y, shape.classes, source="synthetic", val_images=val[0], val_labels=val[1])


def experiment(key: str, setting: Setting, scale: str, device: str, precision: str, rounds: int, extra: list[str]) -> Experiment:
    """The setting built as a run builds it: its preset, the overrides, a synthetic dataset registered under its name."""
    name = f"synthetic-{key}-{scale}"
    dataset = synthetic(name, setting.data[scale])
    register(DatasetSpec(name, lambda root, download: dataset, f"random images of {key}'s shape", builtin=True))
    algorithm_precision = "fp32" if key == "mfcl" else precision
    total = 1 + rounds  # the warm-up round, then the timed ones
    count = f"algorithm.server_epochs={total}" if key == "mfcl" else f"federation.rounds={total}"
    overrides = [
        f"data.dataset={name}",
        *setting.common,
        *setting.overrides[scale],
        count,
        f"federation.evaluate_every={EVALUATE_EVERY}",
        f"run.device={device}",
        f"run.precision={algorithm_precision}",
        "run.workers=1",
        *extra,
    ]
    _, config = load_config(setting.preset, overrides)
    return build_experiment(setting.preset, config)


@dataclass
class Tally:
    """Per (stage, round): wall seconds and FLOPs of the round and of its client updates."""

    seconds: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    flops: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    client_seconds: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    client_flops: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))


def synchronizer(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else lambda: None


def instrumented(algorithm: Algorithm, tally: Tally, counter: FlopTally | None, sync: Callable[[], None]) -> Algorithm:
    """``algorithm`` with each client update timed (and its FLOPs counted) and evaluation left out of the rounds."""
    update = algorithm.client_update

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        sync()
        flops, started = counter.total() if counter else 0, time.perf_counter()
        out = update(message, state, data, info)
        sync()
        tally.client_seconds[(info.stage, info.round)] += time.perf_counter() - started
        if counter:
            tally.client_flops[(info.stage, info.round)] += counter.total() - flops
        return out

    return algorithm.with_(client_update=client_update, client_update_many=None, evaluate=lambda state, data: {"accuracy": 0.0}, validate=None)


def run(exp: Experiment, count: bool) -> tuple[Tally, State]:
    """Every round of ``exp`` in the in-process runtime; timed (``count`` False) or inside FlopCounterMode (True)."""
    tally, sync = Tally(), synchronizer(exp.device)
    counter = FlopTally(by_module=False) if count else None  # totals only: FedMatch's autograd.grad refuses the module tracker's hooks
    mark = {"t": 0.0, "flops": 0}

    def on_round(record: dict[str, Any]) -> None:
        sync()
        now, flops = time.perf_counter(), counter.total() if counter else 0
        if record["round"] > 0:  # round 0: the initial state (no training)
            tally.seconds[(record["stage"], record["round"])] = now - mark["t"]
            tally.flops[(record["stage"], record["round"])] = flops - mark["flops"]
            # progress on stderr, so that a run stopped at a time limit still says how far it got (the GPU run of 2026-11-27 did not)
            print(f"{'counted' if count else 'timed'} {record['stage']} round {record['round']}: {now - mark['t']:.2f} s", file=sys.stderr, flush=True)
        mark["t"], mark["flops"] = time.perf_counter(), (counter.total() if counter else 0)

    algorithm = instrumented(exp.algorithm, tally, counter, sync)
    fed = exp.config.federation
    client_data, test = exp.resident_inputs()  # on the run's device, once, as `fedprior run` has them
    loop = replace(exp.round_loop(), concurrent_clients=1)  # one update at a time: each is timed (and counted) apart
    if counter:
        with counter:
            result = simulate(algorithm, client_data, fed.num_clients, test, loop, on_round=on_round)
    else:
        result = simulate(algorithm, client_data, fed.num_clients, test, loop, on_round=on_round)
    return tally, result.state


def round_seconds(exp: Experiment, algorithm: Algorithm, stage: str, concurrent: int = 1) -> tuple[list[float], float, State]:
    """(seconds of each timed round, seconds of the warm-up round, the final state) of ``algorithm`` on ``exp``'s rounds, with
    ``concurrent`` client updates at once: the round alone (a device sync at each end), no update timed apart, evaluation left out."""
    sync = synchronizer(exp.device)
    seconds: dict[tuple[str, int], float] = {}
    mark = {"t": 0.0}

    def on_round(record: dict[str, Any]) -> None:
        sync()
        if record["round"] > 0:
            seconds[(record["stage"], record["round"])] = time.perf_counter() - mark["t"]
        mark["t"] = time.perf_counter()

    plain = algorithm.with_(evaluate=lambda state, data: {"accuracy": 0.0}, validate=None)
    client_data, test = exp.resident_inputs()
    loop = replace(exp.round_loop(), concurrent_clients=concurrent)
    result = simulate(plain, client_data, exp.config.federation.num_clients, test, loop, on_round=on_round)
    rounds = sorted(r for s, r in seconds if s == stage and r > 1)
    return [seconds[(stage, r)] for r in rounds], seconds[(stage, 1)], result.state


def largest_difference(a: State, b: State) -> float:
    """The largest absolute difference between two states' floating-point tensors (0.0: the same numbers)."""
    keys = [k for k in a if a[k].is_floating_point()]
    return max((float((a[k].double() - b[k].double()).abs().max()) for k in keys if a[k].numel()), default=0.0)


VARYING = (0.1, 1.0)
"""``--shapes varying``: each client update keeps a share of its unlabeled images drawn uniformly from this range."""


def with_varying_shapes(algorithm: Algorithm, low: float = VARYING[0], high: float = VARYING[1]) -> Algorithm:
    """``algorithm`` whose client updates each see a share in [low, high] of their unlabeled images, new for every client and
    round (drawn from the round and client id, so both timed passes see the same shapes).

    What tau = 0.95 does to the shapes of a real run, where the confident subset changes every round: on random images
    nothing is confident at 0.95, so the benchmark keeps every image confident (threshold 0.01) and varies how many there
    are. It also shrinks the pseudo-labeling and APP-U passes, which see every unlabeled image in a real run (forward only;
    the FLOPs are counted as they run, so TFLOP/s stays honest).
    """
    update = algorithm.client_update

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        if "x_unlabeled" in data and data["x_unlabeled"].shape[0]:
            share = np.random.default_rng([info.round, info.client_id]).uniform(low, high)
            keep = max(1, round(share * data["x_unlabeled"].shape[0]))
            data = {**data, **{k: data[k][:keep] for k in ("x_unlabeled", "y_unlabeled") if k in data}}
        return update(message, state, data, info)

    return algorithm.with_(client_update=client_update, client_update_many=None)


def plain_batch(exp: Experiment, setting: Setting) -> int:
    """The plain loop's batch: a client's whole data on average (full-batch settings), else ``federation.batch_size``."""
    if setting.full_batch:
        return max(1, round(exp.dataset.train_labels.shape[0] / exp.config.federation.num_clients))
    return exp.config.federation.batch_size


@dataclass
class Yardstick:
    """The plain loop's pieces: the run's network built fresh, one fixed batch on the device, and its optimizer."""

    hyperparameters: dict[str, Any]
    model: torch.nn.Module
    x: torch.Tensor
    y: torch.Tensor
    optimizer: torch.optim.Optimizer

    def forward_backward(self, precision: str) -> None:
        from fedprior.algorithms.pieces.precision import autocast

        with autocast(self.x.device, precision):
            loss = torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        loss.backward()


def yardstick(exp: Experiment, setting: Setting) -> Yardstick:
    """The run's network (its ``model``, ``norm`` and ConvNet ``width``), a batch of :func:`plain_batch` random standardized
    images with random labels, resident on the device, and SGD with the run's lr, momentum, Nesterov and weight decay
    (torch's default kernels); on CUDA the model and the batch channels-last."""
    from fedprior.algorithms.registry import algorithm_spec
    from fedprior.models import build_model

    hp = algorithm_spec(exp.config.algorithm.name).validate(exp.config.algorithm.hyperparameters())
    options = {k: hp[k] for k in ("norm",) if k in hp}
    if hp.get("model") == "convnet" and "width" in hp:
        options["width"] = hp["width"]
    device = exp.device
    torch.manual_seed(0)
    model = build_model(hp["model"], exp.task, **options).to(device)
    batch = plain_batch(exp, setting)
    x = torch.randn(batch, *exp.task.input_shape, device=device)
    y = torch.randint(0, exp.task.num_classes, (batch,), device=device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format
        x = x.contiguous(memory_format=torch.channels_last)
    momentum = float(hp.get("momentum", 0.9))
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=float(hp.get("lr", 0.03)),
        momentum=momentum,
        nesterov=bool(hp.get("nesterov", False)) and momentum > 0,
        weight_decay=float(hp.get("weight_decay", 5e-4)),
    )
    model.train()
    return Yardstick(hp, model, x, y, optimizer)


def plain_step(exp: Experiment, setting: Setting) -> tuple[Callable[[], None], int, str]:
    """(one step of the plain loop, its batch, the network's name): :func:`plain_loop`'s step on :func:`yardstick`'s pieces."""
    y = yardstick(exp, setting)
    precision = exp.config.run.precision

    def step() -> None:
        y.optimizer.zero_grad(set_to_none=True)
        y.forward_backward(precision)
        y.optimizer.step()

    return step, y.x.shape[0], str(y.hyperparameters["model"])


def plain_loop(exp: Experiment, setting: Setting, steps: int) -> dict[str, Any]:
    """The yardstick: a plain PyTorch loop of the same network, batch, precision and optimizer, as a user would write it
    (:func:`plain_step`), cuDNN autotuned on CUDA (one shape). Warm-up steps, then ``steps`` timed; one step's FLOPs
    counted as fedprior's are."""
    step, batch, model = plain_step(exp, setting)
    device = exp.device
    sync = synchronizer(device)
    autotuned = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True  # one shape: what a hand-written loop would do
    try:
        for _ in range(3):
            step()
        sync()
        started = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        seconds = (time.perf_counter() - started) / steps
        with FlopTally() as counter:
            step()
        flops = counter.total()
    finally:
        torch.backends.cudnn.benchmark = autotuned
    return {
        "model": model,
        "batch": batch,
        "steps": steps,
        "seconds_per_step": round(seconds, 6),
        "images_per_second": round(batch / seconds, 1),
        "tflop_per_step": round(flops / 1e12, 6),
        "tflops": rate(flops, seconds),
    }


def kernel_profile(exp: Experiment, setting: Setting) -> dict[str, Any]:
    """One more round under ``torch.profiler``: its operator calls and (on CUDA) kernel launches, and where they come from.

    The round runs as a run runs it (client data resident, evaluation left out); with its optimizer steps counted, its calls
    per step stand beside one step of the plain loop (``plain_step``). Beside it, one client-sized batch of each
    piece of a client step is profiled alone (the weak and strong views, the network's forward and backward, the optimizer's
    step, gradient clipping), so a launch count can be put on each: the strong view's RandAugment computes every operation
    on the whole batch and selects per image, so its launches do not grow with the batch but may rival the network's.
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if exp.device.type == "cuda" else [])]
    sync = synchronizer(exp.device)

    def counts(block: Callable[[], Any], warm: bool = True) -> dict[str, Any]:
        if warm:
            block()  # once unprofiled: lazy set-up (operation tables, kernels chosen) is not a step's cost
        sync()
        with profile(activities=activities) as prof:
            started = time.perf_counter()
            block()
            sync()
            wall = time.perf_counter() - started
        events = prof.key_averages()
        out: dict[str, Any] = {
            "wall_seconds": round(wall, 4),
            "aten_calls": sum(e.count for e in events if e.key.startswith("aten::")),
            "launches": sum(e.count for e in events if e.key.startswith(("cudaLaunchKernel", "cuLaunchKernel"))),
            "optimizer_steps": sum(e.count for e in events if e.key.startswith("Optimizer.step#")),
        }
        if out["optimizer_steps"]:
            out["aten_calls_per_step"] = round(out["aten_calls"] / out["optimizer_steps"], 1)
        if exp.device.type == "cuda":
            out["device_busy_seconds"] = round(sum(e.self_device_time_total for e in events) / 1e6, 4)
        out["top"] = [
            {"op": e.key, "calls": e.count, "self_cpu_ms": round(e.self_cpu_time_total / 1e3, 2)}
            for e in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
        ]
        return out

    plain = exp.algorithm.with_(evaluate=lambda state, data: {"accuracy": 0.0}, validate=None)
    client_data, test = exp.resident_inputs()
    loop = replace(exp.round_loop(), concurrent_clients=1, rounds=1)
    out: dict[str, Any] = {"round": counts(lambda: simulate(plain, client_data, exp.config.federation.num_clients, test, loop), warm=False)}
    out["plain_step"] = counts(plain_step(exp, setting)[0])  # the yardstick's step: its calls against a round's per step
    if setting.full_batch:
        out["pieces"] = client_step_pieces(exp, setting, counts)
    return out


def client_step_pieces(exp: Experiment, setting: Setting, counts: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Operator calls and launches of each piece of one full-batch client step, on :func:`yardstick`'s client-sized batch
    (``kernel_profile``), with the run's weak and strong views."""
    from fedprior.algorithms.engines.semi_supervised import views
    from fedprior.data.augment import device_generator

    y = yardstick(exp, setting)
    augment = views(exp.task, y.hyperparameters)
    generator = torch.Generator().manual_seed(0)
    device_generator(generator, exp.device)
    parameters = list(y.model.parameters())
    return {
        "batch": y.x.shape[0],
        "weak_view": counts(lambda: augment.weak(y.x, generator)),
        "strong_view": counts(lambda: augment.strong(y.x, generator)),
        "forward_backward": counts(lambda: y.forward_backward(exp.config.run.precision)),
        "optimizer_step": counts(y.optimizer.step),
        "clip_grad_norm": counts(lambda: torch.nn.utils.clip_grad_norm_(parameters, 1.0)),
    }


def variants(exp: Experiment, setting: Setting, args: argparse.Namespace) -> dict[str, Any]:
    """``--concurrent K`` and ``--compile``: the same rounds timed one update at a time and eager (the baseline, in this run),
    then with K updates at once and/or compiled; per variant its seconds per round, the ratio to the baseline (> 1: faster)
    and the largest difference of its final state from the baseline's (concurrent: 0 expected; compiled: float tolerance)."""
    stage = setting.timed_stage
    base, _, base_state = round_seconds(exp, exp.algorithm, stage)
    base_mean = sum(base) / len(base)
    out: dict[str, Any] = {"baseline_seconds_per_round": round(base_mean, 4), "baseline_round_seconds": [round(x, 4) for x in base]}

    def entry(seconds: list[float], warmup: float, state: State) -> dict[str, Any]:
        mean = sum(seconds) / len(seconds)
        return {
            "seconds_per_round": round(mean, 4),
            "round_seconds": [round(x, 4) for x in seconds],
            "warmup_round_seconds": round(warmup, 4),
            "speedup": round(base_mean / mean, 4),
            "largest_state_difference": largest_difference(base_state, state),
        }

    if args.concurrent > 1:
        if exp.algorithm.thread_safe_updates:
            out["concurrent"] = {"clients": args.concurrent, **entry(*round_seconds(exp, exp.algorithm, stage, args.concurrent))}
        else:
            out["concurrent"] = {"clients": args.concurrent, "skipped": f"algorithm '{exp.algorithm.name}' trains its clients one at a time"}
    if args.compile:
        if exp.device.type == "cpu":
            out["compile"] = {"skipped": "run.compile is refused on the CPU (docs/runtime.md)"}
        else:
            config = exp.config.model_copy(update={"run": exp.config.run.model_copy(update={"compile": True})})
            try:
                compiled = build_algorithm(config, exp.task, exp.device)
            except ConfigError as error:
                out["compile"] = {"skipped": str(error)}
            else:
                out["compile"] = entry(*round_seconds(exp, compiled, stage))
                if args.concurrent > 1 and compiled.thread_safe_updates:
                    out["compile_and_concurrent"] = {"clients": args.concurrent, **entry(*round_seconds(exp, compiled, stage, args.concurrent))}
    return out


def evaluation_seconds(exp: Experiment, state: State) -> float:
    """One evaluation as the round loop runs it: the validation split (where the run selects on it) and the test set."""
    sync = synchronizer(exp.device)
    sync()
    started = time.perf_counter()
    if exp.algorithm.validate is not None:
        exp.algorithm.validate(state)
    exp.algorithm.evaluate(state, exp.test)
    sync()
    return time.perf_counter() - started


def rate(flops: float, seconds: float) -> float | None:
    return round(flops / seconds / 1e12, 6) if seconds > 0 else None


def ratio(tflops: float | None, peak: float | None) -> float | None:
    return round(tflops / peak, 4) if tflops is not None and peak else None


def measure(key: str, setting: Setting, args: argparse.Namespace) -> dict[str, Any]:
    built = time.perf_counter()
    exp = experiment(key, setting, args.scale, args.device, args.precision, args.rounds, args.extra)
    build_seconds = time.perf_counter() - built
    autotuned = torch.backends.cudnn.benchmark  # as the build set it for the algorithm (run.cudnn_benchmark)
    varying = args.shapes == "varying" and setting.full_batch
    if varying:
        exp = replace(exp, algorithm=with_varying_shapes(exp.algorithm))
    print(f"{key}: built in {build_seconds:.1f} s", file=sys.stderr, flush=True)
    timed, state = run(exp, count=False)
    evaluation = evaluation_seconds(exp, state) if args.evaluation else None
    if evaluation is not None:
        print(f"{key}: evaluation {evaluation:.1f} s", file=sys.stderr, flush=True)
    counted, _ = run(exp, count=True)
    yardstick = plain_loop(exp, setting, args.plain_steps) if setting.timed_stage == "federated" else None
    profiled = kernel_profile(exp, setting) if args.profile and setting.timed_stage == "federated" else None
    stage = setting.timed_stage
    rounds = sorted(r for s, r in timed.seconds if s == stage and r > 1)  # round 1 of the timed stage warms up
    seconds = [timed.seconds[(stage, r)] for r in rounds]
    flops = [counted.flops[(stage, r)] for r in rounds]
    client_seconds = sum(timed.client_seconds[(stage, r)] for r in rounds)
    client_flops = sum(counted.client_flops[(stage, r)] for r in rounds)
    per_round = sum(seconds) / len(seconds)
    precision = exp.config.run.precision
    peak = peak_tflops(exp.device, precision)
    achieved = rate(sum(flops), sum(seconds))
    in_clients = rate(client_flops, client_seconds) if client_flops else None
    evaluations = math.ceil(setting.budget / EVALUATE_EVERY)
    unit = "server epoch" if stage == "server" else "round"
    notes = list(setting.notes)
    if peak is None:
        notes.append(f"no peak known for {device_name(exp.device)}: peak_tflops and the ratios are null (the CPU has no entry in the table)")
    return {
        "what": setting.what,
        "scale": args.scale,
        **({"small": setting.small} if args.scale == "small" else {}),
        "unit": unit,
        "precision": precision,
        "clients": exp.config.federation.num_clients,
        "timed_rounds": len(rounds),
        "seconds_per_round": round(per_round, 4),
        "round_seconds": [round(s, 4) for s in seconds],
        "tflop_per_round": round(sum(flops) / len(flops) / 1e12, 6),
        "achieved_tflops": achieved,
        "client_seconds_per_round": round(client_seconds / len(rounds), 4) if client_seconds else None,
        "client_tflops": in_clients,
        "peak_tflops": peak,
        "ratio_to_peak": ratio(achieved, peak),
        "client_ratio_to_peak": ratio(in_clients, peak),
        "shapes": "varying" if varying else "fixed",
        **({"varying_share": list(VARYING)} if varying else {}),
        "cudnn_benchmark": autotuned,
        "plain_loop": yardstick,
        "plain_loop_ratio": None if yardstick is None or not in_clients or not yardstick["tflops"] else round(in_clients / yardstick["tflops"], 4),
        **({"profile": profiled} if profiled is not None else {}),
        "evaluation_seconds": None if evaluation is None else round(evaluation, 4),
        "budget_rounds": setting.budget,
        "projected_seconds": round(setting.budget * per_round, 1),
        "projected_seconds_with_evaluation": None if evaluation is None else round(setting.budget * per_round + evaluations * evaluation, 1),
        "build_seconds": round(build_seconds, 2),
        **(variants(exp, setting, args) if args.concurrent > 1 or args.compile else {}),
        "notes": notes + [f"projection: {setting.budget} {unit}s x the mean timed {unit}; with evaluation: + one every {EVALUATE_EVERY} {unit}s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (MFCL: server epochs) after one warm-up round")
    parser.add_argument("--scale", choices=("small", "paper"), default="small")
    parser.add_argument("--only", nargs="*", choices=tuple(SETTINGS), default=list(SETTINGS))
    parser.add_argument(
        "--no-evaluation", dest="evaluation", action="store_false", help="do not time an evaluation (MFCL's linear evaluation is long on a CPU)"
    )
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override for every setting (e.g. algorithm.threshold=0.95)")
    parser.add_argument("--out", type=Path, default=None, help="result file (default: benchmarks/results/paper_scale_<device>.json)")
    parser.add_argument(
        "--concurrent", type=int, default=1, metavar="K", help="also time the rounds with run.concurrent_clients = K, against one at a time in the same run"
    )
    parser.add_argument("--compile", action="store_true", help="also time the rounds with run.compile = true (an accelerator only), against eager")
    parser.add_argument(
        "--shapes",
        choices=("fixed", "varying"),
        default="fixed",
        help="full-batch settings: 'fixed' trains every unlabeled image (the upper bound), 'varying' a share drawn per client and round (as tau = 0.95 does)",
    )
    parser.add_argument("--plain-steps", type=int, default=20, help="timed steps of the plain PyTorch loop (the yardstick)")
    parser.add_argument("--profile", action="store_true", help="also profile one round and each piece of a client step (operator calls, launches)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds: at least 1 timed round")
    if args.concurrent < 1:
        parser.error("--concurrent: at least 1")
    if args.plain_steps < 1:
        parser.error("--plain-steps: at least 1")
    started, at_start = time.perf_counter(), machine()
    device = torch.device(args.device)
    results = {}
    for key in args.only:
        results[key] = measure(key, SETTINGS[key], args)
        print(json.dumps({"setting": key, **results[key]}), flush=True)
    record = {
        "what": "the papers' settings on synthetic data of the real shapes: seconds per round, achieved TFLOP/s, ratio to the device's dense peak, projected time of the paper's budget (issue 19 item 6)",
        "command": command_line(),
        "machine": at_start,
        "device": device_name(device),
        "torch": torch.__version__,
        "load_at_end": load(),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "settings": results,
    }
    out = args.out or RESULTS / f"paper_scale_{args.device}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
