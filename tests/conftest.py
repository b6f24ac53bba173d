"""Shared test fixtures: an isolated cache, small tasks and data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from fedprior.algorithms.base import Task

pytest.register_assert_rewrite("tests.support")  # their asserts explain a failure as a test's do


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own fedprior cache folder; the user's cache is never touched."""
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("shared-cache")


@pytest.fixture
def shared_cache(session_cache, monkeypatch):
    """A cache shared by the tests that ask for it, so the locked-text stand-in is trained once per session."""
    monkeypatch.setenv("FEDPRIOR_CACHE", str(session_cache))
    return session_cache


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module of small convolutions: as fast, and far faster when other jobs share the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def image_task() -> Task:
    return Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory):
    """An MLflow sqlite store whose tables are made once per session (MLflow's migrations take seconds); tests copy it."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "empty.db"
    MlflowClient(f"sqlite:///{path}").search_experiments(max_results=1)
    return path


@pytest.fixture
def mlflow_db(empty_mlflow_store, tmp_path):
    """``tmp_path / "mlflow.db"``: a fresh copy of the empty MLflow store."""

    return Path(shutil.copy(empty_mlflow_store, tmp_path / "mlflow.db"))


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    from tests.support.tiny_clip import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "clip")


@pytest.fixture(scope="session")
def whole(tmp_path_factory):
    """A finished 2-round FedAvg run: 4 clients, 2 sampled per round (read, never changed, by the tests that ask for it)."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start
    from tests.support.cli import UNITS_RUN

    folder = tmp_path_factory.mktemp("units") / "whole"
    name, config = load_config("fedavg-cnn", UNITS_RUN)
    summary = start(name, config, folder)
    return folder, summary


@pytest.fixture(scope="session")
def finished_runs(tmp_path_factory):
    """A finished 2-round run, and the same experiment run for 3 rounds (the reference for resumes); tests copy them."""
    from tests.support.cli import TINY, invoke
    from tests.support.run_folders import REFERENCE_ROUNDS, history

    root = tmp_path_factory.mktemp("runs")
    cache = root / "cache"
    two = invoke("run", "fedavg-cnn", *TINY, "--run-dir", root / "two", "--json", cache=cache)
    three = invoke("run", "fedavg-cnn", *TINY, "--set", f"federation.rounds={REFERENCE_ROUNDS}", "--run-dir", root / "three", "--json", cache=cache)
    return {"root": root, "two": history(two), "three": history(three)}


@pytest.fixture
def registry():
    """Algorithms and entry points a test registers or loads are forgotten after it (the registry-wide tests see the shipped ones only)."""
    from fedprior.algorithms import registry as algorithm_registry
    from fedprior.algorithms.registry import ALGORITHMS, ENTRY_POINT_ERRORS, REGISTERED_HERE

    shipped, here, errors = dict(ALGORITHMS), set(REGISTERED_HERE), dict(ENTRY_POINT_ERRORS)
    loaded = dict(algorithm_registry._ENTRY_POINTS)
    yield ALGORITHMS
    ALGORITHMS.clear()
    ALGORITHMS.update(shipped)
    REGISTERED_HERE.clear()
    REGISTERED_HERE.update(here)
    ENTRY_POINT_ERRORS.clear()
    ENTRY_POINT_ERRORS.update(errors)
    algorithm_registry._ENTRY_POINTS.update(loaded)
