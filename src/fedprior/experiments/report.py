"""The short report of a run: markdown summary and an accuracy-per-round picture."""

from __future__ import annotations

from typing import Any

from fedprior.experiments.run_dir import RunDir


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
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def failure_warning(summary: dict[str, Any]) -> str:
    """One line saying which rounds lost client updates, or '' when none did."""
    per_round = summary.get("failed_clients_per_round") or {}
    if not per_round:
        return ""
    rounds = ", ".join(f"{step} ({n})" for step, n in per_round.items())
    return (f"warning: {summary['failed_updates']} client updates failed, in rounds {rounds}; "
            f"those rounds aggregated the others (metrics.jsonl: failed_clients, failures)")


def write_report(run: RunDir, summary: dict[str, Any], partition_stats: dict[str, Any], extra: str = "") -> None:
    curve = accuracy_curve(summary)
    plot_accuracy({summary["algorithm"]: curve}, run.accuracy_plot, f"{summary['name']} ({summary['dataset']})")
    rows = "\n".join(f"| {r} | {100 * a:.2f} |" for r, a in curve.items())
    sizes = partition_stats.get("client_sizes", [])
    warning = f"\n**{failure_warning(summary)}**\n" if failure_warning(summary) else ""
    text = f"""# {summary['name']}

{summary.get('description', '')}

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
| failed client updates | {summary.get('failed_updates', 0)} |
{warning}

![accuracy per round](accuracy.png)

![partition](partition.png)

| round | test accuracy (%) |
|---|---|
{rows}
{extra}"""
    run.report.write_text(text)
