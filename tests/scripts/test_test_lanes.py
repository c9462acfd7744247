"""scripts/test-lanes.sh: the sim host lanes name their test files one by one, so a new sim host test runs
in `make test` only once a lane names it. Every test module marked ``simhost`` is named by exactly one
lane, and every file a lane names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LANES = REPO / "scripts" / "test-lanes.sh"
SELECTION = re.compile(r"^\s*\[(?P<lane>\w+)\]='(?P<sel>[^']*)'", re.MULTILINE)
MARKED = re.compile(r"pytest\.mark\.simhost\b|pytestmark\s*=.*\bsimhost\b")


def lane_files() -> dict[str, list[str]]:
    """lane -> the test files its pytest selection names."""
    return {
        m["lane"]: [w for w in m["sel"].split() if w.endswith(".py")]
        for m in SELECTION.finditer(LANES.read_text())
    }


def simhost_modules() -> list[str]:
    return sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "tests").rglob("test_*.py")
        if MARKED.search(p.read_text(encoding="utf-8"))
    )


def test_every_simhost_module_runs_in_one_lane() -> None:
    named = [f for files in lane_files().values() for f in files]
    modules = simhost_modules()
    assert modules, "no module marked simhost found: the marker pattern is stale"
    missing = [m for m in modules if m not in named]
    twice = sorted({f for f in named if named.count(f) > 1})
    assert not missing, f"sim host tests no lane of scripts/test-lanes.sh runs: {missing}"
    assert not twice, f"sim host tests two lanes run: {twice}"


def test_every_file_a_lane_names_exists() -> None:
    named = [f for files in lane_files().values() for f in files]
    assert named and all((REPO / f).is_file() for f in named), [f for f in named if not (REPO / f).is_file()]
