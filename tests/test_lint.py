"""Static checks over the whole repo: ansible-lint (production profile, offline), yamllint, ruff.

Each tool runs with the configuration at the repo root (.ansible-lint, .yamllint, pyproject.toml) and
the test fails with the tool's own report.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.lint


def tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; run `make venv` (it comes with the dev extra)")
    return found


def run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    env.pop("ANSIBLE_CONFIG", None)  # the repo's ansible.cfg, found from the working directory
    return subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def test_ansible_lint_production_profile() -> None:
    proc = run([tool("ansible-lint"), "--offline", "--nocolor", "--format=pep8"])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout


def test_yamllint_strict() -> None:
    proc = run([tool("yamllint"), "-s", "-f", "parsable", "."])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_ruff() -> None:
    proc = run([tool("ruff"), "check", "python", "plugins", "tests", "benchmarks", "scripts"])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


# Extension-less Python that ruff does not find by itself, with the oldest Python each runs under
# (tests/test_host_python.py says why).
SCRIPTS_WITHOUT_SUFFIX = {
    "roles/sglang_units/files/sglbench-launch": "py39",
    "roles/sglang_units/files/sglbench-wait-ready": "py39",
    "python/sglbench/sim/bin/nvidia-smi": "py310",
}


@pytest.mark.parametrize("path", sorted(SCRIPTS_WITHOUT_SUFFIX))
def test_ruff_scripts_without_suffix(path: str) -> None:
    proc = run([tool("ruff"), "check", "--target-version", SCRIPTS_WITHOUT_SUFFIX[path], path])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
