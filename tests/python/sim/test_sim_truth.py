"""The stand-in's model in virtual time (sglbench.sim.truth): slot queueing, KV waiting, verify cost, and
its own SLO limit and crossover for the sim inventory's 27B configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglbench.hostlib import metrics
from sglbench.sim import engine, truth
from sglbench.sim.server import StartupFailure

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
ENV = {"SGLBENCH_SIM_SGLANG_VERSION": "0.5.23+ddtree", "SGLBENCH_SIM_ACCOUNTING": "A"}
# inventory/sim's qwen27b-ar and qwen27b-dflash at TP1, as their units launch them
AR = [
    *("--model-path", str(MODELS / "qwen3.6-27b")),
    *("--mem-fraction-static", "0.85", "--context-length", "32768"),
]
DFLASH = [
    *("--model-path", str(MODELS / "qwen3.6-27b"), "--speculative-algorithm", "DFLASH"),
    *("--speculative-draft-model-path", str(MODELS / "qwen3.6-27b-dflash"), "--mem-fraction-static", "0.75"),
    *("--max-running-requests", "4", "--context-length", "32768", "--speculative-dflash-block-size", "16"),
    *("--mamba-radix-cache-strategy", "extra_buffer"),
]
LONG = truth.Workload((512,), 64, 20.0)


@pytest.fixture(scope="module")
def ar() -> truth.ServerModel:
    return truth.server_model(AR, ENV)


@pytest.fixture(scope="module")
def dflash() -> truth.ServerModel:
    return truth.server_model(DFLASH, ENV)


def test_the_model_comes_from_the_same_plan_the_stand_in_serves_with(
    ar: truth.ServerModel, dflash: truth.ServerModel
) -> None:
    assert (ar.max_running, ar.max_total_tokens, ar.accept_length) == (32, 252265, None)
    assert (dflash.max_running, dflash.num_draft_tokens, dflash.accept_length) == (4, 16, 6.5)
    assert 1 / ar.timing.decode_step(1, 0) == pytest.approx(26.5, rel=0.02)  # the calibration anchor
    with pytest.raises(StartupFailure):  # the mission's config: zero request slots, as the stand-in fails
        truth.server_model([*DFLASH[:-6], "--max-running-requests", "8", *DFLASH[-4:]], ENV)


def test_closed_loop_requests_run_in_waves_whose_prefill_is_the_ttft(ar: truth.ServerModel) -> None:
    for c in (1, 4, 9):
        p = truth.point(ar, LONG, concurrency=c)
        assert p["ttft_ms"]["p99"] == pytest.approx(1000 * ar.timing.prefill(512 * c), rel=1e-6)
        assert p["n_ok"] == p["n_requests"] > c


def test_requests_beyond_the_slots_queue(dflash: truth.ServerModel) -> None:
    at_slots = truth.point(dflash, LONG, concurrency=4)
    beyond = truth.point(dflash, LONG, concurrency=8)
    # the second four wait for the first four to finish: their TTFT holds a whole request's E2E
    assert beyond["ttft_ms"]["p99"] > at_slots["ttft_ms"]["p99"] + at_slots["e2e_ms"]["p50"] * 0.9
    assert beyond["output_throughput_tok_s"] == pytest.approx(at_slots["output_throughput_tok_s"], rel=0.1)


def test_a_full_kv_pool_makes_requests_wait(ar: truth.ServerModel) -> None:
    small = truth.ServerModel(ar.timing, max_running=32, max_total_tokens=3 * 576)  # 3 requests of 576 tokens
    assert small.concurrency_bound(LONG.tokens_per_request) == 3
    p = truth.point(small, LONG, concurrency=6)
    roomy = truth.point(ar, LONG, concurrency=6)
    assert p["ttft_ms"]["p99"] > 2 * roomy["ttft_ms"]["p99"]  # half of them wait for KV, not for a slot


def test_admission_is_fifo_within_slots_and_tokens() -> None:
    class R:
        def __init__(self, tokens: int) -> None:
            self.reserved_tokens, self.cancelled = tokens, False

    waiting = engine.deque([R(10), R(10), R(50), R(1)])
    got = engine.admit(waiting, [], max_running=8, max_total_tokens=30)
    assert [r.reserved_tokens for r in got] == [10, 10] and len(waiting) == 2  # R(50) waits; R(1) behind it
    assert engine.admit(engine.deque([R(500)]), [], max_running=8, max_total_tokens=30)  # alone, capped


def test_verify_cost_grows_with_the_batch(ar: truth.ServerModel, dflash: truth.ServerModel) -> None:
    t = dflash.timing
    per_request = [t.decode_step(b, 0) - t.decode_step(b - 1, 0) for b in (2, 3, 4)]
    ar_per_request = ar.timing.decode_step(2, 0) - ar.timing.decode_step(1, 0)
    assert min(per_request) > 5 * ar_per_request  # draft positions' state writes, per verified request
    # ... so the speedup over the baseline falls with the load
    x = truth.crossover(dflash, ar, LONG)
    s = x["speedup"]
    assert list(s) == [1, 2, 3, 4] and s[1] > s[2] > s[3] > s[4] > 1.0
    assert x["crossover"] is None and x["spec_bound"] == 4  # faster at every load it holds


def test_open_loop_queueing_at_the_slot_limit(dflash: truth.ServerModel, ar: truth.ServerModel) -> None:
    light, heavy = (truth.point(dflash, LONG, rate=r) for r in (0.5, 3.0))
    assert heavy["ttft_ms"]["p99"] > 5 * light["ttft_ms"]["p99"]
    assert truth.point(ar, LONG, rate=0.5)["e2e_ms"]["p50"] > light["e2e_ms"]["p50"]


def test_the_slo_limit_is_the_first_failure_from_below(
    ar: truth.ServerModel, dflash: truth.ServerModel
) -> None:
    # TTFT p99 = 224 ms per request of a wave: 5 of them fit 1230 ms, 6 do not
    got = truth.slo_limit(ar, LONG, {"ttft_ms_p99": 1230.0})
    assert (got["verdict"], got["limit"], got["next_above"]) == ("limit_found", 5, 6)
    assert truth.slo_limit(dflash, LONG, {"ttft_ms_p99": 1230.0})["verdict"] == "plan_limited"
    never = truth.slo_limit(ar, LONG, {"itl_ms_p50": 20.0})
    assert never["verdict"] == "never_met" and never["limit"] is None
    good = truth.slo_limit(ar, LONG, {"goodput": 0.99}, slo=metrics.Slo(ttft_ms=1230.0))
    assert good["limit"] == 5
