"""How worker processes start (issue 33 item 9): torch's lazy imports paid once in the parent, not in each worker's
first round; the start said in a line before and after, in run.log and on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support.cli import TINY, fedprior

WHAT_A_FORKED_WORKER_HAS = textwrap.dedent(
    """
    import json, sys
    import torch
    from fedprior.algorithms.base import Runtime, Task
    from fedprior.algorithms.fedavg import fedavg
    from fedprior.runtime.workers import WorkerClients

    algorithm = fedavg(Task(num_classes=2, input_shape=(1, 4, 4), class_names=("a", "b"), num_clients=2), Runtime(1, 4))
    out = sys.argv[1]

    def setup():
        with open(out, "a") as handle:  # in the worker: what it inherited from the parent by fork
            handle.write(json.dumps("torch._dynamo" in sys.modules) + "\\n")
        return algorithm, lambda c: {}

    lines = []
    assert "torch._dynamo" not in sys.modules
    with WorkerClients(algorithm, lambda c: {}, 2, workers=2, setup=setup, start_method="fork", announce=lines.append) as pool:
        pool.prepare()
    print(json.dumps(lines))
    """
)


def test_forked_workers_inherit_torchs_lazy_imports_and_their_start_is_announced(tmp_path):
    seen = tmp_path / "seen.jsonl"
    done = subprocess.run([sys.executable, "-c", WHAT_A_FORKED_WORKER_HAS, str(seen)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in seen.read_text().splitlines()] == [True, True]  # each worker got torch._dynamo from the parent
    before, after = json.loads(done.stdout)
    assert before == "starting 2 worker processes for the clients' updates (run.workers; fork)"
    assert after.startswith("2 worker processes ready after ") and after.endswith(" s")


def test_a_run_says_when_its_workers_start_on_stderr_and_in_run_log(tmp_path):
    run_dir = tmp_path / "run"
    done = fedprior("run", "fedavg-cnn", *TINY, "--set", "run.workers=2", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    for text in (done.stderr, (run_dir / "run.log").read_text()):
        lines = text.splitlines()
        starting = [i for i, line in enumerate(lines) if "starting 2 worker processes" in line]
        ready = [i for i, line in enumerate(lines) if "2 worker processes ready after" in line]
        first_round = next(i for i, line in enumerate(lines) if "round 1/2" in line)
        assert len(starting) == len(ready) == 1 and starting[0] < ready[0] < first_round, text
