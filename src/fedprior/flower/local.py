"""``run.runtime = "flower-local"``: a real Flower federation of processes on this machine.

What ``fedprior flower local --nodes N PRESET`` does (docs/flower.md gives the same
steps by hand, for one machine or several):

1. exports N node folders (``<run dir>/flower/nodes/node-k``: the task and the
   partitions of the clients c with c mod N = k; nothing else);
2. with ``tls``, makes a throwaway CA and a certificate for localhost
   (:mod:`fedprior.flower.tls`); otherwise everything runs ``--insecure``;
3. starts ``flower-superlink`` (its Fleet, Control and Runtime APIs on one loopback
   port) and N ``flower-supernode`` processes, node k started with
   ``--node-config 'data-dir="<its folder>"'``, so it reads its own files only;
4. submits the run with ``flwr run`` (an app folder whose pyproject names
   ``fedprior.experiments.flower_app:app`` / ``fedprior.flower.client_app:app``) in ``serve`` mode: the
   ServerApp trains the experiment of the run directory and checkpoints each round;
5. follows the checkpoint to report each round, and when the ServerApp says it is
   done, stops every process it started (their whole process trees).

Telemetry and update checks are off (``FLWR_TELEMETRY_ENABLED=0``,
``FLWR_DISABLE_UPDATE_CHECK=1``) and so is runtime dependency installation
(``--disable-runtime-dependency-installation`` on the SuperLink; SuperNodes install
nothing unless asked). Each process gets its own ``FLWR_HOME`` under the run
directory, and its log goes to ``<run dir>/flower/logs``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import tomli_w

from fedprior.errors import FedpriorError
from fedprior.runtime.checkpoint import RunState, load_checkpoint
from fedprior.runtime.simulation import SimulationResult

APP_NAME = "fedprior-flower"
CONNECTION = "fedprior-local"


# -- processes ---------------------------------------------------------------------------------

def _children() -> dict[int, list[int]]:
    """ppid -> child pids, from /proc (Flower starts some helpers in sessions of their own)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, parents first."""
    children, tree, queue = _children(), [], [pid]
    while queue:
        current = queue.pop(0)
        tree.append(current)
        queue.extend(children.get(current, []))
    return tree


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def stop_process(process: subprocess.Popen, grace: float = 5.0, hard: bool = False) -> None:
    """Stop ``process`` and every process it started: SIGTERM (SIGKILL if ``hard``), then SIGKILL after ``grace``."""
    if process.poll() is not None and not any(_alive(p) for p in process_tree(process.pid)[1:]):
        return
    tree = process_tree(process.pid)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()
        tree = list(dict.fromkeys(tree + [p for q in tree if _alive(q) for p in process_tree(q)]))
        if not any(_alive(p) for p in tree):
            break
        time.sleep(0.1)
    for pid in tree:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, process: subprocess.Popen, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise FedpriorError(f"{what} exited with code {process.returncode}; see {log}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise FedpriorError(f"{what} did not open port {port} within {timeout:.0f} s; see {log}")


def flower_executable(name: str) -> str:
    """A Flower command from this Python's environment (a virtualenv's bin need not be on PATH)."""
    here = Path(sys.executable).parent
    found = shutil.which(name, path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))
    if found is None:
        raise FedpriorError(f"{name} not found: install fedprior[flower] (flwr[simulation]==1.41.0)")
    return found


def app_pyproject() -> dict[str, Any]:
    """The Flower app that ``flwr run`` submits: fedprior's ServerApp and ClientApp, from the installed package."""
    from fedprior.flower.server_app import RUN_CONFIG_DEFAULTS

    return {
        "build-system": {"requires": ["setuptools>=68"], "build-backend": "setuptools.build_meta"},
        "project": {"name": APP_NAME, "version": "0.1.0", "description": "fedprior on Flower (generated by fedprior flower local)"},
        "tool": {"flwr": {"app": {
            "publisher": "fedprior",
            "components": {"serverapp": "fedprior.experiments.flower_app:app", "clientapp": "fedprior.flower.client_app:app"},
            "config": dict(RUN_CONFIG_DEFAULTS),
        }}},
    }


@dataclass
class Supernode:
    index: int
    data_dir: Path
    port: int
    log: Path
    process: subprocess.Popen | None = None


@dataclass
class LocalFederation:
    """A SuperLink and SuperNodes on loopback, started together and stopped together (a context manager)."""

    work: Path
    node_dirs: list[Path]
    tls: bool = False
    superlink_port: int = 0
    superlink: subprocess.Popen | None = None
    nodes: list[Supernode] = field(default_factory=list)
    certificates: Any = None

    def __post_init__(self) -> None:
        self.work = Path(self.work).resolve()  # children run with cwd=work: every path they get must be absolute
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    # environment ---------------------------------------------------------------------------
    def env(self, home: str) -> dict[str, str]:
        from fedprior.flower.simulation import QUIET_ENV

        flwr_home = self.work / "home" / home
        flwr_home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(QUIET_ENV)
        env["FLWR_HOME"] = str(flwr_home)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    def _spawn(self, command: list[str], home: str, log: Path) -> subprocess.Popen:
        with open(log, "ab") as handle:
            return subprocess.Popen(command, env=self.env(home), stdout=handle, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.work, start_new_session=True)

    # start / stop --------------------------------------------------------------------------
    def start(self, startup_timeout: float = 90.0) -> "LocalFederation":
        if self.tls:
            from fedprior.flower.tls import generate_certificates

            self.certificates = generate_certificates(self.work / "certificates")
        self.superlink_port = self.superlink_port or free_port()
        command = [flower_executable("flower-superlink"), "--host", "127.0.0.1", "--port", str(self.superlink_port),
                   "--disable-runtime-dependency-installation"]
        if self.tls:
            c = self.certificates
            command += ["--ssl-certfile", str(c.cert), "--ssl-keyfile", str(c.key), "--ssl-ca-certfile", str(c.ca)]
        else:
            command += ["--insecure"]
        log = self.logs / "superlink.log"
        self.superlink = self._spawn(command, "superlink", log)
        wait_for_port(self.superlink_port, startup_timeout, self.superlink, "flower-superlink", log)
        for index, data_dir in enumerate(self.node_dirs):
            self.nodes.append(Supernode(index, Path(data_dir).resolve(), free_port(), self.logs / f"supernode-{index}.log"))
            self.start_node(index)
        return self

    def start_node(self, index: int) -> None:
        node = self.nodes[index]
        command = [flower_executable("flower-supernode"), "--superlink", f"127.0.0.1:{self.superlink_port}",
                   "--port", str(node.port), "--node-config", f"data-dir={json.dumps(str(node.data_dir))}"]
        command += ["--root-certificates", str(self.certificates.ca)] if self.tls else ["--insecure"]
        node.process = self._spawn(command, f"node-{index}", node.log)

    def kill_node(self, index: int) -> None:
        """SIGKILL a SuperNode and its ClientApp processes at once (a crashed machine)."""
        node = self.nodes[index]
        if node.process is not None:
            stop_process(node.process, grace=2.0, hard=True)

    def node_tree(self, index: int) -> list[int]:
        node = self.nodes[index]
        return process_tree(node.process.pid) if node.process is not None else []

    def stop(self) -> None:
        """Stop every process started here, SuperNodes first; the SuperLink's helpers with it."""
        for node in self.nodes:
            if node.process is not None:
                stop_process(node.process)
        if self.superlink is not None:
            stop_process(self.superlink)

    def __enter__(self) -> "LocalFederation":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # the flwr CLI --------------------------------------------------------------------------
    def write_app(self) -> Path:
        app = self.work / "app"
        app.mkdir(parents=True, exist_ok=True)
        (app / "pyproject.toml").write_text(tomli_w.dumps(app_pyproject()))
        connection: dict[str, Any] = {"address": f"127.0.0.1:{self.superlink_port}"}
        if self.tls:
            connection["root-certificates"] = str(self.certificates.ca)
        else:
            connection["insecure"] = True
        config = {"superlink": {"default": CONNECTION, CONNECTION: connection}}
        (self.work / "home" / "cli").mkdir(parents=True, exist_ok=True)
        (self.work / "home" / "cli" / "config.toml").write_text(tomli_w.dumps(config))
        return app

    def flwr(self, *args: str, timeout: float = 120.0) -> dict[str, Any]:
        command = [flower_executable("flwr"), *args, "--format", "json"]
        done = subprocess.run(command, env=self.env("cli"), capture_output=True, text=True, timeout=timeout, cwd=self.work)
        text = done.stdout.strip()
        start = text.find("{")
        try:
            return json.loads(text[start:]) if start >= 0 else {"success": False, "error": done.stderr[-2000:]}
        except json.JSONDecodeError:
            return {"success": False, "error": (text + done.stderr)[-2000:]}

    def submit(self, run_config: dict[str, Any], attempts: int = 5) -> str:
        """``flwr run`` the fedprior app with ``run_config`` (written to a TOML file); returns the run id."""
        app = self.write_app()
        path = self.work / "run-config.toml"
        path.write_text(tomli_w.dumps(run_config))
        last: dict[str, Any] = {}
        for _ in range(attempts):
            last = self.flwr("run", str(app), CONNECTION, "--run-config", str(path))
            if last.get("success") and last.get("run-id"):
                return str(last["run-id"])
            time.sleep(2.0)
        raise FedpriorError(f"flwr run failed: {last.get('error', last)}; see {self.logs}")

    def status(self, run_id: str) -> str:
        """The run's status as ``flwr ls`` says it (``running``, ``finished:completed``, ...), or '' if unknown."""
        try:
            answer = self.flwr("ls", CONNECTION, "--run-id", run_id, timeout=60.0)
        except subprocess.TimeoutExpired:
            return ""
        runs = answer.get("runs") or []
        return str(runs[0].get("status", "")) if runs else ""


# -- the runtime -----------------------------------------------------------------------------

def follow(run, start: RunState | None, on_round: Callable[[dict[str, Any]], None] | None, first_stage: str) -> Callable[[], None]:
    """A function that reports the rounds checkpointed since it last looked (the ServerApp writes them)."""
    seen = {"initial": start is not None, "rounds": len(start.progress.history) if start else 0, "stamp": None}

    def look() -> None:
        path = run.checkpoint
        if not path.is_file():
            return
        stamp = path.stat().st_mtime_ns
        if stamp == seen["stamp"]:
            return
        seen["stamp"] = stamp
        try:
            progress = load_checkpoint(path).progress
        except Exception:  # being replaced right now; the next look reads it
            seen["stamp"] = None
            return
        if not seen["initial"] and progress.initial:
            seen["initial"] = True
            if on_round:
                on_round({"stage": first_stage, "round": 0, **progress.initial})
        for record in progress.history[seen["rounds"]:]:
            if on_round:
                on_round(record)
        seen["rounds"] = len(progress.history)

    return look


def run_local_federation(
    experiment,
    run,
    *,
    start: RunState | None,
    on_round: Callable[[dict[str, Any]], None] | None,
    nodes: int | None = None,
    tls: bool = False,
    round_timeout: float = 300.0,
    node_wait: float = 180.0,
    on_started: Callable[[LocalFederation], None] | None = None,
    keep_files: bool = False,
) -> SimulationResult:
    """Run ``experiment`` on a SuperLink and ``nodes`` SuperNodes started here; stop them all at the end.

    ``nodes``: SuperNodes to start (default min(3, number of clients)); ``tls``: certificates
    for localhost instead of ``--insecure``; ``round_timeout``: seconds the server waits for
    a round's replies; ``on_started(federation)`` is called once the processes run (tests use
    it to kill a node). Logs stay in ``<run dir>/flower/logs``; the rest of
    ``<run dir>/flower`` is deleted at the end unless ``keep_files``.
    """
    from fedprior.flower.export import export_nodes
    from fedprior.flower.server_app import SERVER_DONE
    from fedprior.flower.simulation import run_key

    started = time.perf_counter()
    work = run.path / "flower"
    done_file = work / SERVER_DONE
    done_file.unlink(missing_ok=True)
    saved = work / "local.json"  # a resumed run keeps its nodes (client states live in their folders)
    previous = json.loads(saved.read_text()) if saved.is_file() else {}
    if nodes is None:
        nodes = int(previous.get("nodes", min(3, experiment.task.num_clients)))
    work.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"nodes": nodes, "tls": tls}))
    node_dirs = export_nodes(experiment, work / "nodes", nodes)
    federation = LocalFederation(work, node_dirs, tls=tls)
    look = follow(run, start, on_round, experiment.algorithm.stages[0].name)
    restore = None
    if threading.current_thread() is threading.main_thread():
        restore = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        federation.start()
        run_id = federation.submit({
            "run-dir": str(run.path.resolve()), "mode": "serve", "min-nodes": nodes, "node-wait": float(node_wait),
            "round-timeout": float(round_timeout), "run-key": run_key(run),
        })
        if on_started:
            on_started(federation)
        last_status = time.monotonic()
        while True:
            look()
            if done_file.is_file():
                outcome = json.loads(done_file.read_text())
                if outcome.get("status") != "finished":
                    raise FedpriorError(f"the ServerApp failed: {outcome.get('error')}; logs in {federation.logs}")
                break
            if federation.superlink.poll() is not None:
                raise FedpriorError(f"flower-superlink exited with code {federation.superlink.returncode}; see {federation.logs}")
            if time.monotonic() - last_status > 15.0:
                last_status = time.monotonic()
                status = federation.status(run_id)
                if status.startswith("finished") and not done_file.is_file():
                    time.sleep(1.0)
                    if not done_file.is_file():
                        raise FedpriorError(f"the Flower run ended ({status}) before the ServerApp finished; logs in {federation.logs}")
            time.sleep(0.25)
        look()
    finally:
        federation.stop()
        if restore is not None:
            signal.signal(signal.SIGTERM, restore)
    final = load_checkpoint(run.checkpoint)
    if not keep_files:
        for leftover in ("nodes", "home", "certificates", "app"):
            shutil.rmtree(work / leftover, ignore_errors=True)
        for leftover in ("run-config.toml", "local.json"):
            (work / leftover).unlink(missing_ok=True)
    return SimulationResult(final.server, {}, final.progress, time.perf_counter() - started)
