"""Contract, command line: the flags each side's ``--help`` lists (and the catalog the stand-in and the
preflight check flags with), and what a bad command line gets. No server starts."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
from contract_lib import MODEL, ROOT, STAND_IN_MODEL, catalog_options, check, help_options, launch_command

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


def spec_bad(model: str) -> dict[str, list[str]]:
    """Bad speculative command lines: argparse's refusal, then ServerArgs' checks (0.5.23's
    arg_groups/speculative_hook.py), which run before any model loads."""
    base = ["--model-path", model, "--device", "cpu", "--speculative-algorithm"]
    return {
        "unknown_algorithm": [*base, "NOPE"],
        "num_draft_tokens_not_int": [*base, "NGRAM", "--speculative-num-draft-tokens", "four"],
        "window_size_zero": [*base, "NGRAM", "--speculative-draft-window-size", "0"],
        "sink_without_window": [*base, "NGRAM", "--speculative-draft-sink-size", "4"],
    }


def test_bad_speculative_flags(side: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Exit code and the one line that says why: argparse's ``error:`` line, or the ValueError's."""
    state = tmp_path_factory.getbasetemp()
    model = str(ROOT / "models" / MODEL) if side == "real" else str(STAND_IN_MODEL)
    bad = spec_bad(model)
    with ThreadPoolExecutor(max_workers=2) as pool:  # each real one imports torch first
        runs = dict(
            zip(bad, pool.map(lambda argv: launch_command(side, argv, state), bad.values()), strict=True)
        )
    observed = {}
    for name, (code, _out, err) in runs.items():
        lines = [ln for ln in err.splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if ": error: " in ln or re.match(r"^\w+Error: ", ln)), None)
        observed[name] = {"exit": code, "why": why.replace(model, "MODEL") if why else lines[-1:]}
    check(side, "flags.spec_errors", observed)
