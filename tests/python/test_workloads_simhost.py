"""Every one-shot workload source and ``sharegpt-turns:`` on the sim host: `sglbench run` end to end.

One sim host container (``sglbench-simhost-workloads-<pid>``, from ``$SGLBENCH_SIMHOST_IMAGE``) serves the
module; each test is one small campaign (``sglbench run``) over the small 8B config of
``simhost_util.MATRIX``, one repeat, every prompt of its source once, short answers, no telemetry. What
makes each source that source is read from the committed point files and request rows as the controller
has them. The files come from ``tests/fixtures/workloads/`` (``multi-turn:`` has its own test,
``test_sessions_simhost.py``):

- ``sharegpt:``: the measured prompt ids are the file's conversations of two turns or more (its ids, the
  one without an id named ``<stem>:<record>``), category ``sharegpt``; only the first turn is sent (the
  file's long answers never), so prompt tokens follow the first turns' lengths;
- ``shared-prefix:``: at concurrency 1 after the cache flush, the first question of a group finds next to
  nothing cached and every later one of the group finds its system prompt (> 80 % of the prompt);
- ``sharegpt-turns:``: rows carry ``session`` = the conversation id and ``turn`` 0, 1, … in order, each
  sent after the previous turn's answer ended, its history growing by the server's answers and not the
  file's; the point has a ``turns`` table;
- ``trace:``: two rate points; each summary's ``trace_replay`` holds the requests, its rate, the trace's
  own rate and the speed-up between them; each request's prompt and output tokens are its trace line's
  ``input_length`` and ``output_length``, its ``scheduled_s`` the trace's gap from the first timestamp
  divided by the speed-up (so the faster point's are the slower one's scaled), and what the server found
  cached lies between the blocks it shares with requests that ended before it and those it shares with
  requests sent before it;
- ``long-context:``: on a config serving 8192 tokens every prompt is exactly the asked length, nothing
  shared between them; on a config serving 2048 the same source is refused in one line naming the prompt
  and the fix, before any request (the attempt fails in its bench phase, no point committed) and the run
  exits 1;
- ``specbench:``: each row's category is its question's from the file (``specbench`` without one), the
  point summary's ``by_category`` lists exactly those with their counts, and only the first turn is
  sent; a second run of the same run id with one question's text changed measures the attempt again
  (another identity hash, the old record moved aside as stale, nothing reused) and sends the new text.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "workloads"
SIM_NAME = f"sglbench-simhost-workloads-{os.getpid()}"
CONFIG = sh.MATRIX[0]["name"]
BASE = {
    "concurrency": [1],
    "repeats": 1,
    "max_new_tokens": 8,
    "ignore_eos": True,
    "warmup": 0,
    "telemetry": {"enabled": False},
}
BLOCK = 512  # tokens per Mooncake hash_ids block (trace_replay.BLOCK_TOKENS)


@pytest.fixture(scope="module")
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


@dataclass
class Point:
    key: str
    doc: dict[str, Any]
    rows: list[dict[str, Any]]  # measured rows, in sending order

    @property
    def summary(self) -> dict[str, Any]:
        return self.doc["summary"]


def campaign(
    host: str,
    root: Path,
    run_id: str,
    load: dict[str, Any],
    matrix: list[dict[str, Any]] | None = None,
    failed: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``sglbench run`` of ``load`` (over :data:`BASE`) into ``root/results/<run_id>``; every config's attempt
    ok but ``failed`` (``<config>-tp1``), the exit code as that explains (``simhost_util.check_run``)."""
    argv = sh.run_argv(
        host, root / "results", root / "locks", "--run-id", run_id, load=BASE | load, matrix=matrix
    )
    done = subprocess.run(argv, cwd=REPO, env=sh.env(host), capture_output=True, text=True, timeout=600)
    sh.check_run(done, root / "results" / run_id, failed)
    return done


def attempt_dir(root: Path, run_id: str, config: str = CONFIG) -> Path:
    return root / "results" / run_id / "simhost" / f"{config}-tp1"


def points(attempt: Path) -> dict[str, Point]:
    out = {}
    for path in sh.point_files(attempt / "points"):
        doc = json.loads(path.read_text())
        lines = (attempt / "points" / f"{doc['key']}.requests.jsonl").read_text().splitlines()
        rows = [r for r in map(json.loads, lines) if not r["warmup"]]
        assert rows and all(r["error"] is None for r in rows), rows
        out[doc["key"]] = Point(doc["key"], doc, sorted(rows, key=lambda r: r["sent_s"]))
    return out


def only_point(attempt: Path, key: str = "c1-r0") -> Point:
    found = points(attempt)
    assert list(found) == [key]
    return found[key]


def copy_fixture(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / name, dst)
    return dst


def n_words(text: str) -> int:
    return len(text.split())


# -- sharegpt: / sharegpt-turns: ------------------------------------------------------------------------
def sharegpt_conversations(path: Path) -> dict[str, list[dict[str, str]]]:
    """id (``<stem>:<record>`` without one) -> turns, of the conversations with two turns or more."""
    data = json.loads(path.read_text())
    return {
        str(rec.get("id", f"{path.stem}:{n}")): rec["conversations"]
        for n, rec in enumerate(data)
        if len(rec["conversations"]) >= 2
    }


@pytest.mark.simhost
def test_sharegpt_sends_each_conversations_first_turn(sim_host: str, tmp_path: Path) -> None:
    path = copy_fixture("sharegpt.json", tmp_path)
    convs = sharegpt_conversations(path)
    assert len(json.loads(path.read_text())) > len(convs)  # the file holds a one-turn conversation to skip
    campaign(sim_host, tmp_path, "sharegpt", {"prompt_sets": [f"sharegpt:{path}"], "num_prompts": len(convs)})
    point = only_point(attempt_dir(tmp_path, "sharegpt"))
    assert sorted(r["prompt_id"] for r in point.rows) == sorted(convs)
    assert {r["category"] for r in point.rows} == {"sharegpt"}
    assert point.summary["by_category"]["sharegpt"]["n_ok"] == len(convs)
    tokens = {r["prompt_id"]: r["prompt_tokens"] for r in point.rows}
    for pid, turns in convs.items():
        first = n_words(turns[0]["value"])
        assert first / 2 < tokens[pid] < first * 3 + 16, (pid, tokens[pid], first)
    # a conversation whose answers alone are far longer than that bound: they were not sent
    assert any(
        sum(n_words(t["value"]) for t in turns[1:]) > 10 * (n_words(turns[0]["value"]) * 3 + 16)
        for turns in convs.values()
    )
    by_length = sorted(convs, key=lambda pid: n_words(convs[pid][0]["value"]))
    assert [tokens[pid] for pid in by_length] == sorted(tokens.values())


@pytest.mark.simhost
def test_sharegpt_turns_are_sessions_with_the_servers_answers(sim_host: str, tmp_path: Path) -> None:
    path = copy_fixture("sharegpt.json", tmp_path)
    convs = sharegpt_conversations(path)
    users = {sid: [t["value"] for t in turns if t["from"] == "human"] for sid, turns in convs.items()}
    n_turns = sum(map(len, users.values()))
    assert max(map(len, users.values())) >= 3
    load = {"prompt_sets": [f"sharegpt-turns:{path}"], "num_prompts": n_turns}
    campaign(sim_host, tmp_path, "sharegpt-turns", load)
    point = only_point(attempt_dir(tmp_path, "sharegpt-turns"))
    assert len(point.rows) == n_turns and {r["category"] for r in point.rows} == {"sharegpt-turns"}
    sessions: dict[str, list[dict[str, Any]]] = {}
    for r in point.rows:
        sessions.setdefault(r["session"], []).append(r)
    assert sorted(sessions) == sorted(users)
    for sid, turns in sessions.items():
        assert [r["turn"] for r in turns] == list(range(len(users[sid])))  # in sending order
        assert [r["prompt_id"] for r in turns] == [f"{sid}:t{t}" for t in range(len(turns))]
        for a, b in itertools.pairwise(turns):
            assert b["sent_s"] >= a["end_s"]
            # the history grows by the server's 8-token answer and the new question, not the file's answer
            grown = b["prompt_tokens"] - a["prompt_tokens"]
            new_words = n_words(users[sid][b["turn"]])
            assert 8 <= grown < 3 * new_words + 8 + 32, (sid, b["turn"], grown)
            gpt = [t for t in convs[sid] if t["from"] == "gpt"][a["turn"]]["value"]
            assert grown < n_words(gpt) / 2
    table = point.summary["turns"]
    assert [t["turn"] for t in table] == list(range(max(map(len, users.values()))))
    assert [t["n_ok"] for t in table] == [sum(len(u) > k for u in users.values()) for k in range(len(table))]


# -- shared-prefix: ---------------------------------------------------------------------------------------
@pytest.mark.simhost
def test_shared_prefix_questions_find_their_groups_system_prompt_cached(
    sim_host: str, tmp_path: Path
) -> None:
    groups, questions = 2, 3
    load = {"prompt_sets": [f"shared-prefix:{groups}x{questions}:600:8"], "num_prompts": groups * questions}
    campaign(sim_host, tmp_path, "shared-prefix", load)
    point = only_point(attempt_dir(tmp_path, "shared-prefix"))
    want = [f"sp-g{g}-q{q}" for g in range(groups) for q in range(questions)]
    assert sorted(r["prompt_id"] for r in point.rows) == want
    assert {r["category"] for r in point.rows} == {"shared-prefix"}
    for g in range(groups):
        rows = [r for r in point.rows if r["prompt_id"].startswith(f"sp-g{g}-")]
        first, later = rows[0], rows[1:]
        assert first["cached_tokens"] < 0.05 * first["prompt_tokens"], first
        assert all(r["cached_tokens"] > 0.8 * r["prompt_tokens"] for r in later), later


# -- trace: ---------------------------------------------------------------------------------------------
def shared_tokens(a: dict[str, Any], b: dict[str, Any]) -> int:
    """Prompt tokens two trace requests share: their common leading hash_ids blocks, as far as both
    prompts reach."""
    n = 0
    for x, y in zip(a["hash_ids"], b["hash_ids"], strict=False):
        if x != y:
            break
        n += 1
    return min(n * BLOCK, a["input_length"], b["input_length"])


@pytest.mark.simhost
def test_trace_replays_its_arrivals_lengths_and_blocks_at_each_rate(sim_host: str, tmp_path: Path) -> None:
    path = copy_fixture("trace.jsonl", tmp_path)
    lines = {no: json.loads(s) for no, s in enumerate(path.read_text().splitlines(), start=1)}
    stamps = sorted(r["timestamp"] for r in lines.values())
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert list(lines.values()) != sorted(lines.values(), key=lambda r: r["timestamp"])  # replayed sorted
    own_rate = (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1000)
    rates = [4, 8]
    load = {
        "prompt_sets": [f"trace:{path}"],
        "concurrency": [],
        "request_rate": rates,
        "num_prompts": len(lines),
    }
    campaign(sim_host, tmp_path, "trace", load)
    found = points(attempt_dir(tmp_path, "trace"))
    assert sorted(found) == [f"r{r}-r0" for r in rates]
    first_scheduled: dict[int, list[float]] = {}
    for rate in rates:
        point = found[f"r{rate}-r0"]
        replay = point.summary["trace_replay"]
        assert replay["requests"] == len(lines) and replay["rate"] == rate
        assert replay["own_rate"] == pytest.approx(own_rate)
        assert replay["speedup"] == pytest.approx(rate / own_rate)
        assert len(point.rows) == len(lines) and {r["category"] for r in point.rows} == {"trace"}
        for r in point.rows:
            m = re.fullmatch(rf"trace@{sha[:12]}:(\d+)", r["prompt_id"])
            assert m, r["prompt_id"]
            r["line"] = lines[int(m.group(1))]
        assert [r["line"]["timestamp"] for r in point.rows] == stamps
        for r in point.rows:
            gap_s = (r["line"]["timestamp"] - stamps[0]) / 1000
            assert r["scheduled_s"] == pytest.approx(gap_s / replay["speedup"], abs=1e-6)
            assert r["sent_s"] >= r["scheduled_s"] - 1e-6
            assert r["prompt_tokens"] == r["line"]["input_length"]
            assert r["completion_tokens"] == r["line"]["output_length"]
        for i, r in enumerate(point.rows):
            sent = point.rows[:i]
            ended = [e for e in sent if e["end_s"] <= r["sent_s"]]
            low = max((shared_tokens(e["line"], r["line"]) for e in ended), default=0)
            high = max((shared_tokens(e["line"], r["line"]) for e in sent), default=0)
            # a page of tokens at the end of a cached prefix may be left out (the last token always is)
            assert low - 16 <= r["cached_tokens"] <= high, (r["prompt_id"], r["cached_tokens"], low, high)
        first_scheduled[rate] = [r["scheduled_s"] for r in point.rows]
    slow, fast = (first_scheduled[r] for r in rates)
    assert fast == pytest.approx([t * rates[0] / rates[1] for t in slow], abs=1e-6)
    assert any(r["cached_tokens"] >= 2 * BLOCK for r in found[f"r{rates[0]}-r0"].rows)


# -- long-context: -------------------------------------------------------------------------------------
@pytest.mark.simhost
def test_long_context_is_exact_and_refused_where_it_does_not_fit(sim_host: str, tmp_path: Path) -> None:
    tokens, count = 3000, 2
    short = {**sh.MATRIX[0], "name": "qwen3-8b-short", "args": {"context_length": 2048}}
    load = {"prompt_sets": [f"long-context:{tokens}x{count}"], "num_prompts": count}
    matrix = [sh.MATRIX[0], short]
    done = campaign(sim_host, tmp_path, "long-context", load, matrix, failed=(f"{short['name']}-tp1",))
    point = only_point(attempt_dir(tmp_path, "long-context"))
    assert sorted(r["prompt_id"] for r in point.rows) == [f"long-{tokens}-{i}" for i in range(count)]
    assert all(r["prompt_tokens"] == tokens for r in point.rows)
    assert all(r["cached_tokens"] < 32 for r in point.rows)  # no prefix shared between them
    assert list(point.summary["by_category"]) == [f"long-context-{tokens}"]
    refused = attempt_dir(tmp_path, "long-context", short["name"])
    record = json.loads((refused / "record.json").read_text())
    assert record["outcome"] == "failed" and record["failure"]["phase"] == "bench", record["failure"]
    message = record["failure"]["message"]
    assert "\n" not in message.strip(), message
    assert f"long-{tokens}-0" in message and "context length 2048" in message, message
    assert "long-context:<tokens>" in message, message
    # the point is committed as failed before any request: no rows, no summary (a re-run measures it)
    docs = [json.loads(p.read_text()) for p in sh.point_files(refused / "points")]
    assert [(d["outcome"], d["summary"], d["requests_file"]) for d in docs] == [("failed", None, None)], docs
    assert not list((refused / "points").glob("*.requests.jsonl"))
    # the run goes on past the refused config, says which failed where, and exits 1 (a config failed)
    assert f"{short['name']}-tp1: failed (bench: bench_failed)" in done.stdout, done.stdout[-3000:]


# -- specbench: -----------------------------------------------------------------------------------------
@pytest.mark.simhost
def test_specbench_categories_and_a_changed_file_measured_again(sim_host: str, tmp_path: Path) -> None:
    path = copy_fixture("specbench.jsonl", tmp_path)
    questions = [json.loads(s) for s in path.read_text().splitlines()]
    category = {str(q["question_id"]): q.get("category", "specbench") for q in questions}
    load = {"prompt_sets": [f"specbench:{path}"], "num_prompts": len(questions)}
    attempt = attempt_dir(tmp_path, "specbench")

    campaign(sim_host, tmp_path, "specbench", load)
    point = only_point(attempt)
    assert {r["prompt_id"]: r["category"] for r in point.rows} == category
    by_cat = point.summary["by_category"]
    assert {c: v["n_ok"] for c, v in by_cat.items()} == dict(Counter(category.values()))
    assert "specbench" in by_cat  # a question without a category
    first_tokens = {r["prompt_id"]: r["prompt_tokens"] for r in point.rows}
    for q in questions:
        first = n_words(q["turns"][0])
        assert first_tokens[str(q["question_id"])] < first * 3 + 16, q["question_id"]
        assert all(first_tokens[str(q["question_id"])] < n_words(t) / 2 for t in q["turns"][1:])
    before = json.loads((attempt / "record.json").read_text())

    changed = questions[1]
    changed["turns"][0] += " " + " ".join(["Add a line about the river."] * 20)
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    campaign(sim_host, tmp_path, "specbench", load)
    after = json.loads((attempt / "record.json").read_text())
    assert after["identity"]["hash"] != before["identity"]["hash"]
    assert after["resume"]["previous"] == {"outcome": "ok", "identity_hash": before["identity"]["hash"]}
    resume = after["benchmark"]["resume"]
    assert resume["measured"] == ["c1-r0"] and resume["reused"] == [] and resume["expected"] == 1, resume
    assert [p.parent.name.endswith("-stale") for p in (attempt / "previous").glob("*/record.json")] == [True]
    again = only_point(attempt)
    assert again.doc["hash"] != point.doc["hash"]
    tokens = {r["prompt_id"]: r["prompt_tokens"] for r in again.rows}
    cid = str(changed["question_id"])
    assert tokens[cid] > first_tokens[cid] + 100
    assert {k: v for k, v in tokens.items() if k != cid} == {
        k: v for k, v in first_tokens.items() if k != cid
    }
