"""benchmarks/device_check.sh, the prepared GPU session (issue 32): its scripts parse, its wheel list is what the GPU
image lacks of fedprior at the locked versions, its steps record what happened, and its dry run runs here."""

import importlib.metadata as metadata
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.test_lock import locked

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
IMAGE_PYTHON = {"python_version": "3.12", "python_full_version": "3.12.3", "extra": ""}


def listed(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_device_scripts_parse():
    for script in ("device_check.sh", "device_wheels.sh"):
        subprocess.run(["bash", "-n", str(BENCHMARKS / script)], check=True)


def test_the_wheel_list_is_what_the_gpu_image_lacks_of_fedprior_at_the_locked_versions():
    """pyproject's dependencies, and theirs, that device_image.txt lacks: carried at requirements.lock's pins, torch never.

    Walked as pip would on the image's Python (3.12 markers), descending only into what is carried (the image's
    own packages bring their own requirements); a name the list says it does not carry must still be needed.
    """
    image = {canonicalize_name(name) for name in listed(BENCHMARKS / "device_image.txt")}
    text = (BENCHMARKS / "device_wheels.txt").read_text()
    pins = {canonicalize_name(Requirement(line).name): str(Requirement(line).specifier) for line in listed(BENCHMARKS / "device_wheels.txt")}
    not_carried = {canonicalize_name(n) for n in re.findall(r"^# not carried: (\S+)", text, flags=re.M)}
    spares = {canonicalize_name(n) for n in re.findall(r"^# spare: (\S+)", text, flags=re.M)}
    lock = locked()
    needed: dict[str, str] = {}
    todo = list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    versions_asked_of_the_image = set()
    while todo:
        requirement = Requirement(todo.pop())
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate(IMAGE_PYTHON):
            continue
        if name in image:
            if requirement.specifier:
                versions_asked_of_the_image.add(name)
            continue
        if name not in needed:
            needed[name] = f"=={lock[name]}"
            assert metadata.version(name) == lock[name], f"{name}: this environment is not the lock's"
            todo += metadata.distribution(name).requires or []
    assert "torch" in image and "torch" not in pins
    assert not_carried <= set(needed), f"device_wheels.txt says it does not carry {not_carried - set(needed)}, which fedprior does not need"
    assert pins == {n: v for n, v in needed.items() if n not in not_carried}, "benchmarks/device_wheels.txt: refresh it from the lock"
    assert spares <= versions_asked_of_the_image, f"a spare must be a package of the image that fedprior asks a version of: {spares}"


def run_check(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "OUT"} | {"PYTHON": sys.executable, **env}
    limit = int(env.get("DEVICE_CHECK_BUDGET", "600")) + 300  # the script keeps to its budget; this catches a hang
    return subprocess.run(["bash", str(BENCHMARKS / "device_check.sh"), *args], capture_output=True, text=True, env=environment, timeout=limit)


def summary(results: Path) -> dict[str, dict]:
    return {step["step"]: step for step in json.loads((results / "summary.json").read_text())["steps"]}


def test_each_step_is_recorded_passed_failed_or_timed_out_and_packed(tmp_path):
    """The extra-commands hook and the step guard: a step over its own limit is stopped, a failure does not stop the
    steps after it, the exit status says one failed, and the results are packed where the device tool fetches them."""
    extra = tmp_path / "extra.txt"
    extra.write_text(
        "# NAME SECONDS COMMAND\n"
        "slow 1 sleep 30\n"
        "fails 20 exit 3\n"
        'writes 20 echo "{\\"device\\": \\"$DEVICE\\", \\"dry_run\\": $DRY_RUN}" > $RESULTS/writes.json\n'
        "bad line\n"
    )
    results, pack = tmp_path / "results", tmp_path / "pack"
    pack.mkdir()
    done = run_check(
        "--dry-run",
        str(results),
        DEVICE_CHECK_STEPS="extra_slow extra_fails extra_writes",
        DEVICE_CHECK_EXTRA=str(extra),
        DEVICE_CHECK_PACK=str(pack),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    steps = summary(results)
    assert {name: step["status"] for name, step in steps.items()} == {
        "extra_slow": "timed_out",
        "extra_fails": "failed",
        "extra_writes": "passed",
        "extra_bad_line": "failed",
    }
    assert steps["extra_slow"]["seconds"] < 15 and steps["extra_fails"]["rc"] == 3
    assert json.loads((results / "writes.json").read_text()) == {"device": "cpu", "dry_run": 1}
    assert json.loads((pack / "summary.json").read_text())["mode"] == "dry-run"
    with tarfile.open(pack / "device-check.tar.gz") as archive:
        assert "results/writes.json" in archive.getnames()


def test_a_step_the_budget_cannot_hold_is_skipped(tmp_path):
    extra = tmp_path / "extra.txt"
    extra.write_text("first 30 sleep 5\nsecond 30 true\n")
    results = tmp_path / "results"
    done = run_check("--dry-run", str(results), DEVICE_CHECK_EXTRA=str(extra), DEVICE_CHECK_BUDGET="18", DEVICE_CHECK_STEPS="extra_first extra_second")
    assert done.returncode == 0, done.stdout + done.stderr
    steps = summary(results)
    assert steps["extra_first"]["status"] == "passed" and steps["extra_first"]["limit"] <= 18
    assert steps["extra_second"]["status"] == "skipped" and "out of time" in steps["extra_second"]["note"]


def test_the_reserve_keeps_budget_for_the_extra_commands_and_they_see_their_limit(tmp_path):
    """DEVICE_CHECK_RESERVE: a step before the extras sees the budget less the reserve (skipped here: 10 s would be
    left of it); the extra command runs on the whole budget and reads its limit as STEP_SECONDS."""
    extra = tmp_path / "extra.txt"
    extra.write_text('limit 100 echo "$STEP_SECONDS" > "$RESULTS/limit.txt"\n')
    results = tmp_path / "results"
    done = run_check(
        "--dry-run", str(results), DEVICE_CHECK_EXTRA=str(extra), DEVICE_CHECK_BUDGET="30", DEVICE_CHECK_RESERVE="20", DEVICE_CHECK_STEPS="env extra_limit"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    steps = summary(results)
    assert steps["env"]["status"] == "skipped" and "20s kept for the extra commands" in steps["env"]["note"]
    assert steps["extra_limit"]["status"] == "passed"
    limit = int((results / "limit.txt").read_text())
    assert limit == steps["extra_limit"]["limit"] and 15 <= limit <= 30


@pytest.mark.benchmark  # several minutes on 2 cores: with the benchmarks (pytest -m benchmark), not in the default run
def test_the_dry_run_runs_every_step_on_the_cpu(tmp_path):
    """Every step of the GPU session at a tiny size on the CPU, MiniLM's stand-in included; the results it writes."""
    results = tmp_path / "results"
    # every step must run, so the budget is the whole of a slow shared CPU's (the device's 540 s is for the GPU)
    done = run_check("--dry-run", str(results), DEVICE_CHECK_MINILM="standin", DEVICE_CHECK_EXTRA=str(tmp_path / "none.txt"), DEVICE_CHECK_BUDGET="2400")
    assert done.returncode == 0, done.stdout + done.stderr
    steps = summary(results)
    assert steps.pop("install")["status"] == "skipped" and steps.pop("extra")["status"] == "skipped"
    assert all(step["status"] == "passed" for step in steps.values()), steps
    assert json.loads((results / "env.json").read_text())["requirement_problems"] == []
    assert json.loads((results / "minilm.json").read_text())["minilm"] == "stand-in"
    for name in ("feddb_fp32", "feddb_bf16", "feddb_bf16_varying", "mfcl_fp32", "fedbm_bf16", "fedbm_fp32"):
        (setting,) = json.loads((results / f"paper_scale_{name}.json").read_text())["settings"].values()
        assert setting["scale"] == "small" and setting["seconds_per_round"] > 0 and setting["tflop_per_round"] > 0
        assert (setting["plain_loop_ratio"] is None) is (name == "mfcl_fp32")  # issue 43's yardstick, where a client trains
    assert json.loads((results / "paper_scale_feddb_bf16_varying.json").read_text())["settings"]["feddb"]["shapes"] == "varying"
    assert "pieces" in json.loads((results / "paper_scale_feddb_bf16.json").read_text())["settings"]["feddb"]["profile"]
    baselines = json.loads((results / "paper_scale_semi_baselines.json").read_text())["settings"]
    assert set(baselines) == {"fixmatch", "fedmatch", "semifl", "fedrgd"} and all(b["plain_loop_ratio"] for b in baselines.values())
    variants = json.loads((results / "paper_scale_feddb_variants.json").read_text())["settings"]["feddb"]
    assert variants["concurrent"]["clients"] == 2 and "skipped" in variants["compile"]
    compared = json.loads((results / "e2e_compare.json").read_text())
    assert compared["devices"] == ["cpu", "cpu"] and compared["same_clients_every_round"] and compared["same_final_state"]
    assert len(compared["rounds"]) == 3
