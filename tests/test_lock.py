"""requirements.lock: the exact versions the README's commands install and CI tests (uv pip compile)."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCKED_EXTRAS = ("flower", "test")
"""The extras the README's two commands install (``[flower]`` and ``[flower,test]``)."""


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_the_lock_pins_the_cpu_torch_and_no_cuda_package():
    pins = locked()
    assert pins["torch"] == "2.13.0+cpu"
    assert not [name for name in pins if name.startswith(("nvidia-", "triton", "cuda-"))]


def test_the_lock_covers_pyproject_and_satisfies_its_ranges():
    """Every dependency of the package and of the locked extras is pinned, inside pyproject's (loose) range."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    wanted += [Requirement(r) for extra in LOCKED_EXTRAS for r in project["optional-dependencies"][extra]]
    pins = locked()
    missing = [str(r) for r in wanted if canonicalize_name(r.name) not in pins]
    assert not missing, f"refresh requirements.lock (README, 'Refreshing the lock'): {missing} are not in it"
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)]})" for r in wanted if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
    assert not outside, f"refresh requirements.lock: {outside}"


def test_the_readme_and_ci_install_from_the_lock():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)[:2]
    assert all('pip install -c requirements.lock -e ".[flower' in c for c in commands)
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci  # .ci/run runs the README's test command verbatim


def torch_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(Requirement(r) for r in project["dependencies"] if canonicalize_name(Requirement(r).name) == "torch")


def test_pyproject_asks_for_a_torch_floor_that_the_lock_satisfies():
    """A library names the oldest torch it works with, not CI's exact build (issue 32): a GPU image keeps its own."""
    (spec,) = torch_requirement().specifier
    assert spec.operator == ">=", f"pyproject.toml: torch {spec} is not a floor"
    assert torch_requirement().specifier.contains(locked()["torch"], prereleases=True)


def test_the_readme_gpu_line_installs_the_torch_pyproject_asks_for_without_the_lock():
    """README, "On a GPU": a CUDA torch first, with pyproject's own range; then fedprior without the CPU lock, on CUDA."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## On a GPU\n", 1)[1].split("\n## ", 1)[0]
    line = re.search(r"```bash\n(.*?)\n```", section, flags=re.S)[1]
    specs = re.findall(r'pip install "(torch[^"]*)"', line)
    assert len(specs) == 1, f"README 'On a GPU': want one `pip install \"torch...\"`, got {specs}"
    assert Requirement(specs[0]).specifier == torch_requirement().specifier, f"README says {specs[0]}, pyproject.toml {torch_requirement()}"
    assert "requirements.lock" not in line  # the lock pins the CPU build
    assert 'pip install -e ".[flower]"' in line and "run.device=cuda" in line
    floor = next(iter(torch_requirement().specifier)).version
    assert f"torch {floor}" in section and f"torch>={floor}" in section.replace("`", "")  # the prose names the same floor
