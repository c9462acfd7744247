"""The deployment answer in the commands: summarize prints the deploy table first (md and text), compare
flags a crossover or limit that moved beyond its interval."""

from __future__ import annotations

from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import cli

AR = {1: 40.0, 2: 80.0, 4: 150.0, 8: 280.0, 16: 480.0}


def _run(root: Path, spec: dict[int, float], *, mrr: int = 64) -> Path:
    rf.curve(root, "ar", AR, mrr=mrr)
    rf.curve(root, "dflash", spec, algorithm="DFLASH", mrr=mrr)
    return root / "run1"


SATURATING = {1: 90.0, 2: 160.0, 4: 220.0, 8: 250.0, 16: 260.0}


def test_summarize_md_starts_with_the_deploy_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, SATURATING)
    assert cli.main(["summarize", str(run)]) == 0
    out = capsys.readouterr().out
    order = [
        out.index(h) for h in ("**SIMULATED", "## Deployment answer", "### TP 1: deploy table", "## TP 1\n")
    ]
    assert order == sorted(order)
    assert "| dflash up to concurrency 4, then ar (measured to concurrency 16) | dflash: 7.03 [" in out
    tail = out[out.index("## TP 1\n") :]
    assert tail.index("## Limits: why each config's highest load is where it is") < tail.index(
        "## Per-GPU Pareto frontier"
    )
    assert f"Deployment answer files: breakeven.json, frontier.json, limits.json in {run}" in out


def test_summarize_text_is_the_same_answer_without_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, SATURATING)
    assert cli.main(["summarize", str(run), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED: numbers below come from the SGLang stand-in")
    assert "|" not in out and "## " not in out and "**" not in out
    lines = out.splitlines()
    i = lines.index("TP 1: deploy table")
    header, rule, row = lines[i + 2 : i + 5]
    assert header.split() == ["model", "prompts", "load", "deploy", "break-even", "[95%", "CI]", "notes"]
    assert set(rule) <= {"-", " "} and "dflash up to concurrency 4, then ar" in row
    assert out.index("TP 1: deploy table") < out.index("\nTP 1\n")


def test_summarize_csv_stays_the_tidy_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, SATURATING)
    assert cli.main(["summarize", str(run), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run_id,host,tp,config") and "Deployment answer" not in out
    assert (run / "breakeven.json").is_file()


def test_compare_flags_a_crossover_that_moved_beyond_its_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a", SATURATING)
    b = _run(tmp_path / "b", {1: 90.0, 2: 100.0, 4: 120.0, 8: 250.0, 16: 260.0})  # pays up to ~2 only
    rc = cli.main(["compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert rc == 1  # the throughput regressions at c2 and c4, as before
    section = out[out.index("## Deployment answer: what moved beyond its interval") :]
    assert "| crossover | 1 | dflash |" in section
    assert "B's break-even against ar lies outside A's 95% CI" in section
    # the same run compared with itself: nothing moved
    assert cli.main(["compare", str(a), str(a)]) == 0
    assert "No crossover or limit moved beyond its interval." in capsys.readouterr().out


def test_compare_flags_a_limit_that_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path / "a", SATURATING, mrr=64)
    b = _run(tmp_path / "b", SATURATING, mrr=4)
    cli.main(["compare", str(a), str(b)])
    section = capsys.readouterr().out.split("## Deployment answer: what moved beyond its interval", 1)[1]
    assert "| limit | 1 | ar |" in section and "label compute-bound -> slot-bound" in section
