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
