"""Published SGLang launch command lines (tests/fixtures/launch_commands.jsonl) through `sglbench plan`.

Each line was copied from SGLang's docs, cookbook, issues, model cards or public scripts (sources in
tests/fixtures/launch_commands.md). Model paths are pointed at fixture configs of the same
architecture; the flags are checked against the release the source states (else any catalogued
release). Goal: at least 95 % accepted, and every rejection names the release and the flag.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sglbench import cli
from sglbench.hostlib import sglang_args

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "launch_commands.jsonl"
MODELS = REPO / "tests" / "fixtures" / "models"
MODEL_FLAGS = ("--model-path", "--model")
DRAFT_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model", "--speculative-draft")


def corpus() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def with_fixtures(entry: dict[str, Any]) -> list[str]:
    """The published flags with the model and draft paths pointed at fixture config directories."""
    argv = list(entry["argv"])
    fixtures = {MODEL_FLAGS: entry.get("model_fixture"), DRAFT_FLAGS: entry.get("draft_fixture")}
    for i, word in enumerate(argv):
        flag, eq, _ = word.partition("=")
        for flags, fixture in fixtures.items():
            if flag in flags and fixture:
                if eq:
                    argv[i] = f"{flag}={MODELS / fixture}"
                elif i + 1 < len(argv):
                    argv[i + 1] = str(MODELS / fixture)
    return argv


def flags_verdict(entry: dict[str, Any]) -> str | None:
    """None when the stated release (or any catalogued one) accepts the flags, else its message."""
    try:
        sglang_args.parse_launch_args_or_raise(entry["argv"], entry.get("sglang_version"))
    except sglang_args.SglangArgsError as exc:
        return str(exc)
    return None


def test_the_corpus_is_real_and_sourced() -> None:
    entries = corpus()
    assert len(entries) >= 40
    assert len({e["id"] for e in entries}) == len(entries)
    for e in entries:
        assert e["source"] and e["command"] and e["argv"], e["id"]
        for key in ("model_fixture", "draft_fixture"):
            if e.get(key):
                assert (MODELS / e[key] / "config.json").is_file(), (e["id"], e[key])


def test_at_least_95_percent_of_published_command_lines_are_accepted() -> None:
    entries = corpus()
    rejected = {e["id"]: why for e in entries if (why := flags_verdict(e)) is not None}
    share = 1 - len(rejected) / len(entries)
    print(f"\nlaunch command flags accepted: {len(entries) - len(rejected)}/{len(entries)} ({share:.1%})")
    for name, why in rejected.items():
        print(f"  rejected {name}: {why}")
    assert share >= 0.95, rejected
    for why in rejected.values():  # a rejection names a release and a flag
        assert "SGLang " in why and "--" in why


@pytest.mark.parametrize("entry", [e for e in corpus() if e.get("model_fixture")], ids=lambda e: e["id"])
def test_sglbench_plan_plans_each_published_line(
    entry: dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    """`sglbench plan --gpu H200 [--sglang-version V] -- <published flags>`: a plan (exit 0 or 1), or
    exit 2 with one line naming the release and the flag (for flags that release truly lacks)."""
    version = ["--sglang-version", entry["sglang_version"]] if entry.get("sglang_version") else []
    rc = cli.main(["plan", "--gpu", "H200", *version, "--", *with_fixtures(entry)])
    out, err = capsys.readouterr()
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("sglbench plan: error: "), err
        assert flags_verdict(entry) is not None or "draft" in err or "tp" in err, err
    else:
        assert rc in (0, 1), err
        assert "FITS" in out or "FAILS" in out
