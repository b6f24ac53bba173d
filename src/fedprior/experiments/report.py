"""The short report of a run: markdown summary and an accuracy-per-round picture."""

from __future__ import annotations

from typing import Any

from fedprior.atomic import atomic_write, write_text
from fedprior.experiments.config import ExperimentConfig, config_differences, preset_paths
from fedprior.experiments.run_dir import RunDir


def preset_note(name: str, config: ExperimentConfig) -> str:
    """A line naming the fields this run changed from the preset it is named after ('' if none or no such preset).

    A preset's description speaks of the preset's own settings ("10 rounds"); with
    ``--set`` overrides the report says what differs instead of rewriting the description.
    """
    from fedprior.experiments.config import load_config

    if name not in preset_paths():
        return ""
    changed = config_differences(load_config(name)[1].to_dict(), config.to_dict())
    if not changed:
        return ""
    listed = ", ".join(f"{field} = {new!r} (preset: {old!r})" for field, (old, new) in changed.items())
    return f"Changed from the preset '{name}', whose description this is: {listed}."


def accuracy_curve(summary: dict[str, Any]) -> dict[int, float]:
    """Test accuracy by round of a run summary: round 0 (the initial model) and the evaluated rounds."""
    rounds = summary.get("evaluated_rounds") or range(1, len(summary["history"]) + 1)
    return {0: summary["initial_accuracy"], **dict(zip(rounds, summary["history"]))}


def plot_accuracy(curves: dict[str, dict[int, float]], path, title: str = "") -> None:
    """Accuracy (%) by round for one or more runs (``{round: accuracy}``, round 0 the initial model)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, values in curves.items():
        ax.plot(list(values), [100 * v for v in values.values()], marker="o", markersize=3, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda handle: fig.savefig(handle, format="png"))  # never a half-written PNG
    plt.close(fig)


def write_report(run: RunDir, summary: dict[str, Any], partition_stats: dict[str, Any], extra: str = "", notes: str = "") -> None:
    """report.md and accuracy.png; ``notes`` go under the description (e.g. :func:`preset_note`)."""
    curve = accuracy_curve(summary)
    plot_accuracy({summary["algorithm"]: curve}, run.accuracy_plot, f"{summary['name']} ({summary['dataset']})")
    rows = "\n".join(f"| {r} | {100 * a:.2f} |" for r, a in curve.items())
    sizes = partition_stats.get("client_sizes", [])
    text = f"""# {summary['name']}

{summary.get('description', '')}
{chr(10) + notes + chr(10) if notes else ''}
| | |
|---|---|
| algorithm | {summary['algorithm']} |
| dataset | {summary['dataset']} |
| encoder | {summary['encoder']} |
| partition | {summary['partition']} over {summary['num_clients']} clients (sizes {min(sizes, default=0)}..{max(sizes, default=0)}, beta_cib {partition_stats.get('beta_cib', float('nan')):.2f}, beta_hetero {partition_stats.get('beta_hetero', float('nan')):.2f}) |
| seed | {summary['seed']} |
| rounds | {summary['rounds']} |
| initial accuracy | {100 * summary['initial_accuracy']:.2f}% |
| final accuracy | {100 * summary['final_accuracy']:.2f}% |
| best accuracy | {100 * summary['best_accuracy']:.2f}% |
| wall time | {summary['wall_seconds']:.1f} s |
| device, workers, threads | {summary.get('device', 'cpu')}, {summary.get('workers', 1)}, {summary.get('threads', {})} |

![accuracy per round](accuracy.png)

![partition](partition.png)

| round | test accuracy (%) |
|---|---|
{rows}
{extra}"""
    write_text(run.report, text)
