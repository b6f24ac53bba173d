"""Why trained MFCL(BN) sits under its own untrained network (issue 52, item 4): BN's running statistics traced, one seed.

Table 2's MFCL(BN) cells end at 59-60% linear accuracy in Sc1, Sc2 and Sc10, its untrained network (the row's
"trained above untrained" control: the initial model, no round) at 66.0-66.2%, untrained PN and GN at 56.6%
(docs/mfcl.md). A BatchNorm layer in evaluation mode normalizes with its running statistics: a fresh layer's mean 0 and
variance 1 leave its input as it is (the untrained BN sensor reads as an unnormalized network), a trained one's are
FedAvg's average of the clients' (Eq. 1 applied to the buffers as to the weights, docs/mfcl.md "The BN path, walked"
B3-B4), gathered on SimCLR views. This script evaluates the same states with other running statistics, by the run's own
evaluation (``Algorithm.evaluate``, the linear probe of Sec. 3: a dense layer on the training pool's features, scored on
the test set) on a copy of the State whose BN buffers are replaced:

1. ``untrained``: the initial State of MFCL(BN), (PN), (GN) (no training, the cells' ``initial_accuracy``): with the
   fresh statistics (the control), with the sensor's BN recalibrated on the training pool (reset, the pool forwarded once
   in training mode, one batch: :func:`fedprior.models.bn_recalibration.recalibrate_batchnorm`), with the discriminator's
   and projection head's BN (every row's, PN's too) recalibrated on the pool's representations, and both;
2. ``trained``: MFCL(BN) trained as Table 2's cell (the kept cell's config.toml, seed 0, in this process, through the
   runner as ``fedprior table`` runs it): the final State as stored (the table's number), the sensor's statistics
   recalibrated on the pool, the discriminator's, both, and the sensor's set to the size-weighted mean of each
   client's own statistics of its clean images (what Eq. 1 averages, without the views and the momentum); per BN
   layer, how far the stored statistics, the clients' mean and the pool's SimCLR views' are from the pool's;
3. ``curve``: the sensor after round r (0, 1, 2, 5, 10, 15; from the run's checkpoint after each round) with the
   untrained discriminator (the control's network with r rounds of sensor training), its statistics as stored and
   recalibrated; and the sensor's own representations z probed (``eval_features = "sensor"``, no discriminator).

Writes ``benchmarks/results/mfcl_bn_trace/results.json`` (the command, commit, machine, load, every number); runs to
``--runs``. One process, one thread (the configs' ``run.threads = 1``):

    nice -n 15 python benchmarks/mfcl_bn_trace.py --scenarios Sc10,Sc1 --set run.threads=1 --set run.workers=1
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import torch
from shared import command_line, load, machine, shell

from fedprior.algorithms.base import Algorithm, RoundInfo, State
from fedprior.algorithms.engines.self_supervised import unit_images
from fedprior.algorithms.mfcl import DISC, ENCODER, PROJ
from fedprior.algorithms.pieces.tensors import model_arrays, weighted_mean, with_prefix
from fedprior.data.augment.simclr import simclr_views
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.client_side import build_algorithm
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import resume, start
from fedprior.models.autoencoder import SensorModule
from fedprior.models.bn_recalibration import batchnorm_layers, recalibrate_batchnorm
from fedprior.models.projection import ProjectionHead
from fedprior.models.resnet import ResNet18
from fedprior.results.run_dir import RunDir
from fedprior.runtime.checkpoint import load_checkpoint

HERE = Path(__file__).resolve().parent
CELLS = HERE / "results" / "cells" / "mfcl-table2"
OUT = HERE / "results" / "mfcl_bn_trace" / "results.json"
CURVE_ROUNDS = (0, 1, 2, 5, 10, 15)


class Parts:
    """The evaluated modules of an MFCL State (the sensor's encoder, the discriminator and its head), built from the
    config as ``mfcl`` builds them, to recalibrate their BN buffers and write them back into a copy of the State."""

    def __init__(self, experiment: Experiment, state: State) -> None:
        a, task = experiment.config.algorithm, experiment.task
        self.encoder = SensorModule(task.input_shape[0], a.sensor_width, a.norm, a.norm_group_channels).encoder
        self.body = ResNet18(a.sensor_width, num_classes=0, width=a.disc_width, norm="bn")
        self.head = ProjectionHead(self.body.feature_dim, a.projection_dim)
        for module, prefix in ((self.encoder, ENCODER), (self.body, DISC), (self.head, PROJ)):
            module.load_state_dict(with_prefix(state, prefix))
            module.eval()
        self.state = state

    def recalibrate_sensor(self, images: torch.Tensor) -> None:
        recalibrate_batchnorm(self.encoder, lambda: self.encoder(images))

    def recalibrate_discriminator(self, images: torch.Tensor) -> None:
        with torch.no_grad():
            z = self.encoder(images)  # the sensor as it now is, in eval mode
        disc = torch.nn.ModuleList([self.body, self.head])
        recalibrate_batchnorm(disc, lambda: self.head(self.body.embed(z)))

    def as_state(self) -> State:
        return {**self.state, **model_arrays(self.encoder, ENCODER), **model_arrays(self.body, DISC), **model_arrays(self.head, PROJ)}


def layer_statistics(module: torch.nn.Module, forward: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(mean, unbiased variance) of each BN layer's input in one training-mode pass (a recalibration of a copy)."""
    twin = copy.deepcopy(module)
    recalibrate_batchnorm(twin, lambda: forward(twin))
    return [(layer.running_mean.clone(), layer.running_var.clone()) for layer in batchnorm_layers(twin)]


def distance(stats: list[tuple[torch.Tensor, torch.Tensor]], pool: list[tuple[torch.Tensor, torch.Tensor]]) -> list[dict[str, float]]:
    """Per layer: the mean over channels of |mu - mu_pool| / sd_pool, of |log(var / var_pool)|, and the geometric mean of var / var_pool."""
    out = []
    for (mean, var), (pmean, pvar) in zip(stats, pool, strict=True):
        log_ratio = torch.log(var.clamp_min(1e-12) / pvar.clamp_min(1e-12))
        out.append(
            {
                "mean_shift_in_pool_sd": round(float(((mean - pmean).abs() / pvar.sqrt().clamp_min(1e-6)).mean()), 4),
                "abs_log_var_ratio": round(float(log_ratio.abs().mean()), 4),
                "var_ratio_geomean": round(float(log_ratio.mean().exp()), 4),
            }
        )
    return out


def accuracy(algorithm: Algorithm, state: State, test: dict) -> float:
    return float(algorithm.evaluate(state, test)["accuracy"])


def untrained(preset: str, scenario: str, overrides: list[str], seed: int = 0, discriminator: bool = True) -> dict[str, float]:
    """The initial State of ``preset`` evaluated with fresh BN statistics and with the sensor's and/or (``discriminator``)
    the discriminator's recalibrated on the pool."""
    name, config = load_config(preset, [f"partition.scenario={scenario}", f"run.seed={seed}", "federation.rounds=0", "algorithm.server_epochs=0", *overrides])
    experiment = build_experiment(name, config)
    _, test = experiment.resident_inputs()
    to_unit = unit_images(experiment.task)
    pool = to_unit(test["x_train"])
    state = experiment.algorithm.init(RoundInfo(seed=config.run.seed, stage="sensor", round=0))
    out = {"fresh statistics (the control)": accuracy(experiment.algorithm, state, test)}
    if discriminator:
        parts = Parts(experiment, state)
        parts.recalibrate_discriminator(pool)
        out["discriminator recalibrated"] = accuracy(experiment.algorithm, parts.as_state(), test)
    if config.algorithm.norm == "bn":
        parts = Parts(experiment, state)
        parts.recalibrate_sensor(pool)
        out["sensor recalibrated"] = accuracy(experiment.algorithm, parts.as_state(), test)
        if discriminator:
            parts.recalibrate_discriminator(pool)
            out["sensor and discriminator recalibrated"] = accuracy(experiment.algorithm, parts.as_state(), test)
    return out


def control_candidate(overrides: list[str], seeds: tuple[int, ...]) -> dict[str, Any]:
    """The untrained BN network with its sensor recalibrated on the pool, per seed (its fresh score must be the kept
    cells' ``initial_accuracy``), and what "trained above untrained" reads on the kept MFCL(BN) and MFCL(PN) cells
    against it and against the kept untrained cells (mean over the seeds of trained - untrained, points)."""
    per_seed = {str(s): untrained("mfcl-bn", "Sc10", overrides, seed=s, discriminator=False) for s in seeds}
    out: dict[str, Any] = {"untrained_bn_by_seed": per_seed, "trained_minus_untrained": {}}

    def kept(row: str, scenario: str, seed: int) -> float:
        return 100 * float(json.loads((CELLS / f"{row}--{scenario}--seed{seed}" / "result.json").read_text())["final_accuracy"])

    for scenario in ("Sc1", "Sc2", "Sc10"):
        bn = [kept("MFCL_BN_", scenario, s) for s in seeds]
        recal = [100 * per_seed[str(s)]["sensor recalibrated"] for s in seeds]
        fresh = [kept("MFCL_BN_untrained", scenario, s) for s in seeds]
        pn = [kept("MFCL_PN_", scenario, s) for s in seeds]
        pn_untrained = [kept("MFCL_PN_untrained", scenario, s) for s in seeds]
        out["trained_minus_untrained"][scenario] = {
            "MFCL(BN) - untrained BN, fresh statistics (the kept control)": round(sum(b - f for b, f in zip(bn, fresh, strict=True)) / len(seeds), 2),
            "MFCL(BN) - untrained BN, sensor recalibrated": round(sum(b - r for b, r in zip(bn, recal, strict=True)) / len(seeds), 2),
            "MFCL(PN) - untrained PN (the kept control)": round(sum(p - u for p, u in zip(pn, pn_untrained, strict=True)) / len(seeds), 2),
        }
    return out


def trained(cell: Path, overrides: list[str], runs: Path, curve_rounds: bool = True) -> dict[str, Any]:
    """Train the cell's config through the runner, keep the sensor after each round, and evaluate the variants (and the
    per-round ``curve``, or its last round only)."""
    name, config = load_config(str(cell / "config.toml"), overrides)
    folder = runs / cell.name
    rounds_file = folder / "sensor_rounds.pt"
    sensors: dict[int, State] = {}

    def keep(entry: dict[str, Any]) -> None:  # the checkpoint is written before the round's callback
        if entry.get("stage") == "sensor" and entry.get("round") in CURVE_ROUNDS:
            server = load_checkpoint(RunDir(folder).checkpoint).server
            sensors[int(entry["round"])] = {k: v.clone() for k, v in server.items() if k.startswith("sensor.")}

    if (folder / "result.json").is_file() and rounds_file.is_file():
        summary = resume(folder, report_extras=False)
        sensors = torch.load(rounds_file)
    else:
        summary = start(name, config, folder, report_extras=False, on_round=keep)
        torch.save(sensors, rounds_file)
    kept = json.loads((cell / "result.json").read_text())
    experiment = build_experiment(name, config)
    algorithm = experiment.algorithm
    _, test = experiment.resident_inputs()
    to_unit = unit_images(experiment.task)
    pool = to_unit(test["x_train"])
    final = load_checkpoint(RunDir(folder).checkpoint).server
    initial = algorithm.init(RoundInfo(seed=config.run.seed, stage="sensor", round=0))
    out: dict[str, Any] = {
        "config": str(cell.relative_to(HERE.parent) / "config.toml"),
        "overrides": overrides,
        "run_wall_seconds": round(summary["wall_seconds"], 1),  # the run's own (its result.json), also where this pass resumed it
        "final_accuracy_this_run": summary["final_accuracy"],
        "final_accuracy_kept_cell": kept["final_accuracy"],
        "kept_cell_cpu": kept.get("cpu"),
        "state_sha256_this_run": summary.get("state_sha256"),
        "state_sha256_kept_cell": kept.get("state_sha256"),
    }
    acc: dict[str, float] = {"as stored (FedAvg-averaged statistics: the table)": accuracy(algorithm, final, test)}
    for label, sensor, disc in (
        ("sensor recalibrated", True, False),
        ("discriminator recalibrated", False, True),
        ("sensor and discriminator recalibrated", True, True),
    ):
        parts = Parts(experiment, final)
        if sensor:
            parts.recalibrate_sensor(pool)
        if disc:
            parts.recalibrate_discriminator(pool)
        acc[label] = accuracy(algorithm, parts.as_state(), test)
    # (c) the clients' own statistics of their clean images, size-weighted as Eq. 1 averages them, for the final sensor
    parts = Parts(experiment, final)
    clients = [to_unit(experiment.train["x"][torch.from_numpy(experiment.partition.holdings(c))]) for c in range(experiment.task.num_clients)]
    sizes = [int(c.shape[0]) for c in clients]
    per_client = [layer_statistics(parts.encoder, lambda m, x=x: m(x)) for x in clients]
    names = [f"{i}.{s}" for i, layer in enumerate(batchnorm_layers(parts.encoder)) for s in ("running_mean", "running_var")]
    averaged = weighted_mean([dict(zip(names, [t for pair in stats for t in pair], strict=True)) for stats in per_client], sizes)
    mean_of_clients = [(averaged[f"{i}.running_mean"].float(), averaged[f"{i}.running_var"].float()) for i in range(len(names) // 2)]
    for layer, (mean, var) in zip(batchnorm_layers(parts.encoder), mean_of_clients, strict=True):
        layer.running_mean.copy_(mean)
        layer.running_var.copy_(var)
    acc["sensor set to the clients' own clean statistics, averaged by size"] = accuracy(algorithm, parts.as_state(), test)
    out["accuracy"] = acc
    # per-layer distances of the sensor's statistics from the pool's (clean images, the final weights)
    parts = Parts(experiment, final)
    pool_stats = layer_statistics(parts.encoder, lambda m: m(pool))
    stored = [(layer.running_mean.clone(), layer.running_var.clone()) for layer in batchnorm_layers(parts.encoder)]
    view1, view2 = simclr_views(pool, 0, min_scale=config.algorithm.min_scale)
    views = layer_statistics(parts.encoder, lambda m: m(torch.cat([view1, view2])))
    out["sensor_layers_vs_pool"] = {
        "stored (FedAvg of running statistics)": distance(stored, pool_stats),
        "clients' own clean statistics, averaged": distance(mean_of_clients, pool_stats),
        "the pool's SimCLR views (one batch)": distance(views, pool_stats),
    }
    with torch.no_grad():
        z = parts.encoder(pool)
    disc = torch.nn.ModuleList([parts.body, parts.head])
    disc_pool = layer_statistics(disc, lambda m: m[1](m[0].embed(z)))
    disc_stored = [(layer.running_mean.clone(), layer.running_var.clone()) for layer in batchnorm_layers(disc)]
    out["discriminator_layers_vs_pool"] = distance(disc_stored, disc_pool)
    # (3) the curve: the sensor after round r, with the untrained discriminator and alone (seeds without the curve: its last point)
    _, probe_config = load_config(str(cell / "config.toml"), [*overrides, "algorithm.eval_features=sensor"])
    sensor_probe = build_algorithm(probe_config, experiment.task, experiment.device)
    curve = {}
    for r in CURVE_ROUNDS if curve_rounds else CURVE_ROUNDS[-1:]:
        state = {**initial, **sensors[r]}
        parts = Parts(experiment, state)
        parts.recalibrate_sensor(pool)
        curve[str(r)] = {
            "untrained discriminator, sensor statistics as stored": accuracy(algorithm, state, test),
            "untrained discriminator, sensor recalibrated": accuracy(algorithm, parts.as_state(), test),
            "sensor features, as stored": accuracy(sensor_probe, state, test),
            "sensor features, recalibrated": accuracy(sensor_probe, parts.as_state(), test),
        }
        print(cell.name, "round", r, curve[str(r)], flush=True)
    out["curve"] = curve
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="Sc10,Sc1")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds of the trained cells (the curve for seed 0 only)")
    parser.add_argument("--skip-untrained", action="store_true")
    parser.add_argument("--control-seeds", default="", help="comma-separated seeds: the recalibrated untrained BN control per seed (no training)")
    parser.add_argument("--runs", type=Path, default=Path("runs/mfcl-bn-trace"))
    parser.add_argument("--set", action="append", default=[], dest="overrides", help="a config override for every run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    record = json.loads(OUT.read_text()) if OUT.is_file() else {}
    record.setdefault("passes", []).append({"command": command_line(), "commit": shell("git rev-parse HEAD"), "machine": machine(), "load_at_start": load()})
    started = time.perf_counter()

    def save() -> None:
        record["passes"][-1]["cpu_process_seconds"] = round(time.process_time(), 1)
        record["passes"][-1]["wall_seconds"] = round(time.perf_counter() - started, 1)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(record, indent=1) + "\n")

    if not args.skip_untrained:
        record["untrained"] = {preset: untrained(preset, "Sc10", args.overrides) for preset in ("mfcl-bn", "mfcl", "mfcl-gn")}
        print(json.dumps(record["untrained"], indent=1), flush=True)
        save()
    if args.control_seeds:
        seeds = tuple(int(s) for s in args.control_seeds.split(","))
        record["control_candidate"] = control_candidate(args.overrides, seeds)
        print(json.dumps(record["control_candidate"], indent=1), flush=True)
        save()
    for scenario in filter(None, args.scenarios.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            cell = CELLS / f"MFCL_BN_--{scenario}--seed{seed}"
            key = scenario if seed == 0 else f"{scenario} seed {seed}"
            record.setdefault("trained", {})[key] = trained(cell, args.overrides, args.runs, curve_rounds=seed == 0)
            print(json.dumps(record["trained"][key], indent=1), flush=True)
            save()


if __name__ == "__main__":
    main()
