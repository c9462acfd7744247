"""Multi-turn sessions on the sim host: `sglbench run` with a `multi-turn:` source end to end.

Starts its own sim host container (``sglbench-simhost-sessions-<pid>``) from ``$SGLBENCH_SIMHOST_IMAGE``
and runs ``sglbench run`` over the small 8B config of ``simhost_util.MATRIX`` at concurrency 1 and 2, one
repeat each, 4 sessions of 3 turns (a 2000-word system prompt per session, 10-word questions, 8-token
answers): long enough that the stand-in's prefill of a whole first turn (its timing model, compute bound)
takes several times a later turn's, whose history the radix cache holds. Each committed point is read as
the controller has it (point file and request rows), beside what the server logged (its journal):

- every measured row carries its ``session`` and ``turn``, each session's turns 0, 1, 2 in order, each
  sent after the previous one's answer ended;
- the point's ``turns`` table: cached tokens 0 at turn 0 (the cache is flushed before the point) and
  rising turn by turn, above 80 % of the prompt from turn 1 on; its TTFT per turn is the distribution of
  that turn's rows;
- at concurrency 1 the server prefilled each request alone and only what it did not find cached: between
  the point's cache flushes, its ``Prefill batch`` log lines hold one batch per measured row with
  ``#new-token`` = prompt - cached tokens and ``#cached-token`` = cached tokens; by the stand-in's timing
  model (its own clock, which no load on the machine changes) each later turn's prefill takes less than
  half of turn 0's.

The client's wall-clock TTFT is reported but not judged: on a busy machine each request's HTTP and
scheduling time can hide the prefill it saved.

The figures go to ``build/test-artifacts/sessions_simhost.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import pytest
import simhost_util as sh
import yaml

from sglbench.hostlib import metrics
from sglbench.sim import truth

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
PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+),")
FLUSHED = "Cache flushed successfully!"


@pytest.fixture
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


def _prefills_between_flushes(host: str) -> list[list[tuple[int, int, int]]]:
    """The server's ``Prefill batch`` lines (#new-seq, #new-token, #cached-token) from its journal, split at
    every cache flush: the lines of each stretch between two flushes that prefilled anything."""
    journal = sh.host(host, "journalctl", "-o", "cat", "--no-pager", timeout=120)
    assert journal.returncode == 0, journal.stderr
    stretches: list[list[tuple[int, int, int]]] = [[]]
    for line in journal.stdout.splitlines():
        if FLUSHED in line:
            stretches.append([])
        elif m := PREFILL.search(line):
            stretches[-1].append((int(m[1]), int(m[2]), int(m[3])))
    return [s for s in stretches[1:] if s]


def _prefill_seconds(record: dict[str, Any]) -> Any:
    """The stand-in's timing model of the launch (the record's argv, inventory/sim's unit environment):
    seconds of prefill for N new tokens."""
    host_vars = yaml.safe_load(
        (REPO / "inventory" / "sim" / "group_vars" / "sglang_gpu" / "host.yml").read_text()
    )
    argv = [a.replace("/models/", f"{REPO}/tests/fixtures/models/") for a in record["argv"][3:]]
    # the values may be templates of the inventory's own variables (the time scale), as Ansible renders them
    env = {
        k: jinja2.Template(str(v)).render(**host_vars)
        for k, v in host_vars["sglbench_unit_environment"].items()
    }
    return truth.server_model(argv, env).timing.prefill


@pytest.mark.simhost
def test_sessions_carry_their_history_through_a_campaign(sim_host: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    argv = sh.run_argv(sim_host, tmp_path / "results", tmp_path / "locks", "--run-id", RUN_ID, load=LOAD)
    done = subprocess.run(argv, cwd=REPO, env=sh.env(sim_host), capture_output=True, text=True, timeout=900)
    sh.check_run(done, tmp_path / "results" / RUN_ID)  # exit 1 only for a point the busy machine made invalid
    attempt = tmp_path / "results" / RUN_ID / "simhost" / f"{sh.MATRIX[0]['name']}-tp1"
    points_dir = attempt / "points"
    files = sh.point_files(points_dir)
    assert [p.stem for p in files] == ["c1-r0", "c2-r0"]
    prefill_s = _prefill_seconds(json.loads((attempt / "record.json").read_text()))
    # the points ran in order, each after its cache flushes: the first stretch that prefilled is c1-r0's
    stretches = _prefills_between_flushes(sim_host)
    assert len(stretches) >= 2, stretches
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
        for t in table:  # each turn's TTFT is its own rows'
            own = sorted(1000 * metrics.request_metrics(r).ttft_s for r in measured if r["turn"] == t["turn"])
            got = t["ttft_ms"]
            assert (got["n"], got["min"], got["max"]) == pytest.approx((4, own[0], own[-1])), (t, own)
        if doc["key"] == "c1-r0":
            # the server's own account: one batch per request, prefilling exactly what was not cached
            batches = stretches[0]
            wanted = Counter(
                (1, r["prompt_tokens"] - r["cached_tokens"], r["cached_tokens"]) for r in measured
            )
            assert not wanted - Counter(batches), (batches, wanted)
            new = {
                t: [r["prompt_tokens"] - r["cached_tokens"] for r in measured if r["turn"] == t]
                for t in (0, 1, 2)
            }
            model_s = {t: max(prefill_s(n) for n in ns) for t, ns in new.items()}
            figures["points"][doc["key"]]["prefill_model_s"] = model_s
            assert all(model_s[t] < min(prefill_s(n) for n in new[0]) / 2 for t in (1, 2)), (new, model_s)
    figures["elapsed_s"] = time.monotonic() - t0
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))
