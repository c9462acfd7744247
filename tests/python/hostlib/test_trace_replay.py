"""Trace replay: Mooncake-format files read as SGLang's bench client reads them, the send times scaled to a
point's rate, the identity following the file, and the replay keeping its schedule on loopback."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sglbench import resume
from sglbench.hostlib import loadgen, loadgen_api, metrics, nullserver, prompts, trace_replay
from sglbench.hostlib.token_blocks import BLOCK_TOKENS

# The first lines of the Mooncake arxiv trace SGLang downloads (mooncake_trace.jsonl), shortened.
MOONCAKE = [
    {"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": list(range(46, 60))},
    {"timestamp": 0, "input_length": 7319, "output_length": 490, "hash_ids": [*range(46, 60), 2353]},
    {
        "timestamp": 3052,
        "input_length": 7234,
        "output_length": 794,
        "hash_ids": [*range(46, 57), 2366, 2367, 2368, 2369],
    },
    {
        "timestamp": 3052,
        "input_length": 2287,
        "output_length": 316,
        "hash_ids": [2370, 2371, 2372, 2373, 2374],
    },
]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _synthetic_trace(path: Path, n: int, mean_gap_ms: float, seed: int = 0) -> Path:
    rng = random.Random(seed)
    t, rows = 0.0, []
    for i in range(n):
        rows.append(
            {
                "timestamp": round(t),
                "input_length": rng.randint(64, 1500),
                "output_length": rng.randint(2, 12),
                "hash_ids": [i % 4, 1000 + i],
            }
        )
        t += rng.expovariate(1.0 / mean_gap_ms)
    return _write(path, rows)


def test_mooncake_lines_become_timed_token_prompts(tmp_path):
    path = _write(tmp_path / "mooncake_trace.jsonl", [MOONCAKE[2], MOONCAKE[0], MOONCAKE[1], MOONCAKE[3]])
    got = prompts.resolve_prompt_source(f"trace:{path}")
    # Timestamp order, stable (as SGLang sorts them); ids name the file's content and the line.
    assert [p.id.rsplit(":", 1)[1] for p in got] == ["2", "3", "1", "4"]
    assert all(p.id.startswith("mooncake_trace@") and p.category == "trace" for p in got)
    assert [p.arrival_s for p in got] == [0.0, 0.0, 3.052, 3.052]
    assert [p.max_new_tokens for p in got] == [500, 490, 794, 316]
    ids = [p.token_ids() for p in got]
    assert [len(x) for x in ids] == [6755, 7319, 7234, 2287]
    # hash ids 46..56 are shared by the first three requests: 11 blocks of the same tokens.
    assert ids[0][: 11 * BLOCK_TOKENS] == ids[1][: 11 * BLOCK_TOKENS] == ids[2][: 11 * BLOCK_TOKENS]
    assert ids[1][: len(ids[0])] == ids[0]  # 14 blocks in common, the first request's last one cut
    assert ids[2][11 * BLOCK_TOKENS : 12 * BLOCK_TOKENS] != ids[0][11 * BLOCK_TOKENS : 12 * BLOCK_TOKENS]
    assert ids[3][:BLOCK_TOKENS] != ids[0][:BLOCK_TOKENS]
    # Each request asks for exactly its output length.
    body = json.loads(
        loadgen_api.build_body("native", got[0], loadgen_api.SamplingSpec(max_new_tokens=7), None)
    )
    assert body["sampling_params"]["max_new_tokens"] == 500 and body["sampling_params"]["ignore_eos"] is True
    assert len(body["input_ids"]) == 6755


def test_fields_sglang_defaults_are_kept(tmp_path):
    path = _write(
        tmp_path / "t.jsonl", [{"timestamp": 5, "input_length": 10}, {"timestamp": 9, "hash_ids": [1, 2]}]
    )
    a, b = prompts.resolve_prompt_source(f"trace:{path}")
    assert a.max_new_tokens == trace_replay.DEFAULT_OUTPUT_LENGTH == 256  # SGLang: output_length or 256
    assert a.token_blocks.blocks == () and len(a.token_ids()) == 10  # no hash_ids: nothing shared
    assert len(b.token_ids()) == 2 * BLOCK_TOKENS  # no input_length: its blocks, whole
    assert b.arrival_s == pytest.approx(0.004)


@pytest.mark.parametrize(
    "line, msg",
    [
        ('{"input_length": 3}', "'timestamp' must be a number of ms"),
        ('{"timestamp": -1, "input_length": 3}', "'timestamp' must be a number of ms"),
        ('{"timestamp": true, "input_length": 3}', "'timestamp' must be a number of ms"),
        ('{"timestamp": 1, "input_length": "3"}', "'input_length' must be an integer"),
        ('{"timestamp": 1}', "'input_length' must be an integer"),
        ('{"timestamp": 1, "input_length": 3, "output_length": 0}', "'output_length' must be an integer"),
        ('{"timestamp": 1, "input_length": 3, "hash_ids": [1, -2]}', "'hash_ids' must be a list"),
        ('{"timestamp": 1, "input_length": 3, "hash_ids": 4}', "'hash_ids' must be a list"),
        ("[1, 2]", "expected an object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_lines_are_one_line_errors_naming_line_and_field(tmp_path, line, msg):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5}\n' + line + "\n")
    with pytest.raises(prompts.PromptError, match=msg) as err:
        prompts.resolve_prompt_source(f"trace:{path}")
    assert f"{path}:2: " in str(err.value) and "\n" not in str(err.value)


def test_bad_sources_are_one_line_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"timestamp": 0, "input_length": 5, "x": "\xe9"}\n')
    for spec, msg in [
        ("trace:", "give|use trace:<path>"),
        (f"trace:{tmp_path}/missing.jsonl", "cannot read trace file"),
        (f"trace:{tmp_path}/empty.jsonl", "holds no requests"),
        (f"trace:{tmp_path}/latin1.jsonl", "not UTF-8"),
    ]:
        with pytest.raises(prompts.PromptError, match=msg) as err:
            prompts.resolve_prompt_source(spec)
        assert "\n" not in str(err.value)


def test_replay_scales_the_trace_to_the_points_rate():
    arrivals = [0.0, 1.0, 1.5, 4.0, 10.0]
    r = trace_replay.replay_schedule(arrivals, rate=2.0, n=4)  # the first 4: own rate 3 / 4 s
    assert r.own_rate == pytest.approx(0.75) and r.speedup == pytest.approx(2.0 / 0.75)
    assert r.times == pytest.approx([0.0, 0.375, 0.5625, 1.5])  # the trace's gaps / speed-up
    assert r.window_rate == pytest.approx(2.0)
    assert trace_replay.replay_schedule(arrivals, 2.0, n=4, duration_s=0.5).times == pytest.approx(
        [0.0, 0.375]
    )
    assert trace_replay.replay_schedule(arrivals, math.inf, n=3).times == [0.0, 0.0, 0.0]
    assert trace_replay.replay_schedule([3.0], 5.0, n=10).times == [0.0]
    with pytest.raises(ValueError, match="share one timestamp"):
        trace_replay.replay_schedule([2.0, 2.0, 2.0], 5.0, n=3)


def test_identity_follows_the_file_and_the_point_hash_the_rate(tmp_path):
    path = _write(tmp_path / "t.jsonl", MOONCAKE)

    def identity() -> str:
        records = [p.to_param() for p in prompts.resolve_prompt_source(f"trace:{path}")]
        return resume.attempt_identity({"config": "c", "prompt_sets": [f"trace:{path}"], "prompts": records})[
            "hash"
        ]

    before = identity()
    assert identity() == before
    path.write_text(path.read_text() + "\n")  # one more byte, the same requests: still another file
    assert identity() != before
    _write(path, [dict(MOONCAKE[0], output_length=501), *MOONCAKE[1:]])
    assert identity() != before
    a, b = (resume.level_points(before, None, r, 1, 0)[0]["hash"] for r in (2.0, 4.0))
    assert a != b  # the replay's speed is the point's rate, and the rate is in the point's hash


def test_a_trace_cannot_be_mixed_with_other_sets(tmp_path):
    trace = prompts.resolve_prompt_source(f"trace:{_write(tmp_path / 't.jsonl', MOONCAKE)}")
    spec = loadgen.BenchSpec(
        url="http://127.0.0.1:1",
        prompts=[*trace, prompts.Prompt("p", "chat", text="hi")],
        points=[loadgen.LoadPoint(request_rate=1.0)],
    )
    with pytest.raises(loadgen.LoadgenError, match="cannot be mixed with other prompt sets"):
        spec.validate()


def _replay(srv_url: str, trace: list, rate: float, n: int, **kw) -> loadgen.PointResult:
    spec = loadgen.BenchSpec(
        url=srv_url,
        prompts=trace,
        points=[loadgen.LoadPoint(request_rate=rate)],
        num_prompts=n,
        repeats=1,
        **kw,
    )
    return loadgen.run_campaign(spec).points[0]


@contextlib.contextmanager
def _null_server_process() -> Iterator[str]:
    """The null server in a process of its own, as a real server is: the client keeps its interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "sglbench.hostlib.nullserver", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["LISTENING"], line
        yield f"http://127.0.0.1:{line[1]}"
    finally:
        proc.kill()
        proc.wait()


def test_loopback_replay_keeps_the_schedule(tmp_path):
    """40 req/s for 3 s against the null server: every request in trace order at its scaled time, with its
    own output length, none sent before its time. How late the slowest ones go out is the machine's
    (benchmarks/trace_lateness.py measures the 5 ms p99 figure on a quiet machine; beside other work a
    descheduled client sends late): what is judged is the self-check's verdict, which never keeps a point
    valid whose lateness or achieved rate is off, and names the reason when it rejects one."""
    trace = prompts.resolve_prompt_source(f"trace:{_synthetic_trace(tmp_path / 't.jsonl', 200, 80.0)}")
    n, rate = 120, 40.0
    with _null_server_process() as url:
        pr = _replay(url, trace, rate, n, warmup=4)
    expected = trace_replay.replay_schedule([p.arrival_s for p in trace], rate, n)
    recs = sorted(pr.records, key=lambda r: r.idx)
    assert [r.prompt_id for r in recs] == [p.id for p in trace[:n]]
    assert [r.scheduled_s for r in recs] == pytest.approx(expected.times)
    assert [r.completion_tokens for r in recs] == [p.max_new_tokens for p in trace[:n]]
    # never ahead of the schedule (the event loop's timers do not fire early)
    early = [(r.idx, r.sent_s - r.scheduled_s) for r in recs if r.sent_s < r.scheduled_s - 1e-6]
    assert not early, early
    s = pr.summary
    assert s["n_ok"] == n and s["trace_replay"]["requests"] == n and s["trace_replay"]["rate"] == rate
    assert s["trace_replay"]["speedup"] == pytest.approx(expected.speedup)
    late = s["client"]["send_lateness_ms"]
    assert late["n"] == n
    achieved = s["client"]["achieved_rate"]
    off_schedule = []
    if late["p99"] > metrics.MAX_SEND_LATENESS_P99_MS:
        off_schedule.append("send lateness p99")
    if achieved < metrics.MIN_ACHIEVED_RATE_FRACTION * rate:
        off_schedule.append("achieved send rate")
    for reason in off_schedule:
        assert not s["valid"] and any(r.startswith(reason) for r in s["invalid_reasons"]), s[
            "invalid_reasons"
        ]
    if not s["valid"]:  # only the client's self-check may reject it
        assert set(s["invalid_reasons"]) <= set(s["client"]["reasons"]), s["invalid_reasons"]


def test_procs_deal_the_trace_schedule_out(tmp_path):
    trace = prompts.resolve_prompt_source(f"trace:{_synthetic_trace(tmp_path / 't.jsonl', 60, 50.0)}")
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        pr = _replay(srv.url, trace, 30.0, 40, warmup=2, procs=2)
    recs = sorted(pr.records, key=lambda r: r.idx)
    assert [r.prompt_id for r in recs] == [p.id for p in trace[:40]]
    expected = trace_replay.replay_schedule([p.arrival_s for p in trace], 30.0, 40).times
    assert [r.scheduled_s for r in recs] == pytest.approx(expected)


def test_a_late_client_invalidates_the_point(tmp_path, monkeypatch):
    """A client that cannot keep the trace's schedule (here: 12 ms of blocking work before every send) is
    flagged by the self-check, the point invalid with the lateness in its reasons."""
    trace = prompts.resolve_prompt_source(f"trace:{_synthetic_trace(tmp_path / 't.jsonl', 40, 20.0)}")
    build = loadgen_api.build_body

    def slow_build(*args, **kw):
        time.sleep(0.012)
        return build(*args, **kw)

    monkeypatch.setattr(loadgen_api, "build_body", slow_build)
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        pr = _replay(srv.url, trace, 50.0, 30, warmup=0)
    s = pr.summary
    assert s["client"]["send_lateness_ms"]["p99"] > 10.0
    assert not s["valid"] and any(r.startswith("send lateness p99") for r in s["invalid_reasons"])
