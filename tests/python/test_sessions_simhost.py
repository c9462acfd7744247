"""Multi-turn sessions on the sim host: `sglbench run` with a `multi-turn:` source end to end.

Starts its own sim host container (``sglbench-simhost-sessions-<pid>``) from ``$SGLBENCH_SIMHOST_IMAGE``
and runs ``sglbench run`` over the small 8B config of ``simhost_util.MATRIX`` at concurrency 1 and 2, one
repeat each, 4 sessions of 3 turns (a 2000-word system prompt per session, 10-word questions, 8-token
answers): long enough that the stand-in's prefill of a whole first turn (its timing model, compute bound)
takes several times a later turn's, whose history the radix cache holds. Each committed point is read as
the controller has it (point file and request rows):

- every measured row carries its ``session`` and ``turn``, each session's turns 0, 1, 2 in order, each
  sent after the previous one's answer ended;
- the point's ``turns`` table: cached tokens 0 at turn 0 (the cache is flushed before the point) and
  rising turn by turn, above 80 % of the prompt from turn 1 on; at concurrency 1 every later turn's TTFT
  p50 below half of turn 0's.

The figures go to ``build/test-artifacts/sessions_simhost.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh

REPO = Path(__file__).resolve().parents[2]
SIM_NAME = f"sglbench-simhost-sessions-{os.getpid()}"
RUN_ID = "sessions"
SOURCE = "multi-turn:4x3:2000:10"
LOAD = {
    "prompt_sets": [SOURCE],
    "concurrency": [1, 2],
    "repeats": 1,
    "num_prompts": 12,
    "max_new_tokens": 8,
    "ignore_eos": True,
    "warmup": 0,
}
ARTIFACT = REPO / "build" / "test-artifacts" / "sessions_simhost.json"


@pytest.fixture
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


@pytest.mark.simhost
def test_sessions_carry_their_history_through_a_campaign(sim_host: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    argv = sh.run_argv(sim_host, tmp_path / "results", tmp_path / "locks", "--run-id", RUN_ID, load=LOAD)
    done = subprocess.run(argv, cwd=REPO, env=sh.env(sim_host), capture_output=True, text=True, timeout=900)
    sh.check_run(done, tmp_path / "results" / RUN_ID)  # exit 1 only for a point the busy machine made invalid
    points_dir = tmp_path / "results" / RUN_ID / "simhost" / f"{sh.MATRIX[0]['name']}-tp1" / "points"
    files = sh.point_files(points_dir)
    assert [p.stem for p in files] == ["c1-r0", "c2-r0"]
    figures: dict[str, Any] = {"source": SOURCE, "points": {}}
    for path in files:
        doc = json.loads(path.read_text())
        summary = doc["summary"]
        rows = [json.loads(x) for x in (points_dir / f"{doc['key']}.requests.jsonl").read_text().splitlines()]
        measured = [r for r in rows if not r["warmup"]]
        assert len(measured) == 12 and all(r["error"] is None for r in measured)
        sessions: dict[str, list[dict[str, Any]]] = {}
        for r in measured:
            sessions.setdefault(r["session"], []).append(r)
        assert sorted(sessions) == [f"mt-s{s}" for s in range(4)]
        for turns in sessions.values():
            turns.sort(key=lambda r: r["turn"])
            assert [r["turn"] for r in turns] == [0, 1, 2]
            for a, b in itertools.pairwise(turns):
                assert b["sent_s"] >= a["end_s"] and b["prompt_tokens"] > a["prompt_tokens"]
        table = summary["turns"]
        cached = [t["cached_tokens_mean"] for t in table]
        ttft = [t["ttft_ms"]["p50"] for t in table]
        figures["points"][doc["key"]] = {"cached_tokens_mean": cached, "ttft_ms_p50": ttft, "turns": table}
        assert [t["turn"] for t in table] == [0, 1, 2] and all(t["n_ok"] == 4 for t in table)
        assert cached[0] == 0 and all(b > a for a, b in itertools.pairwise(cached)), cached
        assert all(t["cached_fraction"] > 0.8 for t in table[1:]), table
        if doc["key"] == "c1-r0":
            assert all(x < ttft[0] / 2 for x in ttft[1:]), ttft
    figures["elapsed_s"] = time.monotonic() - t0
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))
