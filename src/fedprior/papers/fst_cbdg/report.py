"""What an FST-CBDG run's report adds: Figure 2 (zero-shot entropy) and Figure 3 (accuracy per round vs FedAvg, FedNTD).

Figure 3 needs the supervised baselines on the same features, partition and client
sampling: they are run here (vectorized, seconds) with the run's own config, only the
algorithm swapped for the fedavg-linear / fedntd-linear presets' algorithm section.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedprior.atomic import save_figure
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.config import AlgorithmConfig, load_config
from fedprior.runtime.simulation import simulate

BASELINES = {"FedAvg": "fedavg-linear", "FedNTD": "fedntd-linear"}


def zero_shot_predictions(experiment: Experiment):
    """The Eq. (2) zero-shot prediction p_j of every test image, (N, K)."""
    from fedprior.algorithms.fst_cbdg import zero_shot_probabilities

    return zero_shot_probabilities(experiment.test["x"], experiment.task.prior["text_features"])


def zero_shot_entropy(experiment: Experiment) -> np.ndarray:
    """Entropy of the Eq. (2) zero-shot prediction of every test image (nats)."""
    p = zero_shot_predictions(experiment)
    return (-(p * p.clamp_min(1e-12).log()).sum(1)).numpy()


def zero_shot_accuracy(experiment: Experiment) -> float:
    """Test accuracy of CLIP's zero-shot classifier, argmax_k I_j . T_k (Eq. 2; the paper's CLIP-ZS row)."""
    return float((zero_shot_predictions(experiment).argmax(1) == experiment.test["y"]).double().mean())


def plot_entropy(entropy: np.ndarray, num_classes: int, path) -> None:
    """Figure 2: the zero-shot predictions' entropies against the upper bound log K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.hist(entropy, bins=60, color="tab:green", alpha=0.8)
    ax.axvline(math.log(num_classes), color="tab:red", label=f"log {num_classes} = {math.log(num_classes):.3f}")
    ax.set_xlabel("entropy of the zero-shot prediction (nats)")
    ax.set_ylabel("test images")
    ax.set_title(f"zero-shot entropy: mean {entropy.mean():.3f}")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)


def baseline_curves(experiment: Experiment) -> dict[str, dict[int, float]]:
    """Accuracy by round (round 0 first) of the supervised baselines on the run's features and partition."""
    curves = {}
    for label, preset in BASELINES.items():
        _, preset_config = load_config(preset)
        config = experiment.config.model_copy(update={"algorithm": AlgorithmConfig(**preset_config.algorithm.model_dump())})
        baseline = build_experiment(preset, config.checked())
        result = simulate(
            baseline.algorithm,
            baseline.client_data,
            baseline.task.num_clients,
            baseline.test,
            baseline.round_loop(),
            worker_setup=baseline.client_side(),
            client_size=baseline.client_size,
        )
        evaluated = {r["step"]: r["accuracy"] for r in result.progress.history if "accuracy" in r}
        curves[label] = {0: result.progress.initial["accuracy"], **evaluated}
    return curves


def fst_cbdg_extras(experiment: Experiment, summary: dict[str, Any], folder) -> tuple[dict[str, Any], str]:
    """Draw Figures 2 and 3 into ``folder``; return summary additions and a markdown section."""
    from fedprior.results.report import accuracy_curve, plot_accuracy

    entropy = zero_shot_entropy(experiment)
    plot_entropy(entropy, experiment.task.num_classes, folder / "zero_shot_entropy.png")
    curves = {"FST-CBDG": accuracy_curve(summary), **baseline_curves(experiment)}
    plot_accuracy(curves, folder / "figure3.png", "test accuracy per round (Figure 3)")
    additions = {
        "zero_shot_accuracy": zero_shot_accuracy(experiment),
        "zero_shot_entropy": float(entropy.mean()),
        "entropy_bound": math.log(experiment.task.num_classes),
        "baselines": {label: list(curve.values())[-1] for label, curve in curves.items() if label != "FST-CBDG"},
    }
    rows = "\n".join(
        f"| {label} | {100 * curve[0]:.2f} | {100 * list(curve.values())[-1]:.2f} | {100 * max(curve.values()):.2f} |" for label, curve in curves.items()
    )
    section = f"""
## FST-CBDG against the supervised baselines (Figure 3)

Same features, partition and client sampling; FedAvg and FedNTD see the labels, FST-CBDG does not.

| method | round 0 | final | best |
|---|---|---|---|
{rows}

![accuracy per round](figure3.png)

## Zero-shot confidence (Figure 2)

Mean entropy of the zero-shot predictions on the test set: {entropy.mean():.3f} nats
(upper bound log {experiment.task.num_classes} = {math.log(experiment.task.num_classes):.3f}).

![zero-shot entropy](zero_shot_entropy.png)
"""
    return additions, section
