"""fedprior compare: runs of different algorithms on one partition, side by side; an unfinished run; bad folders."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from fedprior.cli import app
from fedprior.errors import FedpriorError
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.results.compare import compare_runs
from tests.support.cli import error_line, fedprior, invoke

TINY = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=0.5", "federation.rounds=2", "federation.batch_size=64", "run.threads=1"]


class Interrupt(Exception):
    pass


def stop_after_round_1(record):
    if record.get("step") == 1:
        raise Interrupt


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fedavg and scaffold finished, fedprox stopped after round 1 of 2; fedavg again on another partition (seed)."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDPRIOR_CACHE", str(root / "cache"))
        summaries = {}
        for preset in ("fedavg-cnn", "scaffold-cnn"):
            summaries[preset] = start(*load_config(preset, TINY), root / preset)
        with pytest.raises(Interrupt):
            start(*load_config("fedprox-cnn", TINY), root / "fedprox-cnn", on_round=stop_after_round_1)
        summaries["other-seed"] = start(*load_config("fedavg-cnn", [*TINY, "run.seed=1"]), root / "other-seed")
    return root, summaries


def test_finished_runs_side_by_side(runs):
    root, summaries = runs
    comparison = compare_runs([root / "fedavg-cnn", root / "scaffold-cnn"])
    assert comparison.labels == ["fedavg-cnn", "scaffold-cnn"]
    assert comparison.same_partition
    assert comparison.differences["algorithm.name"] == ["fedavg", "scaffold"]
    assert comparison.differences["algorithm.global_lr"] == [None, 1.0]  # a hyperparameter only scaffold has
    assert "federation.rounds" not in comparison.differences and "description" not in comparison.differences
    for view, preset in zip(comparison.runs, ("fedavg-cnn", "scaffold-cnn"), strict=True):
        summary = summaries[preset]
        assert view.finished and view.rounds == 2
        for key in ("final_accuracy", "best_accuracy", "final_macro_f1", "download_bytes", "upload_bytes", "wall_seconds"):
            assert view.metrics[key] == summary[key]
        assert list(view.curve.values()) == [summary["initial_accuracy"], *summary["history"]]
    assert comparison.runs[1].metrics["upload_bytes"] == 2 * comparison.runs[0].metrics["upload_bytes"]  # + control variates
    seeds = compare_runs([root / "fedavg-cnn", root / "other-seed"])
    assert not seeds.same_partition
    assert [(g.label, g.seeds) for g in seeds.groups] == [("fedavg", [0, 1])]  # real configs differing in run.seed only: one group


def test_an_unfinished_run_is_read_from_its_metrics(runs):
    root, _ = runs
    (view,) = compare_runs([root / "fedprox-cnn"]).runs
    lines = [json.loads(line) for line in (root / "fedprox-cnn" / "metrics.jsonl").read_text().splitlines()]
    assert not view.finished and view.rounds == 1 and view.status == "unfinished: 1 rounds in metrics.jsonl"
    assert view.metrics["final_accuracy"] == lines[0]["accuracy"]
    assert view.metrics["upload_bytes"] == lines[0]["upload_bytes"] == sum(lines[0]["upload_bytes_by_client"].values()) > 0  # the round's totals
    assert view.metrics["download_bytes"] == lines[0]["download_bytes"] > 0
    assert len(view.curve) == 2 and view.curve[1] == lines[0]["accuracy"] and 0 < view.curve[0] < 1  # initial from the checkpoint


def test_cli_json_table_and_plot(runs, tmp_path):
    root, summaries = runs
    folders = [str(root / name) for name in ("fedavg-cnn", "scaffold-cnn", "fedprox-cnn")]
    result = fedprior("compare", *folders, "--json", "--plot", str(tmp_path / "curves.png"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [r["label"] for r in out["runs"]] == ["fedavg-cnn", "scaffold-cnn", "fedprox-cnn"]
    assert out["runs"][0]["final_accuracy"] == summaries["fedavg-cnn"]["final_accuracy"]
    assert [r["finished"] for r in out["runs"]] == [True, True, False]
    assert out["same_partition"] and out["differences"]["algorithm.name"] == ["fedavg", "scaffold", "fedprox"]
    assert out["plot"] == str(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fedprox-cnn has not finished; its numbers come from the 1 rounds in its metrics.jsonl" in result.stderr

    table = CliRunner().invoke(app, ["compare", *folders[:2], "--plot", str(tmp_path / "t.png")], terminal_width=200)
    assert table.exit_code == 0, table.output
    final = f"{100 * summaries['scaffold-cnn']['final_accuracy']:.2f}"  # one run per group: its value, no sd
    assert "accuracy %" in table.stdout and final in table.stdout and "2 runs in 2 groups" in table.stdout
    assert [g["group"].split()[0] for g in out["groups"]] == ["fedavg", "scaffold", "fedprox"]
    assert out["groups"][0]["final_accuracy_mean"] == summaries["fedavg-cnn"]["final_accuracy"] and out["groups"][0]["final_accuracy_sd"] is None


def test_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(FedpriorError, match="is not a fedprior run directory \\(no such folder\\)"):
        compare_runs([tmp_path / "missing"])
    result = fedprior("compare", str(tmp_path), "--plot", str(tmp_path / "x.png"))
    assert result.returncode == 2 and f"error: {tmp_path} is not a fedprior run directory (no config.toml)" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.png").exists()


def test_garbage_appended_to_metrics_is_skipped_with_one_warning(runs, tmp_path):
    """Bytes appended to an unfinished run's metrics.jsonl (not UTF-8, not JSON): the valid rounds are read, one warning says how many lines were skipped."""
    root, _ = runs
    damaged = tmp_path / "fedprox-cnn"
    shutil.copytree(root / "fedprox-cnn", damaged)
    with (damaged / "metrics.jsonl").open("ab") as handle:
        handle.write(b'\xac\xff\x00{"step\n7\n\x89PNG\r\n')  # three lines that are not a round record
    (expected,) = compare_runs([root / "fedprox-cnn"]).runs
    with pytest.warns(UserWarning, match=r"metrics.jsonl: skipped 3 lines that are not a round record \(damaged or appended text\); read the 1 valid one$"):
        (view,) = compare_runs([damaged]).runs
    assert view.rounds == 1 and view.metrics == expected.metrics and view.curve == expected.curve

    result = invoke("compare", damaged, "--plot", tmp_path / "c.png", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["final_accuracy"] == expected.metrics["final_accuracy"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{damaged / 'metrics.jsonl'}: skipped 3 lines" in " ".join(result.stderr.split()), result.stderr


def test_plot_into_a_folder_is_one_line(runs, tmp_path):
    root, _ = runs
    result = invoke("compare", root / "fedavg-cnn", "--plot", tmp_path)
    assert result.exit_code == 2
    assert error_line(result) == f"error: --plot: {tmp_path} is a folder; give a file name such as {tmp_path / 'compare.png'}"


# Grouping, mean ± sd, CSV and the plot, on run directories written by hand (no training).


def fake_run(folder, algorithm, seed, final, best, alpha=0.1, threads=1, extra=None, finished=True, rounds=None, fingerprint=None):
    """A minimal run directory: config.toml, and result.json (finished) or metrics.jsonl (2 rounds, the second = final).

    ``rounds``: federation.rounds in the config; ``fingerprint``: the summary's round fingerprints and state hash (a run's numbers).
    """
    folder.mkdir(parents=True)
    lines = [f'name = "{algorithm}-run"', "", "[algorithm]", f'name = "{algorithm}"', "lr = 0.1"]
    lines += [f"{k} = {v}" for k, v in (extra or {}).items()]
    lines += ["", "[partition]", f"alpha = {alpha}", "", "[run]", f"seed = {seed}", f"threads = {threads}", ""]
    lines += ["[federation]", f"rounds = {rounds}", ""] if rounds is not None else []
    (folder / "config.toml").write_text("\n".join(lines))
    history = [best, final] if best != final else [0.5 * final, final]
    if finished:
        summary = {
            **({"round_fingerprints": [fingerprint] * 3, "state_sha256": fingerprint} if fingerprint else {}),
            "rounds": 2,
            "initial_accuracy": 0.1,
            "history": history,
            "final_accuracy": final,
            "best_accuracy": best,
            "download_bytes": 1000 * (seed + 1),
            "upload_bytes": 2000,
            "wall_seconds": 3.0,
        }
        (folder / "result.json").write_text(json.dumps(summary))
    else:
        (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, "accuracy": a}) + "\n" for i, a in enumerate(history)))
    return folder


@pytest.fixture
def grid(tmp_path):
    """fedavg at alpha 0.1 (seeds 0-2, threads 1 or 2), scaffold at alpha 0.1 (seeds 0-1), fedavg at alpha 0.5 (seed 0)."""
    runs = [
        fake_run(tmp_path / "fa-s0", "fedavg", 0, 0.70, 0.72),
        fake_run(tmp_path / "fa-s1", "fedavg", 1, 0.74, 0.75, threads=2),
        fake_run(tmp_path / "fa-s2", "fedavg", 2, 0.78, 0.81),
        fake_run(tmp_path / "sc-s0", "scaffold", 0, 0.60, 0.60, extra={"global_lr": 1.0}),
        fake_run(tmp_path / "sc-s1", "scaffold", 1, 0.64, 0.64, extra={"global_lr": 1.0}),
        fake_run(tmp_path / "fa5-s0", "fedavg", 0, 0.90, 0.90, alpha=0.5),
    ]
    return runs


def test_runs_group_by_method_with_seeds_folded(grid):
    comparison = compare_runs(grid)
    groups = comparison.groups
    assert [g.label for g in groups] == ["fedavg alpha=0.1", "scaffold alpha=0.1", "fedavg alpha=0.5"]
    assert [g.run_labels for g in groups] == [["fa-s0", "fa-s1", "fa-s2"], ["sc-s0", "sc-s1"], ["fa5-s0"]]
    assert [g.seeds for g in groups] == [[0, 1, 2], [0, 1], [0]]
    assert groups[1].setting == {"partition.alpha": 0.1, "algorithm.global_lr": 1.0}
    assert groups[0].setting == {"partition.alpha": 0.1, "algorithm.global_lr": None}  # scaffold's hyperparameter: not fedavg's
    # alpha varies within fedavg (a setting: a line style); global_lr only between algorithms (part of the method)
    assert [g.style for g in groups] == [0, 0, 1]

    mean, sd, n = groups[0].stat("final_accuracy")  # 0.70, 0.74, 0.78
    assert (mean, sd, n) == (pytest.approx(0.74), pytest.approx(0.04), 3)
    mean, sd, n = groups[0].stat("best_accuracy")  # 0.72, 0.75, 0.81: squares 16 + 1 + 25 (e-4) over n - 1 = 2
    assert (mean, sd, n) == (pytest.approx(0.76), pytest.approx((0.0042 / 2) ** 0.5), 3)
    mean, sd, n = groups[1].stat("final_accuracy")  # 0.60, 0.64
    assert (mean, sd, n) == (pytest.approx(0.62), pytest.approx(0.02 * 2**0.5), 2)
    assert groups[2].stat("final_accuracy") == (pytest.approx(0.90), None, 1)  # one run: no sd

    curve = groups[0].curve()  # rounds 0, 1, 2: initial 0.1 each; round 1 = best; round 2 = final
    assert list(curve) == [0, 1, 2]
    assert curve[0] == (pytest.approx(0.1), pytest.approx(0.0), 3)
    assert curve[1][0] == pytest.approx(0.76) and curve[2][0] == pytest.approx(0.74) and curve[2][1] == pytest.approx(0.04)

    row = comparison.group_rows()[0]
    assert row["group"] == "fedavg alpha=0.1" and row["algorithm"] == "fedavg" and row["n"] == 3 and row["finished"] == 3
    assert row["download_bytes_mean"] == pytest.approx(2000) and row["download_bytes_sd"] == pytest.approx(1000)  # 1000, 2000, 3000
    assert row["upload_bytes_sd"] == 0.0 and row["wall_seconds_mean"] == 3.0
    assert not comparison.paired  # scaffold lacks seed 2


def test_every_run_alone_or_one_group(grid):
    """Seeds and threads only: one group; differing in everything that counts: a group per run."""
    comparison = compare_runs(grid[:3])
    assert [g.label for g in comparison.groups] == ["fedavg"] and comparison.groups[0].style == 0
    assert "run.threads" in comparison.differences  # still shown as a difference, but not a method
    assert [len(g.runs) for g in compare_runs([grid[0], grid[3], grid[5]]).groups] == [1, 1, 1]


def test_an_unfinished_run_counts_in_its_group(grid, tmp_path):
    unfinished = fake_run(tmp_path / "fa-s3", "fedavg", 3, 0.82, 0.82, finished=False)
    comparison = compare_runs([*grid[:3], unfinished])
    (group,) = comparison.groups
    row = comparison.group_rows()[0]
    assert row["n"] == 4 and row["finished"] == 3 and row["seeds"] == [0, 1, 2, 3]
    assert row["final_accuracy_mean"] == pytest.approx((0.70 + 0.74 + 0.78 + 0.82) / 4)
    assert group.stat("initial_accuracy")[2] == 3  # the unfinished run has no checkpoint: no initial accuracy
    assert group.curve()[0][2] == 3 and group.curve()[2][2] == 4  # its NaN round 0 is left out of the mean
    result = invoke("compare", *grid[:3], unfinished, "--plot", tmp_path / "c.png")
    out = " ".join(result.stdout.split())
    assert "│ 4* │ 0 1 2 3 │" in out and "*: some of the group's runs have not finished" in out, out


def test_paired_groups(tmp_path):
    """Two algorithms, seeds 0 and 1, each seed's runs on one partition: paired; another partition for one run: not."""
    import numpy as np

    runs = []
    for algorithm in ("fedavg", "fedprox"):
        for seed in (0, 1):
            folder = fake_run(tmp_path / f"{algorithm}-{seed}", algorithm, seed, 0.5, 0.5)
            np.savez(folder / "partition.npz", client_0=np.arange(seed, seed + 5))
            runs.append(folder)
    assert compare_runs(runs).paired
    np.savez(runs[3] / "partition.npz", client_0=np.arange(7))
    assert not compare_runs(runs).paired


def test_group_and_run_csv(grid, tmp_path):
    import csv

    comparison = compare_runs(grid)
    path = comparison.write_csv(tmp_path / "out" / "groups.csv")
    rows = list(csv.DictReader(path.open()))
    assert [r["group"] for r in rows] == ["fedavg alpha=0.1", "scaffold alpha=0.1", "fedavg alpha=0.5"]
    header = list(rows[0])
    assert header[:8] == ["group", "algorithm", "partition.alpha", "algorithm.global_lr", "n", "finished", "rounds", "seeds"]
    assert "final_accuracy_mean" in header and "best_accuracy_sd" in header and "initial_accuracy_mean" in header
    first, second, third = rows
    assert first["seeds"] == "0 1 2" and first["n"] == "3" and first["algorithm.global_lr"] == ""
    assert float(first["final_accuracy_mean"]) == pytest.approx(0.74) and float(first["final_accuracy_sd"]) == pytest.approx(0.04)  # fractions
    assert float(second["final_accuracy_sd"]) == pytest.approx(0.028284271247)
    assert third["final_accuracy_mean"] == "0.9" and third["final_accuracy_sd"] == ""  # one run: no sd

    runs = list(csv.DictReader(comparison.write_csv(tmp_path / "runs.csv", per="run").open()))
    assert [r["label"] for r in runs] == ["fa-s0", "fa-s1", "fa-s2", "sc-s0", "sc-s1", "fa5-s0"]
    assert runs[3]["group"] == "scaffold alpha=0.1" and runs[3]["seed"] == "0" and runs[3]["final_accuracy"] == "0.6"
    with pytest.raises(FedpriorError, match="per must be 'group' or 'run', not 'seed'"):
        comparison.csv(per="seed")


def test_dataframe_without_pandas_names_the_install(grid, monkeypatch):
    import sys

    comparison = compare_runs(grid)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(FedpriorError, match="needs pandas, which is not installed: .venv/bin/pip install -c requirements.lock pandas"):
        comparison.dataframe()


def test_dataframe_with_pandas(grid):
    pytest.importorskip("pandas")
    frame = compare_runs(grid).dataframe()
    assert list(frame["n"]) == [3, 2, 1] and frame["final_accuracy_mean"].iloc[0] == pytest.approx(0.74)
    assert len(compare_runs(grid).dataframe(per="run")) == 6


def test_cli_groups_table_csv_and_json(grid, tmp_path):
    folders = [str(p) for p in grid]
    result = invoke("compare", *folders, "--plot", tmp_path / "c.png", "--csv", tmp_path / "g.csv", "--runs-csv", tmp_path / "r.csv", "--runs")
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "74.00 ± 4.00" in out and "76.00 ± 4.58" in out and "62.00 ± 2.83" in out  # final and best, in %
    assert "6 runs in 3 groups" in out and "0 1 2" in out
    assert "fa-s1" in out and "78.00%" in out  # --runs: a row per run
    assert f"per-group CSV written to {tmp_path / 'g.csv'}" in out and (tmp_path / "r.csv").is_file()

    result = invoke("compare", *folders, "--plot", tmp_path / "c.png", "--json", "--csv", tmp_path / "g2.csv")
    out = json.loads(result.stdout)
    assert [g["group"] for g in out["groups"]] == ["fedavg alpha=0.1", "scaffold alpha=0.1", "fedavg alpha=0.5"]
    assert out["groups"][0]["final_accuracy_mean"] == pytest.approx(0.74) and out["groups"][0]["runs"] == ["fa-s0", "fa-s1", "fa-s2"]
    assert out["groups"][2]["final_accuracy_sd"] is None and out["groups"][0]["curve"]["2"]["n"] == 3
    assert out["csv"] == str(tmp_path / "g2.csv") and out["paired"] is False and "run.seed" in out["ignored_fields"]

    result = invoke("compare", *folders, "--plot", tmp_path / "c.png", "--csv", tmp_path)
    assert result.exit_code == 2 and error_line(result) == f"error: --csv: {tmp_path} is a folder; give a file name such as {tmp_path / 'compare.csv'}"


def test_plot_of_30_runs_is_readable(tmp_path, monkeypatch):
    """5 algorithms x 2 settings x 3 seeds: 10 mean lines with bands, a colour per group, a line style per setting, the legend beside the axes."""
    from fedprior.results import compare_plot

    figures = []

    def keep(figure, path, close=True):
        figures.append(figure)
        return save(figure, path, close=False)

    save = compare_plot.save_figure
    monkeypatch.setattr(compare_plot, "save_figure", keep)
    algorithms = ["fedavg", "fedprox", "scaffold", "moon", "fednova"]
    runs = [
        fake_run(tmp_path / f"{a}-{alpha}-{seed}", a, seed, 0.5 + 0.01 * i + 0.02 * seed, 0.9, alpha=alpha)
        for i, a in enumerate(algorithms)
        for alpha in (0.1, 0.5)
        for seed in range(3)
    ]
    comparison = compare_runs(runs)
    assert len(comparison.runs) == 30 and len(comparison.groups) == 10
    path = comparison.plot(tmp_path / "plots" / "thirty.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    (figure,) = figures
    (ax,) = figure.axes
    lines = ax.get_lines()
    assert len(lines) == 10 and len(ax.collections) == 10  # a mean line and a ±sd band per group
    assert len({tuple(line.get_color()) for line in lines}) == 10  # a colour per group: one algorithm's settings differ too (issue 46)
    assert all(tuple(band.get_facecolor()[0][:3]) == tuple(line.get_color()[:3]) for line, band in zip(lines, ax.collections, strict=True))
    styles = {"alpha=0.1": lines[0].get_linestyle(), "alpha=0.5": lines[1].get_linestyle()}
    assert styles["alpha=0.1"] != styles["alpha=0.5"]
    assert all(line.get_linestyle() == styles[line.get_label().split()[1]] for line in lines)
    assert lines[0].get_label() == "fedavg alpha=0.1 (n=3)"
    assert list(lines[0].get_ydata()) == pytest.approx([10.0, 90.0, 52.0])  # %: initial, round 1 = best, final (0.50, 0.52, 0.54)

    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (legend,) = figure.legends
    assert len(legend.get_texts()) == 10
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1  # beside the axes, never over a curve
    assert legend.get_window_extent(renderer).x1 <= figure.bbox.x1 + 1  # and inside the picture


def test_long_group_labels_wrap_and_the_legend_stays_beside_the_axes(tmp_path, monkeypatch):
    """Groups told apart by a long field (labels of ~190 characters): the legend neither covers the axes nor the title (issue 33 item 11)."""
    import warnings

    from fedprior.results import compare_plot

    figures = []
    save = compare_plot.save_figure
    monkeypatch.setattr(compare_plot, "save_figure", lambda figure, path, close=True: (figures.append(figure), save(figure, path, close=False))[1])
    note = "a-long-description-of-the-setting-" * 5
    runs = [fake_run(tmp_path / f"r{i}-{seed}", "fedavg", seed, 0.5 + 0.01 * i, 0.9, extra={"note": f'"{note}{i}"'}) for i in range(6) for seed in range(2)]
    comparison = compare_runs(runs)
    assert min(len(g.label) for g in comparison.groups) > 180
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained layout warns where it had to collapse the axes
        comparison.plot(tmp_path / "long.png")
        (figure,) = figures
        figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (ax,) = figure.axes
    (legend,) = figure.legends
    box, axes, title = legend.get_window_extent(renderer), ax.get_window_extent(renderer), ax.title.get_window_extent(renderer)
    assert box.x0 >= axes.x1 and box.x0 >= title.x1  # beside the axes and their title
    assert box.x1 <= figure.bbox.x1 + 1 and box.y0 >= -1 and box.y1 <= figure.bbox.y1 + 1  # inside the picture
    assert axes.width > 0.3 * figure.bbox.width  # the axes are not squeezed to a sliver
    assert all(max(map(len, text.get_text().splitlines())) <= compare_plot.LABEL_WIDTH for text in legend.get_texts())


def test_a_narrow_terminal_leaves_columns_out_rather_than_cropping_numbers(grid):
    from fedprior.cli.compare import needed_width, render

    comparison = compare_runs(grid)
    wide = render(comparison, 200)
    assert [c.header for c in wide.columns][-2:] == ["MB to / from\nclients", "wall\ntime s"] and "left out" not in str(wide.caption)
    # method 9 (alpha=0.1) + n 1 + seeds 5 + 12 + 12 + 12 + wall 6 = 57, 7 columns: + 3 x 7 + 1 = 79
    assert needed_width(wide) == 79
    narrow = render(comparison, 76)
    assert [c.header for c in narrow.columns][-1] == "MB to / from\nclients" and needed_width(narrow) == 70
    assert str(narrow.caption).endswith("left out for the terminal's width (in --csv, --json): wall time s")
    assert "MB to / from clients, wall time s" in str(render(comparison, 66).caption)


def test_a_repeated_run_counts_once_with_a_warning_in_the_table(tmp_path):
    """The same config and seed twice (a repeat, or one folder named twice): one run of the group, and the table says so."""
    runs = [
        fake_run(tmp_path / "fa-s0", "fedavg", 0, 0.70, 0.72, fingerprint="aa"),
        fake_run(tmp_path / "fa-s1", "fedavg", 1, 0.74, 0.75, fingerprint="bb"),
        fake_run(tmp_path / "fa-s0-again", "fedavg", 0, 0.70, 0.72, threads=2, fingerprint="aa"),  # threads: where it ran, not what
        fake_run(tmp_path / "fa-s1-other", "fedavg", 1, 0.99, 0.99, fingerprint="cc"),
    ]
    comparison = compare_runs(runs)
    (group,) = comparison.groups
    assert group.seeds == [0, 1] and group.run_labels == ["fa-s0", "fa-s1"]
    assert group.stat("final_accuracy") == (pytest.approx(0.72), pytest.approx(0.04 / 2**0.5), 2)  # not 0.70, 0.74, 0.70, 0.99
    assert [r.text() for r in comparison.repeats] == [
        "fa-s0-again repeats fa-s0 (same config and seed 0; the same numbers)",
        "fa-s1-other repeats fa-s1 (same config and seed 1; other numbers)",
    ]
    assert comparison.group_rows()[0]["n"] == 2 and len(json.loads(json.dumps(comparison.to_dict()))["repeats"]) == 2
    twice = compare_runs([runs[0], runs[0]])
    assert [r.text() for r in twice.repeats] == [f"{tmp_path.name}/fa-s0 is given twice"] and twice.group_rows()[0]["n"] == 1

    result = invoke("compare", *runs)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    row = next(line for line in lines if "fedavg" in line)
    assert row.split("│")[2:4] == [" 2 ", " 0 1   "] and "72.00 ± 2.83" in row, row
    assert "4 runs (2 repeated runs counted once) in 1 group;" in result.stdout
    assert (
        "warning: counted once: fa-s0-again repeats fa-s0 (same config and seed 0; the same numbers); "
        "fa-s1-other repeats fa-s1 (same config and seed 1; other numbers)"
    ) in lines


def test_groups_with_other_budgets_are_not_paired_and_the_table_names_the_fields_that_differ(tmp_path):
    import numpy as np

    def grid(fedprox_rounds):
        runs = []
        for algorithm, rounds in (("fedavg", 3), ("fedprox", fedprox_rounds)):
            for seed in (0, 1):
                folder = fake_run(tmp_path / f"{fedprox_rounds}" / f"{algorithm}-{seed}", algorithm, seed, 0.5, 0.5, rounds=rounds)
                np.savez(folder / "partition.npz", client_0=np.arange(seed, seed + 5))
                runs.append(folder)
        return runs

    same, other = grid(3), grid(4)
    assert compare_runs(same).paired and compare_runs(same).budget_differences == {}
    comparison = compare_runs(other)
    assert not comparison.paired and comparison.budget_differences == {"federation.rounds": [3, 4]}
    assert comparison.to_dict()["budget_differences"] == {"federation.rounds": [3, 4]}

    lines = invoke("compare", *other).stdout.splitlines()
    assert "the groups differ in: algorithm.name (fedavg, fedprox); federation.rounds (3, 4)" in lines
    assert "not paired: the groups' budgets differ: federation.rounds (3, 4)" in lines
    lines = invoke("compare", *same).stdout.splitlines()
    assert "paired: every group ran the same seeds with the same budget, each seed on one partition" in lines
    assert "the groups differ in: algorithm.name (fedavg, fedprox)" in lines


def test_compare_writes_a_plot_only_when_asked_and_counts_in_words(grid, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("compare", grid[0])
    assert result.exit_code == 0, result.output
    assert "1 run in 1 group;" in result.stdout and "written" not in result.stdout
    assert not list(tmp_path.glob("*.png"))  # nothing left in the working directory
    assert json.loads(invoke("compare", *grid, "--json").stdout)["plot"] is None and not list(tmp_path.glob("*.png"))
    result = invoke("compare", *grid, "--plot", "curves.png")
    assert "accuracy curves written to curves.png" in result.stdout and (tmp_path / "curves.png").is_file()


def test_paired_groups_get_differences_with_t_intervals(tmp_path):
    """Issue 46: a 2-group, 3-seed sweep (one partition per seed) prints group - first group, seed by seed, with the 95% t interval.

    lr=0.03 - lr=0.01 on final accuracy: d = (0.04, 0.02, 0.03), mean 3.00 points, sd 1.00, t(0.975, 2) = 4.3027:
    3.00 +- 4.3027 / sqrt(3) = [0.52, 5.48], above 0: holds. Best accuracy: d = (0.01, -0.01, 0.03), [-3.97, +5.97]: not resolved."""
    import numpy as np

    finals = {0.01: (0.70, 0.72, 0.74), 0.03: (0.74, 0.74, 0.77)}
    bests = {0.01: (0.75, 0.76, 0.77), 0.03: (0.76, 0.75, 0.80)}
    for lr in finals:
        for seed in range(3):
            folder = fake_run(tmp_path / f"lr={lr}--seed{seed}", "fedavg", seed, finals[lr][seed], bests[lr][seed], extra={"lr_decay": lr})
            np.savez(folder / "partition.npz", client_0=np.arange(seed, seed + 5))
    comparison = compare_runs([tmp_path])
    final, best = comparison.paired_differences()
    assert (final["group"], final["minus"], final["n"], final["verdict"]) == ("fedavg lr_decay=0.03", "fedavg lr_decay=0.01", 3, "holds")
    assert (100 * final["mean"], 100 * final["sd"]) == (pytest.approx(3.0), pytest.approx(1.0))
    assert (100 * final["low"], 100 * final["high"]) == (pytest.approx(3 - 4.302653 / 3**0.5), pytest.approx(3 + 4.302653 / 3**0.5))
    assert best["verdict"] == "not resolved" and 100 * best["low"] == pytest.approx(1 - 2 * 4.302653 / 3**0.5)
    result = invoke("compare", tmp_path)
    assert result.exit_code == 0, result.output
    assert "final accuracy: fedavg lr_decay=0.03 - fedavg lr_decay=0.01 = +3.00 points, 95% t interval [+0.52, +5.48] over 3 seeds: holds" in result.stdout
    assert json.loads(invoke("compare", tmp_path, "--json").stdout)["paired_differences"][0]["verdict"] == "holds"
    (tmp_path / "lr=0.03--seed2" / "partition.npz").unlink()  # a seed without its partition: not paired, no differences
    assert not compare_runs([tmp_path]).paired and compare_runs([tmp_path]).paired_differences() == []


def test_a_partial_run_is_not_folded_with_longer_runs_of_its_group(tmp_path):
    """Probe 4 note 21: a stopped sweep's 1-round run was folded with finished 2-round runs into one mean ± sd."""
    finished = [fake_run(tmp_path / f"s{seed}", "fedavg", seed, final, final) for seed, final in ((0, 0.70), (1, 0.74))]
    partial = fake_run(tmp_path / "s2", "fedavg", 2, 0.20, 0.20, finished=False)
    (partial / "metrics.jsonl").write_text(json.dumps({"step": 1, "accuracy": 0.2}) + "\n")  # stopped after round 1 of 2
    comparison = compare_runs([*finished, partial])
    (group,) = comparison.groups
    assert group.run_labels == ["s0", "s1"] and group.stat("final_accuracy")[:1] == (pytest.approx(0.72),)
    assert [(s.label, s.rounds, s.counted_rounds, s.finished) for s in group.shorter] == [("s2", 1, 2, False)]
    assert comparison.to_dict()["shorter"] == [{"label": "s2", "seed": 2, "rounds": 1, "counted_rounds": 2, "finished": False}]
    out = " ".join(invoke("compare", *finished, partial).stdout.split())
    assert "3 runs (1 shorter run left out) in 1 group" in out
    assert "warning: left out of their groups' numbers (a mean folds runs of one length): s2 (unfinished, 1 of the 2 rounds" in out
    assert "│ 2 │ 0 1 │" in out, out  # n = 2, not 3*


def test_dp_runs_show_their_epsilon_beside_accuracy_in_the_table_runs_and_json(tmp_path, monkeypatch):
    """`fedprior compare` of DP runs: a DP epsilon column (the last round's, as result.json and metrics.jsonl record it;
    an unfinished run's from its last round), '-' for a run without DP, the delta named; in --json too (probe 5's note)."""
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    tiny = [*TINY, "algorithm.lr=0.01"]
    dp = [*tiny, "privacy.dp=server"]
    finished = start(*load_config("fedavg-cnn", dp), tmp_path / "dp")
    with pytest.raises(Interrupt):
        start(*load_config("fedavg-cnn", [*dp, "privacy.noise_multiplier=2"]), tmp_path / "dp-stopped", on_round=stop_after_round_1)
    start(*load_config("fedavg-cnn", tiny), tmp_path / "no-dp")
    stopped = json.loads((tmp_path / "dp-stopped" / "metrics.jsonl").read_text().splitlines()[0])["dp_epsilon"]
    assert finished["dp_epsilon"] > stopped > 0
    folders = [str(tmp_path / name) for name in ("dp", "dp-stopped", "no-dp")]
    out = json.loads(fedprior("compare", *folders, "--json").stdout)
    assert [r.get("dp_epsilon") for r in out["runs"]] == [finished["dp_epsilon"], stopped, None]
    assert [g["dp_epsilon_mean"] for g in out["groups"]] == [finished["dp_epsilon"], stopped, None]
    monkeypatch.setenv("COLUMNS", "250")  # every column on screen
    table = fedprior("compare", *folders, "--runs")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert any("DP" in line for line in lines) and any("epsilon" in line for line in lines)
    assert f"{finished['dp_epsilon']:.3f}" in table.stdout and f"{stopped:.3f}" in table.stdout
    assert "DP epsilon: the privacy spent by the last round, at privacy.delta = 1e-05" in table.stdout


def timed_run(folder, seed, times):
    """A finished fake run whose summary holds simulated time (a run with a system model): ``times`` at its two rounds."""
    run = fake_run(folder, "fedavg", seed, 0.7 + seed / 100, 0.72 + seed / 100)
    summary = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps({**summary, "evaluated_rounds": [1, 2], "simulated_times": times, "simulated_time": times[-1]}))
    return run


def test_compare_plots_accuracy_against_simulated_time(tmp_path):
    runs = [timed_run(tmp_path / "s0", 0, [10.0, 30.0]), timed_run(tmp_path / "s1", 1, [20.0, 50.0])]
    (group,) = compare_runs(runs).groups
    assert group.time_curve() == {0: (0.0, 0.1, 0.0, 2), 1: (15.0, *group.curve()[1][:2], 2), 2: (40.0, *group.curve()[2][:2], 2)}
    result = invoke("compare", *runs, "--plot", tmp_path / "t.png", "--x", "time")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t.png").stat().st_size > 0
    untimed = fake_run(tmp_path / "plain", "scaffold", 0, 0.6, 0.6)
    refused = invoke("compare", *runs, untimed, "--plot", tmp_path / "u.png", "--x", "time")
    assert error_line(refused).startswith("error: --x time: the runs of scaffold have no simulated time")
    assert error_line(invoke("compare", *runs, "--x", "time")) == "error: --x: sets the x-axis of --plot; give --plot FILE.png too"
    assert error_line(invoke("compare", *runs, "--plot", tmp_path / "v.png", "--x", "rounds")) == "error: --x rounds: accepted: round, time"


def test_compare_shows_the_per_client_mean_and_the_pooled_accuracy_side_by_side(tmp_path):
    """Runs with local test splits: both per-client averages, named apart (issue 55, item 5); an unfinished run's from its records."""
    from fedprior.cli.compare import render

    done = fake_run(tmp_path / "done", "fedbn", 0, 0.70, 0.72)
    summary = json.loads((done / "result.json").read_text())
    (done / "result.json").write_text(json.dumps({**summary, "final_client_accuracy_mean": 0.7, "final_client_accuracy_pooled": 0.8333}))
    stopped = fake_run(tmp_path / "stopped", "fedavg", 0, 0.60, 0.60, finished=False)
    record = {"step": 3, "accuracy": 0.6, "client_accuracy": [0.5, 0.9], "client_accuracy_mean": 0.7, "client_accuracy_pooled": 0.8}
    with (stopped / "metrics.jsonl").open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    comparison = compare_runs([done, stopped])
    assert comparison.runs[0].metrics["final_client_accuracy_pooled"] == 0.8333 and comparison.runs[0].metrics["final_client_accuracy_mean"] == 0.7
    assert comparison.runs[1].metrics["final_client_accuracy_pooled"] == 0.8
    table = render(comparison, 200)
    headers = [str(c.header) for c in table.columns]
    assert "per-client\nmean %" in headers and "per-client\npooled %" in headers
    pooled = table.columns[headers.index("per-client\npooled %")]
    assert "83.33" in list(pooled.cells)[0] and "80.00" in list(pooled.cells)[1]
