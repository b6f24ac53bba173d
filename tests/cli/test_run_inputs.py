"""Damaged files and environmental faults through ``fedprior run`` and ``resume`` (issue 7, item 9).

Every row builds one bad input (a damaged checkpoint or config, an unusable --run-dir or
--plot, damaged dataset files, a full disk) and runs the CLI on it in this process: the
command must exit non-zero with exactly one ``error:`` line that names the file or field,
and no traceback (the CLI's own SystemExit, not an exception escaping it). A cache that cannot
be written is one ``warning:`` line and the run goes on: tests/encoders/test_cache.py.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support.cli import TINY, error_line
from tests.support.cli import invoke as cli
from tests.support.damage import _cut, _flip_byte, _write, fashion_root, no_space


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """Two finished 2-round runs of different experiments (copied, then damaged, by each row)."""
    root = tmp_path_factory.mktemp("bases")
    for preset in ("fedavg-cnn", "fedprox-cnn"):
        result = cli("run", preset, *TINY, "--run-dir", root / preset, cache=root / "cache")
        assert result.exit_code == 0, result.stderr
    return root


def copy_run(bases: Path, tmp: Path, preset: str = "fedavg-cnn") -> Path:
    target = tmp / "run"
    shutil.copytree(bases / preset, target)
    return target


def rewrite_gz(path: Path, change: Callable[[bytes], bytes]) -> None:
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(change(raw)))


def flip_tensor_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) - 400, len(data), 97):  # the tensor data sits at the end of a safetensors file
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


def strip_metadata(path: Path) -> None:
    from safetensors.torch import load_file, save_file

    save_file(load_file(str(path)), str(path))


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Path, Path], list]  # (tmp_path, bases) -> CLI arguments, after building the bad input
    expect: str  # in the one error line ({tmp}: the test's folder)


def resume_after(damage: Callable[[Path], None], preset: str = "fedavg-cnn"):
    def make(tmp: Path, bases: Path) -> list:
        run = copy_run(bases, tmp, preset)
        damage(run)
        return ["resume", run]

    return make


def run_fashion(damage: Callable[[Path], None]):
    return lambda tmp, bases: [
        "run",
        "fedavg-cnn",
        "--set",
        f"data.root={fashion_root(tmp, damage)}",
        "--set",
        "federation.num_clients=2",
        "--set",
        "federation.rounds=0",
        "--run-dir",
        tmp / "r",
    ]


def text_model_run(preset: str, field: str, make: Callable[[Path], str], *extra: str):
    """``fedprior run PRESET`` on digits with ``field`` set to what ``make(tmp)`` builds (the error comes before training)."""
    return lambda tmp, bases: [
        "run",
        preset,
        *("--set", "data.dataset=digits", "--set", "federation.num_clients=4", "--set", "federation.rounds=1"),
        *[a for setting in extra for a in ("--set", setting)],
        "--set",
        f"{field}={make(tmp)}",
        "--run-dir",
        tmp / "r",
    ]


def folder_with(tmp: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = tmp / name
    folder.mkdir()
    for file, data in files.items():
        (folder / file).write_bytes(data)
    return folder


NOT_A_MODEL = {"readme.txt": b"not a model"}
BAD_MODULES = {"config.json": b'{"model_type": "bert"}', "modules.json": b"{bad"}


def fedbm_text_model(make: Callable[[Path], str]):
    return text_model_run("fedbm", "algorithm.text_model", make, "data.train_subset=0")


def validation_resume(fraction: float):
    """A run folder as the old code left it: config.toml of a run whose validation split is empty, no checkpoint."""

    def make(tmp: Path, bases: Path) -> list:
        from fedprior.experiments.config import load_config
        from fedprior.experiments.run_config import write_config
        from fedprior.results.run_dir import RunDir

        overrides = [a for a in TINY if a != "--set"] + ["run.model_selection=validation", f"data.validation_fraction={fraction}"]
        write_config(RunDir(tmp / "old"), *load_config("fedavg-cnn", overrides))
        return ["resume", tmp / "old"]

    return make


VALIDATION_EMPTY = "data.validation_fraction: 0.001 of the 1438 training images holds out 0 images; the validation split"


CASES = [
    # a text model that is no model, or a damaged one (algorithm.text_model: FedBM; encoder.text_model: the locked-text stand-in)
    Case(
        "text-model-folder-without-a-model",
        fedbm_text_model(lambda tmp: folder_with(tmp, "notmodel", NOT_A_MODEL)),
        "algorithm.text_model: {tmp}/notmodel is a folder but holds no sentence-transformers model (no modules.json); give 'minilm',",
    ),
    Case(
        "text-model-hf-clip-empty-folder",
        fedbm_text_model(lambda tmp: f"hf-clip:{folder_with(tmp, 'emptydir', {})}"),
        "algorithm.text_model: hf-clip folder {tmp}/emptydir has no config.json",
    ),
    Case(
        "text-model-damaged-modules-json",
        fedbm_text_model(lambda tmp: folder_with(tmp, "fakest", BAD_MODULES)),
        "algorithm.text_model: cannot load a text model from {tmp}/fakest: modules.json is damaged (not valid JSON",
    ),
    Case(
        "stand-in-text-model-folder-without-a-model",
        text_model_run("fst-cbdg", "encoder.text_model", lambda tmp: folder_with(tmp, "notmodel", NOT_A_MODEL), "encoder.pretrain_images=300"),
        "encoder.text_model: {tmp}/notmodel is a folder but holds no sentence-transformers model (no modules.json); give 'minilm' or",
    ),
    # a validation split that would be empty (run.model_selection = 'validation'), refused before any round, also on resume
    Case(
        "validation-split-empty",
        lambda tmp, b: [
            "run",
            "fedavg-cnn",
            *TINY,
            "--set",
            "run.model_selection=validation",
            "--set",
            "data.validation_fraction=0.001",
            "--run-dir",
            tmp / "r",
        ],
        VALIDATION_EMPTY,
    ),
    Case("validation-split-empty-resume", validation_resume(0.001), VALIDATION_EMPTY),
    # damaged checkpoints (resume)
    Case(
        "checkpoint-truncated",
        resume_after(lambda r: (r / "checkpoint.safetensors").write_bytes((r / "checkpoint.safetensors").read_bytes()[:3000])),
        "checkpoint.safetensors is unreadable",
    ),
    Case("checkpoint-empty", resume_after(lambda r: (r / "checkpoint.safetensors").write_bytes(b"")), "checkpoint.safetensors is unreadable"),
    Case(
        "checkpoint-random",
        resume_after(lambda r: (r / "checkpoint.safetensors").write_bytes(np.random.default_rng(0).bytes(5000))),
        "checkpoint.safetensors is unreadable",
    ),
    Case("checkpoint-no-metadata", resume_after(lambda r: strip_metadata(r / "checkpoint.safetensors")), "checkpoint.safetensors lacks its metadata"),
    Case(
        "checkpoint-flipped-bytes",
        resume_after(lambda r: flip_tensor_bytes(r / "checkpoint.safetensors")),
        "checkpoint.safetensors is damaged: checksum mismatch",
    ),
    Case(
        "checkpoint-of-another-experiment",
        resume_after(lambda r: shutil.copy(r.parent / "other.safetensors", r / "checkpoint.safetensors")),
        "algorithm.name ('fedprox' in the checkpoint, 'fedavg' now)",
    ),
    # damaged run config (resume)
    Case("config-truncated", resume_after(lambda r: (r / "config.toml").write_bytes((r / "config.toml").read_bytes()[:60])), "config.toml: not valid TOML"),
    Case(
        "config-not-utf8",
        resume_after(lambda r: (r / "config.toml").write_bytes((r / "config.toml").read_bytes() + b"\xff\xfe")),
        "config.toml: not UTF-8 text (byte 0xff",
    ),
    # run: config, --run-dir, --plot
    Case(
        "run-config-not-utf8",
        lambda tmp, b: ["run", _write(tmp / "bad.toml", b'description = "\xff\xfe"\n'), "--run-dir", tmp / "r"],
        "bad.toml: not UTF-8 text (byte 0xff at position 15)",
    ),
    Case(
        "run-dir-is-a-file",
        lambda tmp, b: ["run", "fedavg-cnn", *TINY, "--run-dir", _write(tmp / "afile", b"x")],
        "--run-dir: {tmp}/afile is a file, not a folder",
    ),
    Case(
        "run-dir-cannot-be-created",
        lambda tmp, b: ["run", "fedavg-cnn", *TINY, "--run-dir", "/proc/fedprior-test/run"],
        "--run-dir: cannot create /proc/fedprior-test/run",
    ),
    Case("plot-to-a-folder", lambda tmp, b: ["partition", "--dataset", "digits", "--clients", "4", "--plot", tmp], "--plot: {tmp} is a folder"),
    Case(
        "plot-unwritable",
        lambda tmp, b: ["partition", "--dataset", "digits", "--clients", "4", "--plot", "/proc/fedprior.png"],
        "--plot: cannot write /proc/fedprior.png",
    ),
    # damaged dataset files (data.root)
    Case("gzip-truncated", run_fashion(lambda f: _cut(f / "train-images-idx3-ubyte.gz", 300)), "train-images-idx3-ubyte.gz is damaged (EOFError"),
    Case(
        "gzip-not-gzip",
        run_fashion(lambda f: (f / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x0ek" + bytes(100))),
        "t10k-labels-idx1-ubyte.gz is damaged (BadGzipFile",
    ),
    Case(
        "gzip-bad-crc",
        run_fashion(lambda f: _flip_byte(f / "t10k-labels-idx1-ubyte.gz", -6)),
        "t10k-labels-idx1-ubyte.gz is damaged (BadGzipFile: CRC check failed",
    ),
    Case(
        "label-count-mismatch",
        run_fashion(lambda f: rewrite_gz(f / "train-labels-idx1-ubyte.gz", lambda raw: raw[:4] + (10).to_bytes(4, "big") + raw[8:18])),
        "train has 20 images but labels of shape (10,)",
    ),
    Case(
        "labels-out-of-range",
        run_fashion(lambda f: rewrite_gz(f / "train-labels-idx1-ubyte.gz", lambda raw: raw[:8] + bytes([200]) + raw[9:])),
        "train labels fall outside 0..9 (found 0..200)",
    ),
    Case(
        "idx-header-huge",
        run_fashion(
            lambda f: rewrite_gz(f / "t10k-images-idx3-ubyte.gz", lambda raw: raw[:4] + (2**32 - 1).to_bytes(4, "big") + (2**31).to_bytes(4, "big") + raw[12:])
        ),
        f"t10k-images-idx3-ubyte.gz is truncated: expected {(2**32 - 1) * 2**31 * 28} values",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_naming_the_file_or_field(tmp_path, bases, case):
    shutil.copy(bases / "fedprox-cnn" / "checkpoint.safetensors", tmp_path / "other.safetensors")
    result = cli(*case.make(tmp_path, bases))
    line = error_line(result)
    assert result.exit_code == 2, line  # a user's problem, not a crash
    assert case.expect.format(tmp=tmp_path) in line, line
    assert not (tmp_path / "r").exists()  # a new run refused before it wrote its folder


def test_debug_shows_the_traceback(tmp_path, bases):
    run = copy_run(bases, tmp_path)
    (run / "checkpoint.safetensors").write_bytes(b"")
    result = cli("--debug", "resume", run)
    assert result.exit_code != 0
    from fedprior.runtime.checkpoint import CheckpointError

    assert isinstance(result.exception, CheckpointError)  # raised through, so Python prints the traceback


# --------------------------------------------------------------------------- a full disk


def test_disk_full_during_run_and_resume(tmp_path, monkeypatch):
    import fedprior.runtime.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "save_tensors", no_space(checkpoint.save_tensors, after=2))
    run = tmp_path / "run"
    line = error_line(cli("run", "fedavg-cnn", *TINY, "--run-dir", run))
    assert f"cannot write {run / 'checkpoint.safetensors'} (No space left on device)" in line
    assert f"then `fedprior resume {run}` continues the run" in line
    line = error_line(cli("resume", run))  # the disk is still full
    assert "(No space left on device)" in line and "fedprior resume" in line
    monkeypatch.undo()
    assert cli("resume", run).exit_code == 0  # space freed: the run goes on from its last checkpoint


# --------------------------------------------------------------------------- optional caches and huge batches
