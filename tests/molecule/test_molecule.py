"""Run each Molecule scenario (molecule/<name>/) against the sim host image and assert it passes.

`molecule test` runs the scenario's whole sequence (create, converge, idempotence, side effect,
verify, destroy); Molecule prints no closing line CI can read, so pytest's is the verdict.
Needs podman and the sim host image: `make test` builds it and exports SGLBENCH_SIMHOST_IMAGE;
without that variable the image is built here (scripts/simhost-image.sh, cached by content hash).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))
# What every scenario shares; Molecule finds it at the root of a git checkout, passed explicitly so a
# copy of the tree without .git runs the same scenarios.
BASE_CONFIG = REPO / ".config" / "molecule" / "config.yml"

pytestmark = pytest.mark.molecule


def _env() -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    env.pop("ANSIBLE_CONFIG", None)  # molecule writes its own
    # Container names carry a per-checkout suffix: clones tested at the same time never collide.
    env.setdefault("SGLBENCH_MOLECULE_ID", hashlib.sha1(str(REPO).encode()).hexdigest()[:8])
    if not env.get("CONTAINERS_CONF"):
        conf = subprocess.run(
            [str(REPO / "scripts/podman-env.sh")], capture_output=True, text=True, check=True
        )
        env["CONTAINERS_CONF"] = conf.stdout.strip().splitlines()[-1]
    if not env.get("SGLBENCH_SIMHOST_IMAGE"):
        built = subprocess.run(
            [str(REPO / "scripts/simhost-image.sh")], capture_output=True, text=True, env=env, check=False
        )
        assert built.returncode == 0, f"building the sim host image failed:\n{built.stderr[-4000:]}"
        env["SGLBENCH_SIMHOST_IMAGE"] = built.stdout.strip().splitlines()[-1]
    return env


@pytest.fixture(scope="module")
def molecule_env() -> dict[str, str]:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed; run `make test` (it installs the system packages)")
    return _env()


def test_scenarios_exist() -> None:
    assert {"default", "bad_matrix"} <= set(SCENARIOS)
    assert BASE_CONFIG.is_file()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str, molecule_env: dict[str, str]) -> None:
    molecule = str(BIN / "molecule") if (BIN / "molecule").exists() else "molecule"
    started = time.monotonic()
    proc = subprocess.run(
        [molecule, "--base-config", str(BASE_CONFIG), "test", "-s", scenario],
        cwd=REPO,
        env=molecule_env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    elapsed = time.monotonic() - started
    print(f"molecule test -s {scenario}: rc={proc.returncode} in {elapsed:.0f} s")
    assert proc.returncode == 0, (
        f"molecule test -s {scenario} failed (rc={proc.returncode}, {elapsed:.0f} s):\n"
        + proc.stdout[-12000:]
        + proc.stderr[-4000:]
    )
