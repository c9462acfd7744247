"""Load shapes and end-to-end runs against the null server on loopback.

Structure and counts only: wall-clock values are never asserted (timing exactness is tested on
constructed records in test_metrics.py)."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import time

import pytest

from sglbench.hostlib import loadgen, nullserver, prompts


def test_concurrency_ladder():
    assert loadgen.concurrency_ladder(1) == [1]
    assert loadgen.concurrency_ladder(16) == [1, 2, 4, 8, 16]
    assert loadgen.concurrency_ladder(48) == [1, 2, 4, 8, 16, 32, 48]
    with pytest.raises(loadgen.LoadgenError):
        loadgen.concurrency_ladder(0)


def test_poisson_schedule_is_seeded_absolute_and_bounded():
    a = loadgen.poisson_schedule(10.0, 2000, seed=3)
    assert a == loadgen.poisson_schedule(10.0, 2000, seed=3)
    assert a != loadgen.poisson_schedule(10.0, 2000, seed=4)
    assert a[0] == 0.0 and all(x < y for x, y in itertools.pairwise(a))
    mean_gap = a[-1] / (len(a) - 1)
    assert 0.08 < mean_gap < 0.12  # mean of 1999 exponential gaps of mean 0.1 s
    assert loadgen.poisson_schedule(float("inf"), 3, seed=0) == [0.0, 0.0, 0.0]
    bounded = loadgen.poisson_schedule(10.0, 10**9, seed=3, duration_s=5.0)
    assert bounded[-1] < 5.0 and len(bounded) == sum(1 for t in a if t < 5.0)


def test_server_info_helpers():
    info = {
        "dp_size": 2,
        "max_running_requests": 48,
        "internal_states": [{"effective_max_running_requests_per_dp": 11, "avg_spec_accept_length": 3.5}],
    }
    assert loadgen.effective_max_running_requests(info) == 22
    assert loadgen.effective_max_running_requests({"max_running_requests": 48}) == 48
    assert loadgen.effective_max_running_requests({}) is None
    assert loadgen.server_accept_length(info) == 3.5
    assert loadgen.server_accept_length({"internal_states": [{}]}) is None
    assert loadgen.is_simulated({"sglbench_null_server": True})
    assert loadgen.is_simulated({}, {"simulated": True})
    assert not loadgen.is_simulated({"version": "0.5.9"}, None)


def test_spec_validation_names_the_problem():
    base = {"url": "http://127.0.0.1:1", "prompts": [prompts.Prompt("a", "c", text="x")]}
    cases = [
        ({"points": []}, "no load points"),
        ({"points": [loadgen.LoadPoint(concurrency=0)]}, "concurrency must be"),
        ({"points": [loadgen.LoadPoint(request_rate=-1.0)]}, "request rate"),
        (
            {"points": [loadgen.LoadPoint(request_rate=float("inf"))], "num_prompts": 10**9},
            "needs a request count",
        ),
        ({"points": [loadgen.LoadPoint(concurrency=1)], "api": "grpc"}, "api must be"),
        ({"points": [loadgen.LoadPoint(concurrency=1)], "url": "127.0.0.1:1"}, "bad server URL"),
        (
            {
                "points": [loadgen.LoadPoint(concurrency=1)],
                "api": "openai-chat",
                "prompts": prompts.synthetic_prompts(1, 4, 0),
            },
            "chat/completions",
        ),
    ]
    for extra, msg in cases:
        with pytest.raises(loadgen.LoadgenError, match=msg):
            loadgen.BenchSpec(**{**base, **extra}).validate()


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        ({"duration_s": float("nan")}, "duration must be a number of seconds"),
        ({"duration_s": float("inf")}, "duration must be a number of seconds"),
        ({"request_timeout_s": float("nan")}, "request timeout must be"),
        ({"request_timeout_s": 0.0}, "request timeout must be"),
        ({"sampling": loadgen.SamplingSpec(temperature=float("nan"))}, "temperature must be a finite"),
        ({"slo": loadgen.metrics_mod.Slo(ttft_ms=float("nan"))}, "SLO ttft_ms must be a finite"),
        ({"points": [loadgen.LoadPoint(request_rate=float("nan"))]}, "request rate must be > 0"),
        ({"points": [loadgen.LoadPoint(concurrency=10**9)]}, "concurrency must be from 1 to 100000"),
        ({"warmup": 10**9}, "warmup must be from 0 to 100000"),
        ({"points": [loadgen.LoadPoint(request_rate=1e9)], "num_prompts": 10**12}, "more than 10000000"),
        ({"max_error_rate": float("nan")}, "max_error_rate is the largest fraction"),
        ({"max_error_rate": 2.0}, "max_error_rate is the largest fraction"),
    ],
)
def test_spec_refuses_non_finite_and_huge_inputs(extra, msg):
    """NaN/inf/huge inputs (the module gets them from inventories) fail validation instead of
    hanging (a NaN duration never ends) or allocating (a 10^12-entry Poisson schedule)."""
    base = {"url": "http://127.0.0.1:1", "prompts": [prompts.Prompt("p", "c", text="x")]}
    spec = {"points": [loadgen.LoadPoint(concurrency=1)], **base, **extra}
    with pytest.raises(loadgen.LoadgenError, match=msg):
        loadgen.BenchSpec(**spec).validate()


def test_synthetic_prompts_are_bounded_before_they_are_built():
    with pytest.raises(prompts.PromptError, match="more than 1048576 tokens"):
        prompts.synthetic_prompts(1, 10**11, 0)
    with pytest.raises(prompts.PromptError, match="use fewer prompts"):
        prompts.synthetic_prompts(64, 1 << 20, 0)  # 67M token ids
    with pytest.raises(prompts.PromptError, match="more than 1048576 tokens"):
        prompts.resolve_prompt_source("synthetic:99999999999999")
    # the same ids as before the bound (campaign identities depend on them)
    assert prompts.synthetic_prompts(2, 3, 7)[1].input_ids == (22329, 2582, 3373)


@pytest.mark.parametrize(
    ("api", "k", "framing"),
    [
        ("native", 1, "chunked"),
        ("native", 4, "chunked"),
        ("openai", 3, "chunked"),
        ("openai-chat", 2, "close"),
    ],
)
def test_closed_loop_end_to_end_counts(api, k, framing):
    T = 10
    cfg = nullserver.NullServerConfig(chunk_tokens=k, spec=True, framing=framing)
    plist = (
        [prompts.Prompt(f"c{i}", "chat", text=f"hi there {i}") for i in range(3)]
        if api == "openai-chat"
        else prompts.synthetic_prompts(3, 7, seed=0)
    )
    with nullserver.NullServerThread(cfg) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            api=api,
            prompts=plist,
            points=[loadgen.LoadPoint(concurrency=1), loadgen.LoadPoint(concurrency=4)],
            sampling=loadgen.SamplingSpec(max_new_tokens=T, ignore_eos=True),
            num_prompts=9,
            repeats=2,
            warmup=2,
            seed=5,
        )
        result = loadgen.run_campaign(spec)
        flushes = srv.state.flushes
        served = srv.state.requests
    assert [(p.point.concurrency, p.repeat, p.seed) for p in result.points] == [
        (1, 0, 5),
        (1, 1, 6),
        (4, 0, 5),
        (4, 1, 6),
    ]
    assert flushes == 2 * len(result.points)  # before warmup and before the measured run
    assert served == len(result.points) * (9 + 2)  # measured + warmup
    steps = math.ceil(T / k)
    for pr in result.points:
        s = pr.summary
        assert (s["n_requests"], s["n_ok"], s["n_err"]) == (9, 9, 0)
        assert s["total_output_tokens"] == 9 * T
        assert s["total_chunks"] == 9 * steps
        assert s["itl_ms"]["n"] == 9 * (T - min(k, T))
        assert s["icl_ms"]["n"] == 9 * (steps - 1)
        assert s["simulated"] is True
        assert s["token_source"] == {"server": 9}
        assert s["finish_reasons"] == {"length": 9}
        for rec in pr.records:
            assert not rec.warmup and rec.error is None
            assert rec.chunk_tokens[-1] == T and len(rec.chunk_tokens) == steps
            assert rec.sent_s is not None and rec.first_byte_s is not None and rec.end_s is not None
            assert (
                rec.scheduled_s
                <= rec.ready_s
                <= rec.sent_s
                <= rec.first_byte_s
                <= rec.chunk_t[0]
                <= rec.end_s
            )
            assert rec.chunk_t == sorted(rec.chunk_t)
        if api == "native":
            assert s["accept_length_mean"] == pytest.approx(T / steps)
            assert s["server_avg_spec_accept_length"] == pytest.approx(T / steps)
            assert s["accept_length_vs_server_counter"] == pytest.approx(0.0)
        else:  # no acceptance fields on the OpenAI routes
            assert s["accept_length_mean"] is None
    # The same seed sends the same prompts in the same order at every point.
    order = [[r.prompt_id for r in sorted(p.records, key=lambda r: r.idx)] for p in result.points]
    assert order[0] == order[2] and order[1] == order[3] and order[0] != order[1]
    assert result.meta["connections_opened"] <= (4 if framing == "chunked" else 10**6)


def test_open_loop_rate_with_cap_and_duration_bound():
    cfg = nullserver.NullServerConfig(chunk_tokens=2)
    with nullserver.NullServerThread(cfg) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.synthetic_prompts(2, 4, 0),
            points=[loadgen.LoadPoint(concurrency=2, request_rate=200.0)],
            sampling=loadgen.SamplingSpec(max_new_tokens=4),
            num_prompts=10**6,
            duration_s=0.2,
            repeats=1,
            warmup=0,
            flush_cache=False,
        )
        result = loadgen.run_campaign(spec)
        assert srv.state.flushes == 0
    pr = result.points[0]
    sched = loadgen.poisson_schedule(200.0, 10**6, pr.seed, 0.2)
    assert [r.scheduled_s for r in sorted(pr.records, key=lambda r: r.idx)] == sched
    assert pr.summary["n_ok"] == len(sched)
    assert pr.summary["client"]["target_rate"] == 200.0
    assert all(r.ready_s >= r.scheduled_s for r in pr.records)


def test_duration_bound_closed_loop_stops_sending():
    cfg = nullserver.NullServerConfig(chunk_tokens=1, ttft_s=0.01)
    with nullserver.NullServerThread(cfg) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.synthetic_prompts(2, 4, 0),
            points=[loadgen.LoadPoint(concurrency=2)],
            sampling=loadgen.SamplingSpec(max_new_tokens=2),
            num_prompts=10**9,
            duration_s=0.15,
            repeats=1,
            warmup=0,
        )
        result = loadgen.run_campaign(spec)
    recs = result.points[0].records
    assert 2 <= len(recs) < 10**3
    # every send was decided before the deadline, so what it waited for (the answer before) came before
    # it; when the send itself goes out is the machine's
    assert all(r.sent_s is not None and r.ready_s < 0.15 for r in recs)


def test_wrong_api_key_is_recorded_per_request_not_raised():
    cfg = nullserver.NullServerConfig(api_key="right")
    with nullserver.NullServerThread(cfg) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.synthetic_prompts(1, 4, 0),
            points=[loadgen.LoadPoint(concurrency=1)],
            num_prompts=3,
            repeats=1,
            warmup=0,
            api_key="wrong",
        )
        result = loadgen.run_campaign(spec)
    s = result.points[0].summary
    assert (s["n_ok"], s["n_err"]) == (0, 3)
    assert s["valid"] is False
    assert any("HTTP 401" in e and "api-key-file" in e for e in s["errors"])


def test_unreachable_server_raises_loadgen_error():
    spec = loadgen.BenchSpec(
        url="http://127.0.0.1:9",
        prompts=prompts.synthetic_prompts(1, 4, 0),
        points=[loadgen.LoadPoint(concurrency=1)],
        num_prompts=1,
        repeats=1,
    )
    with pytest.raises(loadgen.LoadgenError, match="cannot connect"):
        loadgen.run_campaign(spec)


def test_record_rows_are_flat_and_tagged():
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.synthetic_prompts(1, 4, 0),
            points=[loadgen.LoadPoint(concurrency=1)],
            num_prompts=2,
            repeats=1,
            warmup=0,
            sampling=loadgen.SamplingSpec(max_new_tokens=3),
        )
        result = loadgen.run_campaign(spec)
    rows = loadgen.record_rows(result)
    assert len(rows) == 2
    assert {
        "point",
        "concurrency",
        "repeat",
        "seed",
        "t0_unix",
        "simulated",
        "chunk_t",
        "chunk_tokens",
        "scheduled_s",
        "sent_s",
        "first_byte_s",
        "end_s",
        "prompt_tokens",
        "completion_tokens",
        "token_source",
        "spec_verify_ct",
        "finish_reason",
        "error",
    } <= set(rows[0])
    assert rows[0]["point"] == "c1" and rows[0]["simulated"] is True
    loadgen.dumps_compact(rows)  # JSON-serialisable, no NaN


def test_burst_rate_inf_is_all_at_once_and_json_safe():
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.synthetic_prompts(2, 4, 0),
            points=[loadgen.LoadPoint(concurrency=2, request_rate=float("inf"))],
            sampling=loadgen.SamplingSpec(max_new_tokens=2),
            num_prompts=6,
            repeats=1,
            warmup=0,
        )
        result = loadgen.run_campaign(spec)
    pr = result.points[0]
    assert [r.scheduled_s for r in pr.records] == [0.0] * 6
    assert pr.summary["request_rate"] == "inf" and pr.summary["client"]["target_rate"] == "inf"
    # Four of the six waited for one of the 2 slots: that is queue time (ready > scheduled), not lateness.
    assert sum(1 for r in pr.records if r.ready_s > r.scheduled_s) >= 4
    loadgen.dumps_compact(loadgen.campaign_summary(result))
    loadgen.dumps_compact(loadgen.record_rows(result))


def test_first_repeat_labels_and_seeds_like_the_full_campaign():
    """One repeat per call (the playbook's points) gives the same repeat index, seed and prompts."""
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:

        def run(repeats, first):
            spec = loadgen.BenchSpec(
                url=srv.url,
                prompts=prompts.synthetic_prompts(5, 4, 0),
                points=[loadgen.LoadPoint(concurrency=1)],
                num_prompts=3,
                repeats=repeats,
                first_repeat=first,
                seed=7,
                warmup=0,
                sampling=loadgen.SamplingSpec(max_new_tokens=2),
            )
            return loadgen.record_rows(loadgen.run_campaign(spec))

        full = [r for r in run(2, 0) if r["repeat"] == 1]
        one = run(1, 1)
    assert {(r["repeat"], r["seed"]) for r in one} == {(1, 8)}
    assert [r["prompt_id"] for r in one] == [r["prompt_id"] for r in full]
    with pytest.raises(loadgen.LoadgenError, match="first_repeat"):
        loadgen.BenchSpec(
            url="http://127.0.0.1:1",
            prompts=prompts.synthetic_prompts(1, 4, 0),
            points=[loadgen.LoadPoint(concurrency=1)],
            first_repeat=-1,
        ).validate()


# -- several client processes (BenchSpec.procs > 1) ---------------------------------------------------
def _procs_spec(url, procs, **kw):
    base = {
        "url": url,
        "prompts": prompts.synthetic_prompts(5, 4, 0),
        "points": [loadgen.LoadPoint(concurrency=4)],
        "sampling": loadgen.SamplingSpec(max_new_tokens=6, ignore_eos=True),
        "num_prompts": 11,
        "repeats": 1,
        "warmup": 3,
        "seed": 3,
        "procs": procs,
    }
    return loadgen.BenchSpec(**{**base, **kw})


def test_split_evenly():
    assert loadgen.split_evenly(10, 4) == [3, 3, 2, 2]
    assert loadgen.split_evenly(2, 2) == [1, 1]
    assert loadgen.split_evenly(0, 3) == [0, 0, 0]


@pytest.mark.parametrize("procs", [2, 3])
def test_procs_closed_loop_sends_the_same_requests_as_one_process(procs):
    cfg = nullserver.NullServerConfig(chunk_tokens=2, spec=True)
    with nullserver.NullServerThread(cfg) as srv:
        single = loadgen.run_campaign(_procs_spec(srv.url, 1))
        before = (srv.state.flushes, srv.state.requests)
        multi = loadgen.run_campaign(_procs_spec(srv.url, procs))
        flushes, served = srv.state.flushes - before[0], srv.state.requests - before[1]
    one, many = single.points[0], multi.points[0]
    assert flushes == 2  # the parent flushes before the warmup and before the measured run, once each
    assert served == 11 + 3  # every measured request once, the warmup split over the processes
    assert [r.idx for r in many.records] == list(range(11))  # merged, sorted by idx, none twice
    assert [(r.idx, r.prompt_id) for r in many.records] == [(r.idx, r.prompt_id) for r in one.records]
    s = many.summary
    assert (s["n_requests"], s["n_ok"], s["n_err"]) == (11, 11, 0)
    assert s["total_output_tokens"] == 11 * 6 and s["total_chunks"] == 11 * 3
    assert s["accept_length_mean"] == pytest.approx(2.0)
    assert s["concurrency"] == 4 and s["warmup_requests"] == 3
    # Every record's times are relative to the one common t0.
    for rec in many.records:
        assert not rec.warmup and rec.error is None
        assert 0.0 <= rec.ready_s <= rec.sent_s <= rec.chunk_t[0] <= rec.end_s < 60.0
    # The first request of every worker was due at t0 exactly: 4 workers over the processes.
    assert sum(1 for r in many.records if r.ready_s == 0.0) == 4
    c = s["client"]
    assert c["procs"] == procs and [p["proc"] for p in c["per_process"]] == list(range(procs))
    shares = [len(range(k, 11, procs)) for k in range(procs)]
    assert [p["n_requests"] for p in c["per_process"]] == [p["n_sent"] for p in c["per_process"]] == shares
    assert c["cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in c["per_process"]))
    assert c["cpu_fraction"] == max(p["cpu_fraction"] for p in c["per_process"])
    assert c["wall_s"] == max(p["wall_s"] for p in c["per_process"])
    assert multi.meta["procs"] == procs and one.summary["client"]["procs"] == 1
    assert multi.meta["connections_opened"] >= 1 + 4  # the parent's admin connection + one per worker
    loadgen.dumps_compact(loadgen.campaign_summary(multi))


def test_procs_open_loop_keeps_the_single_process_schedule():
    cfg = nullserver.NullServerConfig(chunk_tokens=2)
    with nullserver.NullServerThread(cfg) as srv:
        for cap in (None, 2):
            spec = _procs_spec(
                srv.url,
                2,
                points=[loadgen.LoadPoint(concurrency=cap, request_rate=200.0)],
                num_prompts=10**6,
                duration_s=0.2,
                warmup=0,
                flush_cache=False,
            )
            pr = loadgen.run_campaign(spec).points[0]
            sched = loadgen.poisson_schedule(200.0, 10**6, pr.seed, 0.2)
            assert [r.scheduled_s for r in pr.records] == sched
            assert [r.idx for r in pr.records] == list(range(len(sched)))
            prompt_ids = [p.id for p in prompts.select_prompts(spec.prompts, len(sched), pr.seed)]
            assert [r.prompt_id for r in pr.records] == prompt_ids
            assert all(r.ready_s >= r.scheduled_s for r in pr.records)
            s = pr.summary
            assert s["n_ok"] == len(sched) and s["client"]["procs"] == 2
            assert s["client"]["target_rate"] == 200.0
            # Process k sent requests k, k+2, ...: its share of the one schedule.
            assert [p["n_sent"] for p in s["client"]["per_process"]] == [
                len(sched[0::2]),
                len(sched[1::2]),
            ]


def test_procs_duration_bound_applies_to_every_process():
    cfg = nullserver.NullServerConfig(chunk_tokens=1, ttft_s=0.01)
    with nullserver.NullServerThread(cfg) as srv:
        spec = _procs_spec(
            srv.url,
            2,
            num_prompts=10**9,
            duration_s=0.15,
            warmup=0,
            points=[loadgen.LoadPoint(concurrency=2)],
        )
        pr = loadgen.run_campaign(spec).points[0]
    assert 2 <= len(pr.records) < 10**3
    assert all(r.sent_s is not None and r.ready_s < 0.15 for r in pr.records)  # decided before the deadline
    assert {r.idx % 2 for r in pr.records} == {0, 1}  # both processes sent
    assert len({r.idx for r in pr.records}) == len(pr.records)


def test_procs_failing_child_fails_the_point_and_names_it(monkeypatch):
    original = loadgen.LoadRunner._shard_measure

    async def boom(self, shard, t0, model):
        if shard.k == 1:
            raise RuntimeError("boom in the shard")
        return await original(self, shard, t0, model)

    monkeypatch.setattr(loadgen.LoadRunner, "_shard_measure", boom)
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        t = time.monotonic()
        with pytest.raises(loadgen.LoadgenError) as err:
            loadgen.run_campaign(_procs_spec(srv.url, 2))
    msg = str(err.value)
    assert "client process 1 of 2" in msg and "measured run of point c4 repeat 0" in msg
    assert "RuntimeError: boom in the shard" in msg
    assert time.monotonic() - t < 20


def test_procs_child_that_dies_or_hangs_fails_the_point(monkeypatch):
    original = loadgen.LoadRunner._shard_measure

    async def die(self, shard, t0, model):
        if shard.k == 0:
            os._exit(7)
        return await original(self, shard, t0, model)

    monkeypatch.setattr(loadgen.LoadRunner, "_shard_measure", die)
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        with pytest.raises(
            loadgen.LoadgenError, match=r"client process 0 of 2 \(pid \d+\) exited with status 7"
        ):
            loadgen.run_campaign(_procs_spec(srv.url, 2))

        async def hang(self, shard, t0, model):
            await asyncio.sleep(3600)

        monkeypatch.setattr(loadgen.LoadRunner, "_shard_measure", hang)
        monkeypatch.setattr(loadgen._Shard, "time_bound_s", lambda self, spec, connect_s: (10.0, 0.5))
        t = time.monotonic()
        with pytest.raises(
            loadgen.LoadgenError,
            match=r"client processes 0 \(pid \d+\), 1 \(pid \d+\) of 2 did not finish the measured run",
        ):
            loadgen.run_campaign(_procs_spec(srv.url, 2))
        assert time.monotonic() - t < 20
    with pytest.raises(ChildProcessError):  # every client process was reaped, none left behind
        os.waitpid(-1, os.WNOHANG)


def test_procs_time_bound_follows_timeouts_counts_and_duration():
    spec = _procs_spec("http://127.0.0.1:1", 2, request_timeout_s=5.0)
    shard = loadgen._Shard(0, 2, [], 1, [], n=6, concurrency=2, schedule=None)
    per = 5.0 + 2 * 10.0
    assert shard.time_bound_s(spec, 10.0) == (loadgen.CHILD_SLACK_S, 3 * per + loadgen.CHILD_SLACK_S)
    spec.duration_s = 1.0
    assert shard.time_bound_s(spec, 10.0)[1] == 1.0 + per + loadgen.CHILD_SLACK_S
    rate = loadgen._Shard(
        0, 2, prompts.synthetic_prompts(3, 4, 0), 2, [], n=3, concurrency=1, schedule=[0, 2.5]
    )
    assert rate.time_bound_s(spec, 10.0) == (
        2 * per + loadgen.CHILD_SLACK_S,
        2.5 + 2 * per + loadgen.CHILD_SLACK_S,
    )


def test_procs_validation_names_the_field_and_the_fix():
    url = "http://127.0.0.1:1"
    for bad in (0, 65, True, 2.0):
        with pytest.raises(loadgen.LoadgenError, match=r"procs .* must be an integer from 1 to 64"):
            _procs_spec(url, bad).validate()
    with pytest.raises(
        loadgen.LoadgenError, match=r"procs = 3 is more than the concurrency 2 of point c2.*lower procs to 2"
    ):
        _procs_spec(
            url, 3, points=[loadgen.LoadPoint(concurrency=4), loadgen.LoadPoint(concurrency=2)]
        ).validate()
    with pytest.raises(loadgen.LoadgenError, match=r"in-flight cap \(concurrency\) 2 of point r5-c2"):
        _procs_spec(url, 3, points=[loadgen.LoadPoint(concurrency=2, request_rate=5.0)]).validate()
    _procs_spec(url, 3, points=[loadgen.LoadPoint(request_rate=5.0)]).validate()  # no cap: any procs
    _procs_spec(url, 64, points=[loadgen.LoadPoint(concurrency=64)]).validate()
