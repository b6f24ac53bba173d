"""The short report of a run: markdown summary and an accuracy-per-round picture."""

from __future__ import annotations

import math
from typing import Any

from fedprior.atomic import save_figure, write_text
from fedprior.results.run_dir import RunDir
from fedprior.results.run_log import summary_warnings


def report_title(name: str, algorithm: str) -> str:
    """report.md's title: the run's own algorithm, then the name of its config (the preset or file it came from) where that differs."""
    return algorithm if name == algorithm else f"{algorithm} ({name})"


def hyperparameters_text(hyperparameters: dict[str, Any] | None) -> str:
    """The run's algorithm fields as ``key = value, ...`` (its own, checked, defaults filled in)."""
    if not hyperparameters:
        return "none"
    return ", ".join(f"{key} = {value!r}" for key, value in hyperparameters.items())


def threads_text(threads: dict[str, int]) -> str:
    """The run's torch threads per kind of work (``runtime/threads.py``: train, evaluate, encode) as ``train 1, evaluate 2, encode 2``."""
    return ", ".join(f"{work} {n}" for work, n in threads.items()) or "-"


def accuracy_curve(summary: dict[str, Any]) -> dict[int, float]:
    """Test accuracy by round of a run summary: round 0 (the initial model) and the evaluated rounds."""
    rounds = summary.get("evaluated_rounds") or range(1, len(summary["history"]) + 1)
    return {0: summary["initial_accuracy"], **dict(zip(rounds, summary["history"], strict=True))}


def simulated_time_curve(summary: dict[str, Any]) -> dict[int, float]:
    """Simulated seconds by round of a run summary, for the rounds of :func:`accuracy_curve` (round 0: 0), where the run had a
    system model (``simulated_times``, ``runtime/system_round.py``); {} otherwise."""
    times = summary.get("simulated_times")
    if not times:
        return {}
    return {0: 0.0, **dict(zip(summary["evaluated_rounds"], times, strict=True))}


def label_accuracy_axes(ax, title: str, x: str = "round") -> None:
    """Integer rounds (or, with ``x = 'time'``, simulated seconds) on x, test accuracy in % on y, a title and a light grid:
    every accuracy-curve figure."""
    from matplotlib.ticker import MaxNLocator

    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if x == "time":
        ax.set_xlabel("simulated time (s)")
        return
    locator = ax.xaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator), "matplotlib's default AutoLocator is a MaxNLocator"
    locator.set_params(integer=True)
    ax.set_xlabel("round")


def plot_accuracy(curves: dict[str, dict[int, float]], path, title: str = "") -> None:
    """Accuracy (%) by round for one or more runs (``{round: accuracy}``, round 0 the initial model)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, values in curves.items():
        ax.plot(list(values), [100 * v for v in values.values()], marker="o", markersize=3, label=label)
    label_accuracy_axes(ax, title)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path)  # never a half-written PNG


def plot_client_accuracy(summary: dict[str, Any], path, title: str = "") -> None:
    """The last evaluation's per-client accuracies on the clients' local test splits, sorted, as bars; the worst 10% (the lowest
    ``ceil(n / 10)`` clients) in red, with lines at their mean and at the mean over all clients."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = sorted(zip(summary["final_client_accuracy"], summary["final_client_ids"], strict=True))
    worst = math.ceil(len(pairs) / 10)
    fig, ax = plt.subplots(figsize=(max(6, 0.12 * len(pairs)), 4), dpi=120)
    colours = ["tab:red" if i < worst else "tab:blue" for i in range(len(pairs))]
    ax.bar(range(len(pairs)), [100 * a for a, _ in pairs], color=colours)
    ax.axhline(100 * summary["final_client_accuracy_mean"], color="black", linestyle="--", label=f"mean {100 * summary['final_client_accuracy_mean']:.2f}%")
    ax.axhline(
        100 * summary["final_client_accuracy_worst10"], color="tab:red", linestyle=":", label=f"worst 10% {100 * summary['final_client_accuracy_worst10']:.2f}%"
    )
    if len(pairs) <= 30:
        ax.set_xticks(range(len(pairs)), [str(c) for _, c in pairs])
    ax.set_xlabel("client (sorted by accuracy)")
    ax.set_ylabel("local test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(loc="best")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    save_figure(fig, path)


def client_section(summary: dict[str, Any]) -> str:
    """report.md's rows for the per-client accuracy on the clients' local test splits ('' without it)."""
    if "final_client_accuracy_mean" not in summary:
        return ""
    n = len(summary["final_client_accuracy"])
    return (
        f"| per-client accuracy on local test splits ({n} clients, last evaluation): mean | {100 * summary['final_client_accuracy_mean']:.2f}% |\n"
        f"| per-client accuracy: sd (population) | {100 * summary['final_client_accuracy_sd']:.2f} points |\n"
        f"| per-client accuracy: worst 10% (mean of the lowest {math.ceil(n / 10)}) | {100 * summary['final_client_accuracy_worst10']:.2f}% |\n"
        + (
            f"| per-client accuracy: pooled (all local test images, sample-weighted) | {100 * summary['final_client_accuracy_pooled']:.2f}% |\n"
            if "final_client_accuracy_pooled" in summary
            else ""
        )
    )


OPTIONAL_ROWS = (
    ("final_macro_f1", "final macro-F1"),
    ("best_macro_f1", "best macro-F1"),
    ("selected_accuracy", "accuracy at the round chosen on the validation split"),
    ("selected_macro_f1", "macro-F1 at the round chosen on the validation split"),
)
"""Summary keys the report shows when the run has them (macro-F1, validation model selection)."""


def problems_section(summary: dict[str, Any]) -> str:
    """report.md's table of the rounds that lost client updates or had clients without data ('' if none)."""
    failed, empty = summary.get("failed_clients_per_round") or {}, summary.get("empty_clients_per_round") or {}
    steps = sorted({*failed, *empty}, key=int)
    if not steps:
        return ""
    rows = "\n".join(f"| {step} | {failed.get(step, 0)} | {empty.get(step, 0)} |" for step in steps)
    return f"\n## Failed and empty clients\n\n| round | failed updates | clients without data |\n|---|---|---|\n{rows}\n"


def attack_and_clip_rows(summary: dict[str, Any]) -> str:
    """Report rows for a simulated attack's malicious clients and client-side clipping's server check (``runner.attack_and_clip_check``)."""
    rows = ""
    if "malicious_client_ids" in summary:
        ids = summary["malicious_client_ids"]
        rows += f"| malicious clients (simulated attack) | {len(ids)}: {', '.join(map(str, ids))} ({summary['malicious_updates']} sampled updates) |\n"
    if "dp_checked_replies" in summary:
        if summary["dp_checked_replies"] == 0 and summary.get("rounds", 0) > 0:
            rows += "| server's check of client-side clipping | none: under SecAgg+ the server sees only the sum of the replies |\n"
        else:
            rows += (
                f"| server's check of client-side clipping | {summary['dp_overnorm_replies']} of {summary['dp_checked_replies']} replies above C, "
                f"{summary['dp_corrected_bits']} bits corrected |\n"
            )
    return rows


def system_rows(summary: dict[str, Any]) -> str:
    """Report rows of a run with a system model (``[system]``): its simulated time and the updates it dropped or shortened ('' without one)."""
    if "simulated_time" not in summary:
        return ""
    return (
        f"| simulated time (system model) | {summary['simulated_time']:.1f} s |\n"
        f"| updates dropped past the deadline / cut by over-selection / clients unavailable / updates shortened (partial work) | "
        f"{summary['deadline_dropped_updates']} / {summary['over_selected_updates']} / {summary['unavailable_updates']} / {summary['partial_work_updates']} |\n"
    )


def write_report(
    run: RunDir,
    summary: dict[str, Any],
    partition_stats: dict[str, Any],
    extra: str = "",
    notes: str = "",
    hyperparameters: dict[str, Any] | None = None,
) -> None:
    """report.md and accuracy.png, titled by the run's algorithm; ``notes`` go under the description (e.g. :func:`~fedprior.experiments.config.preset_note`),
    ``hyperparameters`` (the run's ``[algorithm]`` fields but its name) in the table, where given."""
    curve = accuracy_curve(summary)
    title = report_title(summary["name"], summary["algorithm"])
    plot_accuracy({summary["algorithm"]: curve}, run.accuracy_plot, f"{title}, {summary['dataset']}")
    times = simulated_time_curve(summary)
    rows = "\n".join(f"| {r} | {100 * a:.2f} |" + (f" {times[r]:.1f} |" if times else "") for r, a in curve.items())
    head = "| round | test accuracy (%) |" + (" simulated time (s) |\n|---|---|---|" if times else "\n|---|---|")
    sizes = partition_stats.get("client_sizes", [])
    warning = "".join(f"\n**{line}**\n" for line in summary_warnings(summary))
    more = "".join(f"| {label} | {100 * summary[key]:.2f}% |\n" for key, label in OPTIONAL_ROWS if key in summary)
    if "selected_round" in summary:
        more += f"| round chosen on the validation split | {summary['selected_round']} |\n"
    if summary.get("dp_level") == "example":  # record-level DP-SGD (privacy.dp = 'sample'): each client's own accountant
        more += (
            f"| record-level DP-SGD: epsilon at delta {summary['dp_delta']:g} of the worst client (median client), {summary['dp_accountant']} "
            f"accountant, Poisson-sampled lots, add-or-remove-one-example | {summary['dp_epsilon']:.3f} ({summary['dp_epsilon_median']:.3f}) |\n"
        )
    elif "dp_epsilon" in summary:  # client-level DP (privacy.dp): the accountant's epsilon after the last round, and what bound it is
        a = summary.get("dp_accounting") or {"method": summary["dp_accountant"], "relation": "?", "sampling": "?", "sampling_rate": float("nan")}
        what = f"{a['method'].upper()} accountant, {a['relation']} neighbours, {a['sampling']} sampling q = {a['sampling_rate']:g}"
        more += f"| client-level DP: epsilon at delta {summary['dp_delta']:g} ({what}) | {summary['dp_epsilon']:.3f} |\n"
    if "stopped" in summary:  # privacy.max_epsilon ended the run before a round
        stop = summary["stopped"]
        more += f"| stopped by the privacy budget before {stop['stage']} round {stop['round']} (max_epsilon {stop['max_epsilon']:g}) | next round's epsilon {stop['dp_epsilon_next']:.3f} |\n"
    more += attack_and_clip_rows(summary)
    more += system_rows(summary)
    more += client_section(summary)
    figures = ""
    if "final_client_accuracy" in summary:
        plot_client_accuracy(summary, run.client_accuracy_plot, f"{title}: each client's model on its local test split")
        figures = "\n![per-client accuracy on local test splits](client_accuracy.png)\n"
    fields = "" if hyperparameters is None else f"| hyperparameters | {hyperparameters_text(hyperparameters)} |\n"
    text = f"""# {title}

{summary.get("description", "")}
{chr(10) + notes + chr(10) if notes else ""}
| | |
|---|---|
| algorithm | {summary["algorithm"]} |
{fields}| dataset | {summary["dataset"]} |
| encoder | {summary["encoder"]} |
| partition | {summary["partition"]} over {summary["num_clients"]} clients (sizes {min(sizes, default=0)}..{max(sizes, default=0)}, beta_cib {partition_stats.get("beta_cib", float("nan")):.2f}, beta_hetero {partition_stats.get("beta_hetero", float("nan")):.2f}) |
| seed | {summary["seed"]} |
| rounds | {summary["rounds"]} |
| initial accuracy | {100 * summary["initial_accuracy"]:.2f}% |
| final accuracy | {100 * summary["final_accuracy"]:.2f}% |
| best accuracy | {100 * summary["best_accuracy"]:.2f}% |
{more}| wall time | {summary["wall_seconds"]:.1f} s |
| device | {summary.get("device", "cpu")} |
| worker processes | {summary.get("workers", 1)} |
| torch threads | {threads_text(summary.get("threads", {}))} |
| failed client updates | {summary.get("failed_updates", 0)} |
| clients without data | {summary.get("empty_updates", 0)} |
{warning}

![accuracy per round](accuracy.png)
{figures}
![partition](partition.png)

{head}
{rows}
{problems_section(summary)}{extra}"""
    write_text(run.report, text)
