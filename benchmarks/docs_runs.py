"""Run the commands a docs page shows beside a table of numbers, and keep what they print as JSON (issue 52 item 5).

    python benchmarks/docs_runs.py NAME [--out FILE]

NAME is one of :data:`SETS`: each is the list of commands (``fedprior ...`` with ``--json``, or ``python
benchmarks/...``) one docs table quotes, exactly as the page shows them (training runs with ``--set run.threads=1
--set run.workers=1``). Each command runs in its own process, one at a time, in an empty folder (its run folders are
not kept); its JSON output (the last line of stdout that parses) is kept with the command, its exit code, its wall
seconds and, where it failed, the last line of its stderr. The file (by default
``benchmarks/results/docs_runs/NAME.json``) also records the date, the commit and the machine.
``tests/test_docs_numbers.py`` checks each table's numbers against it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shared import command_line, load, machine, shell  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = "--set run.threads=1 --set run.workers=1"
PARTITION = "fedprior partition --dataset fashion-mnist --clients 100 --seed 0 --json"
DIGITS = (
    "--set data.dataset=digits --set federation.num_clients=10 --set federation.fraction=0.5 --set federation.rounds=10 "
    "--set federation.local_epochs=2 --set algorithm.lr=0.1 --set run.workers=1 --set run.threads=1"
)
DEADLINE = "--set system.speed=lognormal --set system.deadline=5"
SERVER = f"--set federation.rounds=8 {RUN} --json"  # the 5-round column is round 5 of these runs (no lr schedule: the same model)
SHORT = f"--set federation.rounds=5 {RUN} --json"

SETS: dict[str, tuple[str, list[str]]] = {
    "partition-schemes": (
        "docs/huggingface.md: fedprior's and flwr-datasets' schemes on Fashion-MNIST, 100 clients, seed 0 (deterministic; no training)",
        [
            f"{PARTITION} --scheme iid",
            f"{PARTITION} --scheme flwr:IidPartitioner",
            f"{PARTITION} --scheme dirichlet --alpha 0.5",
            f"{PARTITION} --scheme flwr:DirichletPartitioner --alpha 0.5",
            f"{PARTITION} --scheme dirichlet --alpha 0.5 --balance",
            f"{PARTITION} --scheme flwr:DirichletPartitioner --alpha 0.5 --flwr-kwargs '{{self_balancing = true}}'",
            f"{PARTITION} --scheme shard --shards 2",
            f"{PARTITION} --scheme flwr:ShardPartitioner --shards 2",
        ],
    ),
    "system-illustration": (
        "docs/system-heterogeneity.md: FedAvg's small CNN on digits under simulated devices, one seed (an illustration of the fields)",
        [
            f"fedprior run fedavg-cnn {DIGITS} --set system.speed=lognormal --run-dir none --json",
            f"fedprior run fedavg-cnn {DIGITS} {DEADLINE} --run-dir drop --json",
            f"fedprior run fedavg-cnn {DIGITS} {DEADLINE} --set system.partial_work=true --run-dir partial --json",
            f"fedprior run fedavg-cnn {DIGITS} {DEADLINE} --set system.over_selection=0.3 --run-dir over --json",
            f"fedprior run fedavg-cnn {DIGITS} --set system.speed=constant --run-dir constant --json",
        ],
    ),
    "dp-sample": (
        "docs/privacy-robustness.md: record-level DP (DP-SGD on each client) against FedAvg, fedavg-cnn for 3 rounds, seed 0",
        [
            f"fedprior run fedavg-cnn --set federation.rounds=3 {RUN} --json",
            f"fedprior run fedavg-cnn --set privacy.dp=sample --set federation.rounds=3 {RUN} --json",
            f"fedprior run fedavg-cnn --set privacy.dp=sample --set algorithm.lr=0.2 --set federation.rounds=3 {RUN} --json",
        ],
    ),
    "server-optimizers": (
        "docs/server-optimizers.md: the server optimizers' presets and variants, seed 0, a few rounds",
        [
            f"fedprior run fedavg-cnn {SERVER}",
            f"fedprior run fedavgm-cnn {SERVER}",
            f"fedprior run fedavgm-cnn --set algorithm.server_lr=0.3 {SERVER}",
            f"fedprior run fedadagrad-cnn {SERVER}",
            f"fedprior run fedadagrad-cnn --set algorithm.server_lr=0.1 {SHORT}",
            f"fedprior run fedadam-cnn {SERVER}",
            f"fedprior run fedadam-cnn --set algorithm.server_lr=0.1 {SHORT}",
            f"fedprior run fedadam-cnn --set algorithm.server_lr=0.003 {SERVER}",
            f"fedprior run fedyogi-cnn {SERVER}",
            f"fedprior run fedprox-cnn --set algorithm.server_optimizer=adam --set algorithm.server_lr=0.01 {SHORT}",
            f"fedprior run scaffold-cnn --set algorithm.server_optimizer=avgm --set algorithm.server_momentum=0.9 --set federation.rounds=3 {RUN} --json",
        ],
    ),
    "secagg-cost": (
        "docs/privacy-robustness.md: plain rounds against SecAgg+ rounds on the loopback Grid, FedAvg's CNN on 4 digits clients, 3 rounds",
        ["python benchmarks/secagg_cost.py"],
    ),
    "synthetic-setup": (
        "docs/synthetic.md: the set-up of a fedavg-synthetic run at N clients, resident memory and seconds",
        ["python benchmarks/synthetic_setup.py 1000 --json", "python benchmarks/synthetic_setup.py 1000000 --json"],
    ),
}


def argv(command: str) -> list[str]:
    """The command as this interpreter runs it: ``fedprior`` is ``python -m fedprior``, ``python`` this Python."""
    words = shlex.split(command)
    if words[0] == "fedprior":
        return [sys.executable, "-m", "fedprior", *words[1:]]
    assert words[0] == "python", command
    return [sys.executable, str(ROOT / words[1]), *words[2:]]


def last_json(text: str) -> object:
    """The last line of ``text`` that is a JSON object (None if none is)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def run(command: str, folder: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    started, load_at_start = time.perf_counter(), load()
    done = subprocess.run(argv(command), cwd=folder, env=env, capture_output=True, text=True)
    out: dict = {"command": command, "exit_code": done.returncode, "wall_seconds": round(time.perf_counter() - started, 1), "load_at_start": load_at_start}
    if done.returncode:
        out["error"] = (done.stderr.strip().splitlines() or [""])[-1]
    out["output"] = last_json(done.stdout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(SETS))
    parser.add_argument("--out", type=Path, help="the JSON file (default: benchmarks/results/docs_runs/NAME.json)")
    args = parser.parse_args()
    what, commands = SETS[args.name]
    record = {
        "what": what,
        "command": command_line(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": shell(f"git -C {ROOT} rev-parse HEAD"),
        "uncommitted_changes": bool(shell(f"git -C {ROOT} status --porcelain --untracked-files=no -- src benchmarks")),  # the code that ran
        "machine": machine(),
        "note": "one command at a time beside other jobs on a shared machine (its load is recorded): wall seconds are rough",
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        for command in commands:
            record["runs"].append(run(command, Path(folder)))
            print(f"{record['runs'][-1]['exit_code']} {record['runs'][-1]['wall_seconds']} s: {command}", file=sys.stderr)
    record["load_at_end"] = load()
    out = args.out or ROOT / "benchmarks" / "results" / "docs_runs" / f"{args.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
