"""sglbench_prompt_bench: main() end to end against the null server on loopback."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import sglbench_prompt_bench

from sglbench.hostlib import nullserver, prompts, request_rows


@pytest.fixture(scope="module")
def server():
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=3, spec=True)) as srv:
        yield srv


def test_runs_points_and_writes_records(run_module, server, tmp_path):
    records = tmp_path / "out" / "requests.jsonl"
    params = [p.to_param() for p in prompts.load_shipped_set("code")[:4]]
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": params,
            "concurrency": [1, 2],
            "num_prompts": 4,
            "max_new_tokens": 9,
            "repeats": 1,
            "warmup": 1,
            "records_path": str(records),
        },
    )
    assert not done.failed, done.result
    summary = done.result["summary"]
    assert summary["schema"] == "sglbench.bench/1" and summary["simulated"] is True
    assert [p["concurrency"] for p in summary["points"]] == [1, 2]
    assert all(p["n_ok"] == 4 and p["accept_length_mean"] == pytest.approx(3.0) for p in summary["points"])
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == done.result["n_records"] == 8
    assert {r["category"] for r in rows} == {"code"}
    assert done.result["changed"] is False


def test_synthetic_prompts_and_plain_strings(run_module, server):
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "synthetic_input_len": 16,
            "concurrency": [2],
            "num_prompts": 3,
            "max_new_tokens": 4,
            "repeats": 2,
            "warmup": 0,
        },
    )
    assert not done.failed, done.result
    assert [p["repeat"] for p in done.result["summary"]["points"]] == [0, 1]
    assert done.result["records_path"] is None
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world"],
            "api": "openai-chat",
            "concurrency": [1],
            "num_prompts": 2,
            "max_new_tokens": 4,
            "repeats": 1,
            "warmup": 0,
        },
    )
    assert not done.failed, done.result
    assert done.result["summary"]["points"][0]["n_ok"] == 2


def test_check_mode_skips(run_module, server):
    done = run_module(sglbench_prompt_bench, {"url": server.url, "prompts": ["x"]}, check_mode=True)
    assert not done.failed and done.result["skipped"] is True


def test_failures_name_the_url_and_the_problem(run_module):
    done = run_module(
        sglbench_prompt_bench, {"url": "http://127.0.0.1:9", "prompts": ["x"], "concurrency": [1]}
    )
    assert done.failed
    assert "http://127.0.0.1:9" in done.result["msg"] and "cannot connect" in done.result["msg"]
    done = run_module(
        sglbench_prompt_bench, {"url": "http://127.0.0.1:9", "prompts": [{"id": 1}], "concurrency": [1]}
    )
    assert done.failed and "no 'prompt'" in done.result["msg"]
    done = run_module(
        sglbench_prompt_bench,
        {"url": "http://127.0.0.1:9", "prompts": ["x"], "concurrency": [1, 2], "request_rate": [1.0]},
    )
    assert done.failed and "single in-flight cap" in done.result["msg"]


def test_one_repeat_per_call_returns_its_rows(run_module, server):
    """The cycle's per-point call: repeats=1 from first_repeat, rows in the result, no host file."""
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world"],
            "concurrency": [1],
            "num_prompts": 2,
            "max_new_tokens": 4,
            "repeats": 1,
            "first_repeat": 1,
            "seed": 5,
            "warmup": 0,
            "return_records": True,
        },
    )
    assert not done.failed, done.result
    point = done.result["summary"]["points"][0]
    assert (point["repeat"], point["seed"]) == (1, 6)
    rows = done.result["records"]
    assert len(rows) == done.result["n_records"] == 2 and {r["repeat"] for r in rows} == {1}
    assert done.result["records_path"] is None


def test_procs_shards_the_point_over_client_processes(run_module, server, capfd):
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world", "again"],
            "concurrency": [2],
            "num_prompts": 5,
            "max_new_tokens": 6,
            "repeats": 1,
            "warmup": 2,
            "procs": 2,
            "return_records": True,
        },
    )
    assert not done.failed, done.result
    point = done.result["summary"]["points"][0]
    assert point["n_ok"] == 5 and point["client"]["procs"] == 2
    assert [p["n_requests"] for p in point["client"]["per_process"]] == [3, 2]
    assert done.result["summary"]["meta"]["procs"] == 2
    assert sorted(r["idx"] for r in done.result["records"]) == list(range(5))
    # stdout is the module's JSON result on the host: the client processes never write to it.
    assert capfd.readouterr().out == ""

    done = run_module(
        sglbench_prompt_bench,
        {"url": server.url, "prompts": ["x"], "concurrency": [1, 4], "num_prompts": 2, "procs": 2},
    )
    assert done.failed
    assert "procs = 2 is more than the concurrency 1 of point c1" in done.result["msg"]


def _ladder_args(server, spool_dir, **extra):
    params = [p.to_param() for p in prompts.load_shipped_set("math")[:4]]
    todo = [
        {"key": "c1-r0", "concurrency": 1, "request_rate": None, "repeat": 0},
        {"key": "c2-r1", "concurrency": 2, "request_rate": None, "repeat": 1},
    ]
    return {
        "url": server.url,
        "prompts": params,
        "points": todo,
        "num_prompts": 3,
        "max_new_tokens": 5,
        "warmup": 0,
        "procs": 2,
        "spool": {"dir": str(spool_dir), "hash": "h" * 64},
        **extra,
    }


def test_a_ladder_in_one_call_measures_each_point_alone_and_spools_it(run_module, server, tmp_path):
    spool = tmp_path / "spool"
    done = run_module(sglbench_prompt_bench, _ladder_args(server, spool))
    assert not done.failed, done.result
    pts = done.result["points"]
    assert [p["key"] for p in pts] == ["c1-r0", "c2-r1"] and not any(p["spooled"] for p in pts)
    assert [(p["summary"]["concurrency"], p["summary"]["repeat"], p["summary"]["seed"]) for p in pts] == [
        (1, 0, 0),
        (2, 1, 1),
    ]
    # procs 2 is capped at one client process per request slot on the c1 point
    assert [p["summary"]["client"]["procs"] for p in pts] == [1, 2]
    assert all(
        len(p["records"]) == 3 and {r["repeat"] for r in p["records"]} == {p["summary"]["repeat"]}
        for p in pts
    )
    assert done.result["meta"]["url"] == server.url and "failed_point" not in done.result
    assert sorted(x.name for x in spool.iterdir()) == ["c1-r0.json", "c2-r1.json"]


def test_packed_records_carry_the_rows_the_spool_keeps(run_module, server, tmp_path):
    spool = tmp_path / "spool"
    done = run_module(sglbench_prompt_bench, _ladder_args(server, spool, pack_records=True))
    assert not done.failed, done.result
    pts = done.result["points"]
    assert all("records" not in p for p in pts)
    for p in pts:
        text, rows = request_rows.unpack(p[request_rows.PACKED_KEY])
        kept = json.loads((spool / f"{p['key']}.json").read_text())["point"]["records"]
        assert rows == kept and p["n_records"] == len(rows) == 3
        assert text == request_rows.jsonl(kept)
    assert done.result["n_records"] == 6


def test_a_call_after_a_cut_one_returns_the_spooled_points_without_measuring_them(
    run_module, server, tmp_path
):
    spool = tmp_path / "spool"
    first = run_module(sglbench_prompt_bench, _ladder_args(server, spool)).result["points"]
    args = _ladder_args(server, spool)
    args["points"] = [
        *args["points"][1:],
        {"key": "c4-r0", "concurrency": 4, "request_rate": None, "repeat": 0},
    ]
    again = run_module(sglbench_prompt_bench, args)
    assert not again.failed, again.result
    pts = again.result["points"]
    assert [(p["key"], p["spooled"]) for p in pts] == [("c2-r1", True), ("c4-r0", False)]
    assert pts[0]["summary"] == first[1]["summary"] and pts[0]["records"] == first[1]["records"]
    # c1-r0 was not asked for again (committed): pruned; c4-r0 is kept until committed
    assert sorted(x.name for x in spool.iterdir()) == ["c2-r1.json", "c4-r0.json"]
    # another identity (the config changed): nothing spooled is returned
    other = _ladder_args(server, spool)
    other["spool"]["hash"] = "z" * 64
    assert not any(p["spooled"] for p in run_module(sglbench_prompt_bench, other).result["points"])


def test_a_point_that_fails_ends_the_call_and_the_points_before_it_are_returned(
    run_module, server, tmp_path, monkeypatch
):
    args = _ladder_args(server, tmp_path / "spool")
    args["points"].insert(1, {"key": "c1-r9", "concurrency": 1, "request_rate": None, "repeat": 9})
    real = sglbench_prompt_bench.run_campaign
    calls = []

    def flaky(spec, progress=None, hooks=None):
        calls.append(spec.first_repeat)
        if spec.first_repeat == 9:
            raise sglbench_prompt_bench.LoadgenError("cannot connect (injected)")
        return real(spec, progress, hooks=hooks)

    monkeypatch.setattr(sglbench_prompt_bench, "run_campaign", flaky)
    done = run_module(sglbench_prompt_bench, args)
    assert not done.failed, done.result
    assert [p["key"] for p in done.result["points"]] == ["c1-r0"] and calls == [0, 9]
    assert done.result["failed_point"]["key"] == "c1-r9"
    assert "cannot connect (injected)" in done.result["failed_point"]["msg"]


@pytest.mark.parametrize(
    ("points", "needle"),
    [
        ([{"concurrency": 1}], "points[0]"),
        ([{"key": "../x", "concurrency": 1}], "plain name"),
        ([{"key": "c0-r0"}], "neither concurrency nor request_rate"),
        ([{"key": "c1-r0", "concurrency": "many"}], "points[0]"),
    ],
)
def test_a_bad_point_fails_before_anything_is_sent(run_module, server, tmp_path, points, needle):
    args = _ladder_args(server, tmp_path / "spool")
    args["points"] = points
    done = run_module(sglbench_prompt_bench, args)
    assert done.failed and needle in done.result["msg"], done.result
    assert not (tmp_path / "spool").exists()


class _FakeLoad:
    """run_campaign/summary_of/record_rows stand-ins: point k (by first_repeat) gets n_ok/n_err from
    ``outcomes``; ``ended_after`` is the point after which the server's unit reports that it ended."""

    def __init__(self, outcomes, ended_after=None):
        self.outcomes, self.ended_after, self.ran = outcomes, ended_after, []

    def run_campaign(self, spec, progress=None, hooks=None):
        self.ran.append(spec.first_repeat)
        return spec.first_repeat

    def summary_of(self, result, lease):
        n_ok, n_err = self.outcomes[result]
        reasons = [f"{n_err} of {n_ok + n_err} requests failed, e.g. connection reset"] if n_err else []
        point = {"repeat": result, "n_ok": n_ok, "n_err": n_err, "invalid_reasons": reasons}
        return {"points": [point], "meta": {"url": "u"}}

    def ended(self, wait_s):
        return "sglang-x.service is failed/failed" if self.ran and self.ran[-1] >= self.ended_after else None


def _specs(n):
    from sglbench.hostlib.loadgen import BenchSpec, LoadPoint

    base = BenchSpec(url="http://127.0.0.1:1", prompts=[], points=[LoadPoint(concurrency=1)])
    return [(f"c1-r{r}", dataclasses.replace(base, first_repeat=r)) for r in range(n)]


def _measure(monkeypatch, fake, n, spool=None):
    monkeypatch.setattr(sglbench_prompt_bench, "run_campaign", fake.run_campaign)
    monkeypatch.setattr(sglbench_prompt_bench, "summary_of", fake.summary_of)
    monkeypatch.setattr(sglbench_prompt_bench, "record_rows", lambda result: [{"repeat": result}])
    return sglbench_prompt_bench.measure_points(_specs(n), spool or {}, None, fake.ended)


def test_a_point_whose_every_request_failed_as_the_server_died_is_a_failed_point(monkeypatch, tmp_path):
    fake = _FakeLoad({0: (4, 0), 1: (0, 4), 2: (4, 0)}, ended_after=1)
    spool = {"dir": str(tmp_path / "s"), "hash": "h"}
    out, _meta, failed = _measure(monkeypatch, fake, 3, spool)
    assert [p["key"] for p in out] == ["c1-r0"] and fake.ran == [0, 1]
    assert failed["key"] == "c1-r1" and failed["msg"].startswith(
        "the server exited during point c1-r1 (4 of 4"
    )
    assert "failed/failed" in failed["msg"]
    assert sorted(x.name for x in (tmp_path / "s").iterdir()) == ["c1-r0.json"]  # never spooled as measured


def test_a_point_measured_partly_before_the_server_died_is_kept_and_ends_the_call(monkeypatch):
    fake = _FakeLoad({0: (4, 0), 1: (2, 2), 2: (4, 0)}, ended_after=1)
    out, _meta, failed = _measure(monkeypatch, fake, 3)
    assert [(p["key"], p["summary"]["n_err"]) for p in out] == [("c1-r0", 0), ("c1-r1", 2)]
    assert failed == {
        "key": None,
        "msg": "the server exited during point c1-r1: sglang-x.service is failed/failed",
    }


def test_failed_requests_of_a_server_that_lives_on_are_a_measurement(monkeypatch):
    fake = _FakeLoad({0: (0, 4), 1: (4, 0)}, ended_after=99)
    out, _meta, failed = _measure(monkeypatch, fake, 2)
    assert [p["key"] for p in out] == ["c1-r0", "c1-r1"] and failed is None


def test_a_server_gone_before_a_point_fails_that_point_unmeasured(monkeypatch):
    fake = _FakeLoad({0: (4, 0), 1: (4, 0)}, ended_after=0)
    fake.ended = lambda wait_s: "sglang-x.service is inactive/dead" if fake.ran else None  # ends after c1-r0
    out, _meta, failed = _measure(monkeypatch, fake, 2)
    assert [p["key"] for p in out] == ["c1-r0"] and fake.ran == [0]
    assert failed == {
        "key": "c1-r1",
        "msg": "the server is gone before point c1-r1: sglang-x.service is inactive/dead",
    }


def test_a_spooled_copy_of_a_measurement_the_controller_has_had_is_measured_again(
    run_module, server, tmp_path
):
    spool = tmp_path / "spool"
    first = run_module(sglbench_prompt_bench, _ladder_args(server, spool)).result["points"]
    args = _ladder_args(server, spool)
    args["spool"]["seen"] = {"c2-r1": [first[1]["summary"]["t0_unix"], 1.0]}  # committed, then moved aside
    again = run_module(sglbench_prompt_bench, args).result["points"]
    assert [(p["key"], p["spooled"]) for p in again] == [("c1-r0", True), ("c2-r1", False)]
    assert again[1]["summary"]["t0_unix"] > first[1]["summary"]["t0_unix"]


FAKE_SMI = """#!{python}
import sys, time
args = sys.argv[1:]
ms = int(args[args.index("-lms") + 1])
gpus = args[args.index("-i") + 1].split(",")
while True:
    now = time.time()
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + ".%03d" % (int(now * 1000) % 1000)
    for g in gpus:
        print(f"{{stamp}}, {{g}}, 250.0, 90, 30, 50000, 2400, 60, 0x0000000000000000", flush=True)
    time.sleep(ms / 1000)
"""


@pytest.mark.parametrize("procs", [1, 2])
def test_telemetry_per_point_covers_its_window(run_module, server, tmp_path, procs):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable))
    smi.chmod(0o755)
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world", "again"],
            "concurrency": [2, 4],
            "num_prompts": 6,
            "max_new_tokens": 8,
            "repeats": 1,
            "warmup": 2,
            "procs": procs,
            "return_records": True,
            "telemetry": {
                "enabled": True,
                "gpus": [0, 3],
                "gpu_interval_ms": 20,
                "server_interval_ms": 50,
                "metrics": True,  # the null server has no /metrics: an error, not a failure
                "nvidia_smi": str(smi),
            },
        },
    )
    assert not done.failed, done.result
    points, docs = done.result["summary"]["points"], done.result["telemetry"]
    assert len(docs) == len(points) == 2
    for point, doc in zip(points, docs, strict=True):
        rows = [r for r in done.result["records"] if r["point"] == point["point"] and not r["warmup"]]
        window, sampling = doc["window"], doc["sampling"]
        assert window["start"] == pytest.approx(point["t0_unix"] + min(r["sent_s"] for r in rows))
        assert window["end"] == pytest.approx(point["t0_unix"] + max(r["end_s"] for r in rows))
        assert doc["clock"]["host_started"] <= sampling["started"] <= window["start"]
        assert window["end"] <= sampling["stopped"] <= doc["clock"]["host_ended"]
        times = {g: [r[0] for r in doc["gpu"]["rows"] if r[1] == g] for g in (0, 3)}
        assert all(ts and max(ts) >= window["end"] - 0.002 for ts in times.values())
        assert any("GET /metrics answered HTTP 404" in e for e in doc["errors"])


def test_telemetry_off_by_default_and_checked(run_module, server):
    args = {"url": server.url, "prompts": ["x"], "concurrency": [1], "num_prompts": 1, "repeats": 1}
    done = run_module(sglbench_prompt_bench, args)
    assert not done.failed and "telemetry" not in done.result
    done = run_module(sglbench_prompt_bench, {**args, "telemetry": {"enabled": True, "load_endpoint": "v1"}})
    assert done.failed and "load_endpoint" in done.result["msg"]


def test_a_ladder_call_returns_and_spools_each_points_telemetry(run_module, server, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable))
    smi.chmod(0o755)
    spool = tmp_path / "spool"
    telemetry = {"enabled": True, "gpus": [0], "gpu_interval_ms": 20, "nvidia_smi": str(smi)}
    done = run_module(sglbench_prompt_bench, _ladder_args(server, spool, telemetry=telemetry))
    assert not done.failed, done.result
    pts, clock = done.result["points"], done.result["clock"]
    assert clock["host_started"] < clock["host_ended"]
    for p in pts:
        doc, summary = p["telemetry"], p["summary"]
        assert doc["window"]["start"] >= summary["t0_unix"] and doc["window"]["end"] > doc["window"]["start"]
        assert (
            doc["sampling"]["started"]
            <= doc["window"]["start"]
            <= doc["window"]["end"]
            <= doc["sampling"]["stopped"]
        )
        assert any(r[1] == 0 for r in doc["gpu"]["rows"])
        # what sampling cost the point is not load
        assert summary["load_s"] >= summary["duration_s"] and doc["sampling"]["overhead_s"] >= 0
    # a point returned from the spool brings its telemetry along
    again = run_module(sglbench_prompt_bench, _ladder_args(server, spool, telemetry=telemetry)).result[
        "points"
    ]
    assert [p["spooled"] for p in again] == [True, True] and again[1]["telemetry"] == pts[1]["telemetry"]


def test_a_trace_reaches_the_host_as_records_and_is_replayed_at_the_points_rate(run_module, server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 1000 + 100 * i, "input_length": 300 + i, "output_length": 3 + i % 4, "hash_ids": [7, i]}
        for i in range(12)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # As the playbook passes them: records read on the controller, JSON on their way to the module.
    params = json.loads(json.dumps([p.to_param() for p in prompts.resolve_prompt_source(f"trace:{trace}")]))
    records = tmp_path / "requests.jsonl"
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": params,
            "request_rate": [40.0],
            "num_prompts": 10,
            "repeats": 1,
            "warmup": 0,
            "records_path": str(records),
        },
    )
    assert not done.failed, done.result
    (point,) = done.result["summary"]["points"]
    assert point["n_ok"] == 10 and point["trace_replay"]["speedup"] == pytest.approx(4.0)  # 10 req/s own
    got = sorted((json.loads(line) for line in records.read_text().splitlines()), key=lambda r: r["idx"])
    assert [r["completion_tokens"] for r in got] == [3 + i % 4 for i in range(10)]
    assert [r["scheduled_s"] for r in got] == pytest.approx([0.025 * i for i in range(10)])
