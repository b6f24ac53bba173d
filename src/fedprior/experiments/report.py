"""The short report of a run: markdown summary and an accuracy-per-round picture."""

from __future__ import annotations

from typing import Any

from fedprior.experiments.run_dir import RunDir


def plot_accuracy(curves: dict[str, list[float]], path, title: str = "") -> None:
    """Accuracy (%) per round for one or more runs; round 0 is the initial model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, values in curves.items():
        ax.plot(range(len(values)), [100 * v for v in values], marker="o", markersize=3, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


OPTIONAL_ROWS = (
    ("final_macro_f1", "final macro-F1"),
    ("best_macro_f1", "best macro-F1"),
    ("selected_accuracy", "accuracy at the round chosen on the validation split"),
    ("selected_macro_f1", "macro-F1 at the round chosen on the validation split"),
)
"""Summary keys the report shows when the run has them (macro-F1, validation model selection)."""


def write_report(run: RunDir, summary: dict[str, Any], partition_stats: dict[str, Any], extra: str = "") -> None:
    curve = [summary["initial_accuracy"], *summary["history"]]
    plot_accuracy({summary["algorithm"]: curve}, run.accuracy_plot, f"{summary['name']} ({summary['dataset']})")
    rows = "\n".join(f"| {r} | {100 * a:.2f} |" for r, a in enumerate(curve))
    sizes = partition_stats.get("client_sizes", [])
    more = "".join(f"| {label} | {100 * summary[key]:.2f}% |\n" for key, label in OPTIONAL_ROWS if key in summary)
    if "selected_round" in summary:
        more += f"| round chosen on the validation split | {summary['selected_round']} |\n"
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
{more}| wall time | {summary['wall_seconds']:.1f} s |

![accuracy per round](accuracy.png)

![partition](partition.png)

| round | test accuracy (%) |
|---|---|
{rows}
{extra}"""
    run.report.write_text(text)
