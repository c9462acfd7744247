"""scripts/prompt_ci.py: the per-category interval resamples prompts (sending a prompt again adds no
information), and the prompts it asks for follow from the measured between-prompt spread."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("prompt_ci_script", REPO / "scripts" / "prompt_ci.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pc = _load_script()


def _hist(rng: random.Random, width: int = 8, steps: int = 10) -> list[int]:
    h = [0] * width
    for _ in range(steps):
        h[min(width - 1, int(rng.expovariate(0.4)))] += 1
    return h


def _write(path: Path, n_prompts: int, sends: int, category: str = "code") -> Path:
    """``n_prompts`` prompts, each sent ``sends`` times with the same histogram (greedy decoding)."""
    rng = random.Random(n_prompts)
    hists = [_hist(rng) for _ in range(n_prompts)]
    rows = [
        {"prompt_id": f"p{i}", "category": category, "ok": True, "warmup": False, "spec_accept_histogram": h}
        for _ in range(sends)
        for i, h in enumerate(hists)
    ]
    rows.append(
        {"prompt_id": "w", "category": category, "ok": True, "warmup": True, "spec_accept_histogram": [9]}
    )
    path.mkdir(parents=True, exist_ok=True)
    (path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path / "requests.jsonl"


def test_resending_prompts_does_not_narrow_the_interval(tmp_path: Path) -> None:
    once = pc.table([_write(tmp_path / "once", 40, 1)], 0.05).iloc[0]
    often = pc.table([_write(tmp_path / "often", 40, 10)], 0.05).iloc[0]
    assert once["requests"] == 40 and often["requests"] == 400 and often["prompts"] == 40
    assert often["accepted/step"] == pytest.approx(once["accepted/step"])
    assert often["half_width_rel"] == pytest.approx(once["half_width_rel"], rel=0.15)
    more = pc.table([_write(tmp_path / "more", 400, 1)], 0.05).iloc[0]
    assert more["half_width_rel"] < 0.6 * once["half_width_rel"]  # ten times the prompts: ~1/sqrt(10)


def test_prompts_needed_follow_the_spread(tmp_path: Path) -> None:
    row = pc.table([_write(tmp_path / "a", 60, 2)], 0.05).iloc[0]
    promised = (pc.Z * row["prompt_cv"] / 0.05) ** 2  # prompt_cv is rounded to 3 decimals for display
    assert abs(row["prompts_needed"] - promised) <= 1 + 0.01 * promised
    # at the sized count, the measured half-width is near the target the arithmetic promised
    sized = pc.table([_write(tmp_path / "b", int(row["prompts_needed"]), 1)], 0.05).iloc[0]
    assert 0.035 < sized["half_width_rel"] < 0.065


def test_run_directory_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path / "run" / "host" / "eagle-tp1", 30, 2)
    assert pc.main([str(tmp_path / "run")]) == 0
    assert "eagle-tp1" in capsys.readouterr().out
    assert pc.main([str(tmp_path / "run"), "--target", "5"]) == 2
    (tmp_path / "empty" / "h" / "ar-tp1").mkdir(parents=True)
    pd.DataFrame([{"prompt_id": "p", "category": "c", "ok": True, "warmup": False}]).to_json(
        tmp_path / "empty" / "h" / "ar-tp1" / "requests.jsonl", orient="records", lines=True
    )
    assert pc.main([str(tmp_path / "empty")]) == 1
