"""Contract, command line: the flags each side's ``--help`` lists (and the catalog the stand-in and the
preflight check flags with), and what a bad command line gets. No server starts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
from contract_lib import catalog_options, check, help_options, launch_command

BAD = {  # the command lines, and what each shows
    "unknown_flag": ["--model-path", "/nonexistent", "--no-such-flag"],
    "invalid_choice": ["--model-path", "/nonexistent", "--attention-backend", "nope"],
    "invalid_int": ["--model-path", "/nonexistent", "--max-running-requests", "abc"],
    "missing_model_path": ["--port", "30001"],
}


@pytest.fixture(scope="module", params=[pytest.param("real", marks=pytest.mark.real), "stand-in"])
def side(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@cache
def help_text(side: str, state_dir: Path) -> str:
    code, out, err = launch_command(side, ["--help"], state_dir)
    assert code == 0, err[-2000:]
    return out


def test_flags_in_help(side: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    check(side, "flags.help", help_options(help_text(side, tmp_path_factory.getbasetemp())))


def test_flags_in_help_vs_the_catalog(side: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The real ``--help`` is recorded; the stand-in side is the catalog itself."""
    if side == "real":
        observed = help_options(help_text(side, tmp_path_factory.getbasetemp()))
    else:
        observed = catalog_options()
    check(side, "flags.catalog", observed)


def test_bad_flags(side: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    state = tmp_path_factory.getbasetemp()
    with ThreadPoolExecutor(max_workers=len(BAD)) as pool:
        runs = dict(
            zip(BAD, pool.map(lambda argv: launch_command(side, argv, state), BAD.values()), strict=True)
        )
    observed = {}
    for name, (code, _out, err) in runs.items():
        lines = [ln for ln in err.splitlines() if ln.strip()]
        usage_at = next(i for i, ln in enumerate(lines) if ln.startswith("usage: "))
        error = next(ln for ln in reversed(lines) if ": error: " in ln)
        observed[name] = {
            "exit": code,
            "usage": lines[usage_at],
            "error": error,
            "nothing_else_after": lines[-1] == error,
        }
    check(side, "flags.errors", observed)
