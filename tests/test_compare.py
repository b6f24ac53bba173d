"""fedprior compare: runs of different algorithms on one partition, side by side; an unfinished run; bad folders."""

import json
import shutil

import pytest
from cli import error_line, fedprior, invoke
from typer.testing import CliRunner

from fedprior.cli import app
from fedprior.errors import FedpriorError
from fedprior.experiments.compare import compare_runs
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start

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
    assert not compare_runs([root / "fedavg-cnn", root / "other-seed"]).same_partition


def test_an_unfinished_run_is_read_from_its_metrics(runs):
    root, _ = runs
    (view,) = compare_runs([root / "fedprox-cnn"]).runs
    lines = [json.loads(line) for line in (root / "fedprox-cnn" / "metrics.jsonl").read_text().splitlines()]
    assert not view.finished and view.rounds == 1 and view.status == "unfinished: 1 rounds in metrics.jsonl"
    assert view.metrics["final_accuracy"] == lines[0]["accuracy"]
    assert view.metrics["upload_bytes"] == sum(lines[0]["upload_bytes"].values())
    assert view.metrics["download_bytes"] == lines[0]["download_bytes"] * len(lines[0]["clients"])
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
    final = f"{100 * summaries['scaffold-cnn']['final_accuracy']:.2f}%"
    assert "final accuracy" in table.stdout and final in table.stdout and "algorithm.name" in table.stdout


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
