"""What an MFCL run's report adds: Figure 6 (t-SNE), Figure 7 (clients dropped in phase 2) and Table 8 (communication).

- Figure 6 (Appendix D.1): t-SNE (scikit-learn) of (a) one client's raw images and (b)
  the server's learned representations of what the clients sent (view 1 of up to 1,000
  received samples through the discriminator and the projection head, the paper's
  "after the projection layers"), coloured by their true class, which the server never
  saw (the report looks it up from the partition).
- Figure 7 (Appendix D.2): the run's phase 1 is kept and phase 2 is replayed with the
  representations of a fraction delta of the clients missing (delta 0.2, 0.5, 0.8; the
  clients left are the ``upload`` stage's sample at 1 - delta, as ``algorithm.drop``
  would draw them), from the same initial discriminator for the same server epochs,
  scored by the same linear evaluation. Only for a run that received every client.
- Table 8 (Appendix D.4): the bits this run sent, measured, beside the paper's formula on
  this run's sizes and the paper's printed CIFAR-10 numbers
  (:mod:`fedprior.papers.mfcl.communication`). FedSimCLR runs get this section too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprior.algorithms.base import RoundInfo
from fedprior.atomic import save_figure
from fedprior.experiments.build import Experiment
from fedprior.papers.mfcl import communication
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.sampling import sample_clients
from fedprior.seeding import numpy_rng

DROPS = (0.2, 0.5, 0.8)
TSNE_POINTS = 1000


def final_state(folder: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(Path(folder) / "checkpoint.safetensors").server


def received_labels(experiment: Experiment, owners: torch.Tensor) -> np.ndarray:
    """True classes of the representation rows the server holds (client by client, in each client's data order)."""
    labels = experiment.train["y"].numpy()
    out = [labels[experiment.partition.client(int(c))["train"]] for c in torch.unique_consecutive(owners)]
    return np.concatenate(out)


def tsne(points: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    perplexity = float(min(30, max(2, (len(points) - 1) // 3)))
    return TSNE(n_components=2, init="pca", perplexity=perplexity, random_state=seed).fit_transform(points)


@torch.no_grad()
def server_embeddings(experiment: Experiment, state: dict[str, torch.Tensor], rows: np.ndarray) -> np.ndarray:
    """Projection-head outputs of the received view-1 representations ``rows`` (eval mode)."""
    from fedprior.algorithms.mfcl import DISC, PROJ
    from fedprior.algorithms.pieces.tensors import load_model_arrays
    from fedprior.models.projection import ProjectionHead
    from fedprior.models.resnet import ResNet18

    params = experiment.config.algorithm.hyperparameters()
    z = state["reps.view1"][torch.from_numpy(rows)]
    body = load_model_arrays(ResNet18(z.shape[1], 0, width=params["disc_width"]), state, DISC).eval()
    head = load_model_arrays(ProjectionHead(body.feature_dim, params["projection_dim"]), state, PROJ).eval()
    return torch.cat([head(body.embed(z[i : i + 512])) for i in range(0, z.shape[0], 512)]).numpy()


def figure6(experiment: Experiment, state: dict[str, torch.Tensor], path: Path) -> None:
    """Figure 6: t-SNE of one client's raw images and of the server's learned representations, coloured by class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seed = experiment.config.run.seed
    labels = received_labels(experiment, state["reps.client"])
    rng = numpy_rng(seed, "report", "tsne")
    rows = np.sort(rng.permutation(labels.size)[:TSNE_POINTS])
    first = experiment.partition.client(int(state["reps.client"][0]))["train"]
    raw_rows = np.sort(rng.permutation(first.size)[:TSNE_POINTS])
    panels = [
        (
            f"(a) raw images of client {int(state['reps.client'][0])}",
            experiment.train["x"][torch.from_numpy(first[raw_rows])].flatten(1).numpy(),
            experiment.train["y"][torch.from_numpy(first[raw_rows])].numpy(),
        ),
        ("(b) server representations (after the projection head)", server_embeddings(experiment, state, rows), labels[rows]),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), dpi=110)
    names = experiment.dataset.class_names
    for ax, (title, points, classes) in zip(axes, panels, strict=True):
        xy = tsne(points, seed)
        for k in np.unique(classes):
            ax.scatter(*xy[classes == k].T, s=5, label=names[k], color=plt.cm.tab10(k % 10))
        ax.set_title(title, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[1].legend(markerscale=3, fontsize=7, loc="best")
    fig.suptitle(f"t-SNE (Figure 6): {experiment.name}, norm = {experiment.config.algorithm.hyperparameters()['norm']}")
    fig.tight_layout()
    save_figure(fig, path)


def replay_phase_2(experiment: Experiment, state: dict[str, torch.Tensor], drop: float) -> float:
    """Linear-evaluation accuracy after phase 2 trained on the representations of the clients left at ``drop``."""
    algorithm, seed = experiment.algorithm, experiment.config.run.seed
    kept = sample_clients(seed, "upload", 1, experiment.task.num_clients, 1.0 - drop)
    rows = torch.isin(state["reps.client"], torch.tensor(kept))
    fresh = algorithm.init(RoundInfo(seed=seed, stage="sensor", round=0))
    replay = {k: v for k, v in state.items() if k.startswith("sensor.")}
    replay.update({k: v for k, v in fresh.items() if not k.startswith("sensor.")})
    replay.update({k: v[rows] for k, v in state.items() if k.startswith("reps.")})  # view1, view2, client (and label)
    server = next(s for s in algorithm.stages if s.name == "server")
    for epoch in range(1, (server.rounds or 0) + 1):
        replay = algorithm.aggregate(replay, [], RoundInfo(seed=seed, stage="server", round=epoch))
    accuracy = algorithm.evaluate(replay, experiment.test)["accuracy"]
    assert not isinstance(accuracy, list)  # a number; lists are per-class metrics
    return float(accuracy)


def figure7(points: dict[float, float], norm: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=120)
    drops = sorted(points)
    ax.plot([100 * d for d in drops], [100 * points[d] for d in drops], marker="o", label=f"MFCL({norm.upper()})")
    ax.set_xlabel("clients dropped in phase 2, delta (%)")
    ax.set_ylabel("linear evaluation accuracy (%)")
    ax.set_title("accuracy vs clients dropped (Figure 7)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)


def table8_section(experiment: Experiment, summary: dict[str, Any], state: dict[str, torch.Tensor]) -> tuple[dict[str, Any], str]:
    """Table 8 for this run: measured bits, the paper's formula on this run's sizes, the paper's numbers."""
    mfcl = summary["algorithm"] == "mfcl"
    prefix = "sensor." if mfcl else "model."
    params = sum(v.numel() for k, v in state.items() if k.startswith(prefix))
    clients = experiment.task.num_clients
    samples = float(np.mean([experiment.partition.holdings(c).size for c in range(clients)]))
    rep = int(np.prod(state["reps.view1"].shape[1:])) if mfcl and "reps.view1" in state else 0
    rounds = experiment.config.federation.rounds
    ours = communication.measured(summary)
    expected = communication.formula(params, rounds, samples, rep, clients, views=2)
    method = "MFCL" if mfcl else "FedSimCLR"
    columns = {
        "measured (this run)": ours,
        "formula, this run's sizes": expected,
        f"paper {method} (CIFAR-10)": communication.PAPER[method],
        "formula, paper's sizes": communication.paper_formula(method),
    }
    section = f"""
## Communication burden (Table 8)

Bits sent, at 32 bits a number and channel code rate 1/3 (96 bits per 32-bit number).
"measured" counts every tensor the runtime shipped (phase 1 both ways; phase 2 the
representations of both views, plus the encoder sent to each client, which the
paper's formula leaves out); "per client" rows average over the {clients} clients.

{communication.markdown(columns)}
"""
    return {"table8": {"measured": ours, "formula": expected}}, section


def communication_extras(experiment: Experiment, summary: dict[str, Any], folder: Path) -> tuple[dict[str, Any], str]:
    """Report hook of FedSimCLR: Table 8 only."""
    return table8_section(experiment, summary, final_state(folder))


def mfcl_extras(experiment: Experiment, summary: dict[str, Any], folder: Path) -> tuple[dict[str, Any], str]:
    """Report hook of MFCL: Figures 6 and 7 and Table 8 (see the module docstring)."""
    folder = Path(folder)
    state = final_state(folder)
    additions, table8 = table8_section(experiment, summary, state)
    if "reps.view1" not in state:  # the run stopped before phase 2
        return additions, table8
    figure6(experiment, state, folder / "figure6_tsne.png")
    params = experiment.config.algorithm.hyperparameters()
    norm, own_drop = params["norm"], params["drop"]
    points = {own_drop: summary["final_accuracy"]}
    if own_drop == 0:
        points.update({d: replay_phase_2(experiment, state, d) for d in DROPS})
    figure7(points, norm, folder / "figure7_drop.png")
    rows = "\n".join(f"| {100 * d:.0f} | {100 * a:.2f} |" for d, a in sorted(points.items()))
    note = "" if own_drop == 0 else f"\nThis run dropped {100 * own_drop:.0f}% of the clients itself; the sweep needs a run that received every client.\n"
    section = f"""
## t-SNE of the server's representations (Figure 6)

![t-SNE](figure6_tsne.png)

## Clients dropped in phase 2 (Figure 7)

Phase 1 as in this run; phase 2 replayed without the representations of a fraction
delta of the clients (same initial discriminator, {params["server_epochs"]} server epochs as the run).
{note}
| delta (%) | accuracy (%) |
|---|---|
{rows}

![accuracy vs dropped clients](figure7_drop.png)
{table8}"""
    additions["figure7"] = {str(d): a for d, a in sorted(points.items())}
    return additions, section
