"""Metric definitions on constructed records: every expected value follows from the construction."""

from __future__ import annotations

import math

import pytest

from sglbench.hostlib import metrics


def stream_record(
    *,
    sent: float,
    ttft: float,
    gap: float,
    n_tokens: int,
    k: int,
    tail: float = 0.0,
    spec: bool = False,
    prompt_tokens: int = 10,
    scheduled: float | None = None,
) -> dict:
    """A request whose first chunk arrives ``ttft`` after ``sent`` and then one chunk of ``k`` tokens
    every ``gap`` seconds (the last chunk may be shorter); the stream ends ``tail`` after the last chunk."""
    steps = math.ceil(n_tokens / k)
    chunk_t = [sent + ttft + i * gap for i in range(steps)]
    chunk_tokens = [min(n_tokens, (i + 1) * k) for i in range(steps)]
    rec = {
        "warmup": False,
        "scheduled_s": sent if scheduled is None else scheduled,
        "ready_s": sent,
        "sent_s": sent,
        "end_s": chunk_t[-1] + tail,
        "chunk_t": chunk_t,
        "chunk_tokens": chunk_tokens,
        "completion_tokens": n_tokens,
        "prompt_tokens": prompt_tokens,
        "error": None,
        "token_source": "server",
        "finish_reason": "length",
    }
    if spec:
        rec["spec_verify_ct"] = steps
        rec["spec_accept_length"] = n_tokens / steps
    return rec


def test_percentile_matches_linear_interpolation():
    vals = [1.0, 2.0, 3.0, 4.0]
    assert metrics.percentile(vals, 0) == 1.0
    assert metrics.percentile(vals, 100) == 4.0
    assert metrics.percentile(vals, 50) == pytest.approx(2.5)
    assert metrics.percentile(vals, 90) == pytest.approx(3.7)  # numpy: 1 + 0.9 * 3 = 3.7 -> 3.7
    assert metrics.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        metrics.percentile([], 50)


def test_distribution_scales_and_handles_empty():
    d = metrics.distribution([0.001, 0.003], 1000.0)
    assert d["mean"] == pytest.approx(2.0)
    assert d["p50"] == pytest.approx(2.0)
    assert d["n"] == 2
    empty = metrics.distribution([])
    assert empty["p50"] is None and empty["mean"] is None and empty["n"] == 0


def test_one_token_chunks_exact():
    rec = stream_record(sent=1.0, ttft=0.05, gap=0.01, n_tokens=11, k=1)
    m = metrics.request_metrics(rec)
    assert m.ttft_s == pytest.approx(0.05)
    assert m.e2e_s == pytest.approx(0.05 + 10 * 0.01)
    assert m.tpot_s == pytest.approx(0.01)
    assert m.itl_s == pytest.approx([0.01] * 10)
    assert m.icl_s == pytest.approx([0.01] * 10)
    assert m.decode_tok_s == pytest.approx(100.0)
    assert m.output_tokens == 11
    assert m.accept_length is None


def test_k_token_chunks_spread_each_gap_over_its_tokens():
    # 4 tokens per chunk every 20 ms: 13 tokens -> chunks of 4, 4, 4, 1.
    rec = stream_record(sent=0.0, ttft=0.1, gap=0.02, n_tokens=13, k=4, spec=True)
    m = metrics.request_metrics(rec)
    assert m.ttft_s == pytest.approx(0.1)
    assert m.icl_s == pytest.approx([0.02, 0.02, 0.02])
    # Gaps carried 4, 4 and 1 tokens: 4 x 5 ms, 4 x 5 ms, 1 x 20 ms.
    assert m.itl_s == pytest.approx([0.005] * 8 + [0.02])
    assert len(m.itl_s) == 13 - 4  # every token after the first chunk gets one ITL value
    assert m.tpot_s == pytest.approx((0.06) / 12)
    assert m.decode_tok_s == pytest.approx(9 / 0.06)
    assert m.accept_length == pytest.approx(13 / 4)
    assert m.server_accept_length == pytest.approx(13 / 4)


def test_events_without_new_tokens_do_not_split_a_gap():
    rec = stream_record(sent=0.0, ttft=0.01, gap=0.01, n_tokens=3, k=1)
    # An extra event with no new tokens (e.g. an OpenAI usage-only chunk) between token chunks 1 and 2.
    rec["chunk_t"] = [0.01, 0.015, 0.02, 0.03]
    rec["chunk_tokens"] = [1, 1, 2, 3]
    m = metrics.request_metrics(rec)
    assert m.icl_s == pytest.approx([0.01, 0.01])
    assert m.itl_s == pytest.approx([0.01, 0.01])


def test_queue_and_lateness_are_separate():
    rec = stream_record(sent=0.5, ttft=0.01, gap=0.01, n_tokens=2, k=1, scheduled=0.2)
    rec["ready_s"] = 0.45  # waited 250 ms for a slot, then the client took 50 ms to send
    m = metrics.request_metrics(rec)
    assert m.queue_s == pytest.approx(0.25)
    assert m.lateness_s == pytest.approx(0.05)


def test_summarize_point_throughput_and_acceptance():
    # Two requests, 10 and 20 tokens in chunks of 2 (accept length 2), window 0.0 -> 1.0 s.
    a = stream_record(sent=0.0, ttft=0.1, gap=0.1, n_tokens=10, k=2, spec=True, tail=0.1)  # ends 0.6
    b = stream_record(sent=0.1, ttft=0.1, gap=0.08, n_tokens=20, k=2, spec=True, tail=0.08)  # ends 1.0
    warm = stream_record(sent=-5.0, ttft=0.1, gap=0.1, n_tokens=100, k=1)
    warm["warmup"] = True
    s = metrics.summarize_point([warm, a, b], server_accept_length=2.0)
    assert s["n_requests"] == 2 and s["n_ok"] == 2 and s["n_err"] == 0
    assert s["duration_s"] == pytest.approx(1.0)
    assert s["output_throughput_tok_s"] == pytest.approx(30.0)
    assert s["request_throughput"] == pytest.approx(2.0)
    assert s["input_throughput_tok_s"] == pytest.approx(20.0)
    assert s["total_chunks"] == 5 + 10
    assert s["chunk_throughput"] == pytest.approx(15.0)
    assert s["accept_length_mean"] == pytest.approx(2.0)
    assert s["accept_length_token_weighted"] == pytest.approx(2.0)
    assert s["accept_length_vs_server_counter"] == pytest.approx(0.0)
    assert s["accept_length_server_mismatch_max"] == pytest.approx(0.0)
    assert s["ttft_ms"]["p50"] == pytest.approx(100.0)
    # ITL: a has 4 gaps of 100 ms over 2 tokens each (8 x 50 ms); b has 9 gaps of 80 ms (18 x 40 ms).
    assert s["itl_ms"]["n"] == 8 + 18
    assert s["itl_ms"]["mean"] == pytest.approx((8 * 50 + 18 * 40) / 26)
    assert s["icl_ms"]["n"] == 4 + 9
    assert s["mean_concurrency"] == pytest.approx((0.6 + 0.9) / 1.0)
    assert s["valid"] is True


def test_failed_requests_count_as_errors_and_not_in_latency():
    ok = stream_record(sent=0.0, ttft=0.1, gap=0.1, n_tokens=3, k=1)
    bad = {
        "warmup": False,
        "scheduled_s": 0.0,
        "ready_s": 0.0,
        "sent_s": 0.0,
        "end_s": None,
        "chunk_t": [],
        "chunk_tokens": [],
        "error": "HTTP 500: boom",
    }
    s = metrics.summarize_point([ok, bad])
    assert (s["n_ok"], s["n_err"]) == (1, 1)
    assert s["errors"] == {"HTTP 500: boom": 1}
    assert s["ttft_ms"]["n"] == 1


def test_all_failed_point_is_invalid():
    bad = {"warmup": False, "sent_s": 0.0, "end_s": None, "error": "connection refused"}
    s = metrics.summarize_point([bad])
    assert s["valid"] is False
    assert "no request succeeded" in s["invalid_reasons"]


def test_goodput_under_slos():
    fast = stream_record(sent=0.0, ttft=0.05, gap=0.01, n_tokens=11, k=1)  # TTFT 50 ms, TPOT 10 ms
    slow_ttft = stream_record(sent=0.0, ttft=0.5, gap=0.01, n_tokens=11, k=1)  # TTFT 500 ms
    slow_tpot = stream_record(sent=0.0, ttft=0.05, gap=0.05, n_tokens=11, k=1)  # TPOT 50 ms
    recs = [fast, slow_ttft, slow_tpot]
    ms = [metrics.request_metrics(r) for r in recs]
    g = metrics.goodput(recs, ms, duration_s=2.0, slo=metrics.Slo(ttft_ms=100, tpot_ms=20))
    assert g is not None
    assert g["good_requests"] == 1
    assert g["goodput_req_s"] == pytest.approx(0.5)
    assert g["goodput_tok_s"] == pytest.approx(5.5)
    assert g["attainment"] == pytest.approx(1 / 3)
    assert g["attainment_per_metric"] == pytest.approx({"ttft_ms": 2 / 3, "tpot_ms": 2 / 3})
    assert metrics.goodput(recs, ms, 2.0, metrics.Slo()) is None


def test_client_health_flags_each_threshold():
    rec = stream_record(sent=0.010, ttft=0.01, gap=0.01, n_tokens=2, k=1)
    rec["ready_s"] = 0.0  # sent 10 ms late
    ms = [metrics.request_metrics(rec)]
    stats = metrics.ClientStats(cpu_s=0.95, wall_s=1.0, loop_lag_s=[0.05] * 10, runqueue_wait_s=0.3)
    h = metrics.client_health([rec], ms, stats)
    assert h["valid"] is False
    text = " ".join(h["reasons"])
    assert "send lateness" in text and "event-loop lag" in text and "client CPU" in text
    assert "waited 30% of the time for a CPU" in text
    assert h["runqueue_wait_fraction"] == pytest.approx(0.3)

    rec["ready_s"] = rec["sent_s"]
    calm = metrics.client_health(
        [rec],
        [metrics.request_metrics(rec)],
        metrics.ClientStats(cpu_s=0.1, wall_s=1.0, loop_lag_s=[0.0001] * 10),
    )
    assert calm["valid"] is True and calm["reasons"] == []


def test_client_health_judges_cpu_per_process():
    """Several client processes: CPU and CPU wait per process (the busiest one decides and is named);
    together they may use more than one core."""
    rec = stream_record(sent=0.0, ttft=0.01, gap=0.01, n_tokens=2, k=1)
    rec["ready_s"] = 0.0
    ms = [metrics.request_metrics(rec)]

    def proc(k, cpu, wait):
        return {"proc": k, "cpu_s": cpu, "wall_s": 1.0, "runqueue_wait_s": wait, "n_requests": 1, "n_sent": 1}

    # 0.6 + 0.7 = 1.3 cores in all: one process would be flagged, two are not.
    calm = metrics.ClientStats(
        cpu_s=1.3, wall_s=1.0, runqueue_wait_s=0.1, procs=[proc(0, 0.6, 0.05), proc(1, 0.7, 0.05)]
    )
    h = metrics.client_health([rec], ms, calm)
    assert h["valid"] is True and h["procs"] == 2
    assert h["cpu_fraction"] == pytest.approx(0.7) and h["runqueue_wait_fraction"] == pytest.approx(0.05)
    assert [p["cpu_fraction"] for p in h["per_process"]] == pytest.approx([0.6, 0.7])

    busy = metrics.ClientStats(
        cpu_s=1.55, wall_s=1.0, runqueue_wait_s=0.27, procs=[proc(0, 0.6, 0.25), proc(1, 0.95, 0.02)]
    )
    h = metrics.client_health([rec], ms, busy)
    assert h["valid"] is False and h["cpu_fraction"] == pytest.approx(0.95)
    assert h["reasons"] == [
        "client process 1 (of 2) CPU 95% of one core > 90%",
        "client process 0 (of 2) waited 25% of the time for a CPU (> 10%): other processes on this machine "
        "starved it",
    ]

    # One process: one per-process entry from the totals, reasons worded as before.
    one = metrics.client_health([rec], ms, metrics.ClientStats(cpu_s=0.95, wall_s=1.0, n_sent=1))
    assert one["procs"] == 1 and one["per_process"][0]["cpu_fraction"] == pytest.approx(0.95)
    assert one["per_process"][0]["n_requests"] == 1
    assert one["reasons"] == ["client CPU 95% of one core > 90%"]


def test_rate_mode_under_delivery_is_flagged():
    recs = [{"sent_s": i * 0.2, "ready_s": i * 0.2} for i in range(11)]  # 5 req/s achieved
    stats = metrics.ClientStats(cpu_s=0.0, wall_s=2.0, target_rate=10.0, send_window_s=1.0)
    h = metrics.client_health(recs, [metrics.request_metrics(r) for r in recs], stats)
    assert h["achieved_rate"] == pytest.approx(5.0)
    assert any("achieved send rate" in r for r in h["reasons"])


def test_aggregate_repeats_mean_and_interval():
    pts = [{"output_throughput_tok_s": v, "valid": True} for v in (90.0, 100.0, 110.0)]
    agg = metrics.aggregate_repeats(pts)
    t = agg["output_throughput_tok_s"]
    assert t["mean"] == pytest.approx(100.0)
    assert t["stdev"] == pytest.approx(10.0)
    half = 4.303 * 10.0 / math.sqrt(3)
    assert (t["ci95_low"], t["ci95_high"]) == pytest.approx((100 - half, 100 + half))
    assert agg["all_valid"] is True
    assert agg["ttft_ms_p50"]["n"] == 0


def test_peak_output_tok_s_counts_tokens_not_chunks():
    # 4-token chunks every 0.1 s from t=0.05 to t=1.95 (20 chunks): bucket [0, 1) holds 10 chunks = 40 tokens.
    rec = stream_record(sent=0.0, ttft=0.05, gap=0.1, n_tokens=80, k=4)
    assert metrics.peak_output_tok_s([rec]) == pytest.approx(40.0)
    assert metrics.peak_output_tok_s([]) is None


def test_by_category_splits_acceptance_by_content():
    a = stream_record(sent=0.0, ttft=0.1, gap=0.01, n_tokens=12, k=4, spec=True)  # accept 4
    b = stream_record(sent=0.0, ttft=0.1, gap=0.01, n_tokens=12, k=2, spec=True)  # accept 2
    a["category"], b["category"] = "code", "chat"
    s = metrics.summarize_point([a, b])
    assert s["by_category"]["code"]["accept_length_mean"] == pytest.approx(4.0)
    assert s["by_category"]["chat"]["accept_length_mean"] == pytest.approx(2.0)
    assert s["by_category"]["chat"]["n_ok"] == 1 and s["by_category"]["code"]["output_tokens"] == 12
    assert s["accept_length_token_weighted"] == pytest.approx(24 / 9)


# -- error-rate rule ---------------------------------------------------------------------------
def _ok_rec() -> dict:
    return stream_record(sent=0.0, ttft=0.05, gap=0.01, n_tokens=4, k=1)


def _failed_rec(error: str = "cannot connect to http://127.0.0.1:30000: connection refused") -> dict:
    return {"warmup": False, "sent_s": 0.0, "end_s": None, "error": error}


def test_error_rate_rule_any_failed_request_invalidates_the_point_by_default():
    """The defect: 15 ok / 985 err was 'valid'. Strict by default: one failed request is enough."""
    s = metrics.summarize_point([_ok_rec()] * 15 + [_failed_rec()] * 985)
    assert s["valid"] is False and s["n_err"] == 985
    assert s["error_rate"] == pytest.approx(0.985) and s["max_error_rate"] == 0.0
    (reason,) = s["invalid_reasons"]
    assert reason.startswith("985 of 1000 requests failed (max_error_rate 0: any failed request")
    assert "connection refused" in reason and "; " not in reason  # one reason, not split in tables
    one = metrics.summarize_point([_ok_rec()] * 99 + [_failed_rec()])
    assert one["valid"] is False and one["invalid_reasons"][0].startswith("1 of 100 requests failed")


def test_error_rate_rule_threshold_is_configurable():
    recs = [_ok_rec()] * 98 + [_failed_rec("HTTP 503")] * 2
    assert metrics.summarize_point(recs, max_error_rate=0.02)["valid"] is True  # exactly at the limit
    s = metrics.summarize_point(recs, max_error_rate=0.01)
    assert s["valid"] is False
    assert s["invalid_reasons"] == ["2 of 100 requests failed (2.00% > max_error_rate 0.01), e.g. HTTP 503"]
    assert metrics.summarize_point([_ok_rec()] * 3)["valid"] is True


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5, "0.1", None, True])
def test_error_rate_threshold_must_be_a_fraction(bad):
    with pytest.raises(ValueError, match="max_error_rate"):
        metrics.summarize_point([_ok_rec()], max_error_rate=bad)
