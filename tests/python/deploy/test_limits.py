"""Limit labels on constructed curves: slot-, KV-, compute- and SLO-bound, not reached, and the SLO rules."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import recordfactory as rf

from sglbench import results
from sglbench.deploy import answer, schema, slo

FLAT_ITL = {1: 20.0, 2: 20.5, 4: 21.0, 8: 21.5}  # per-request decode rate within 10%
LINEAR = {1: 50.0, 2: 100.0, 4: 200.0, 8: 400.0}


def _limit(root: Path, config: str = "ar") -> schema.Limit:
    (a,) = answer.compute(results.load(root / "run1"))
    return next(lim for lim in a.limits.limits if lim.config == config)


def test_concurrency_beyond_the_request_slots_is_slot_bound(tmp_path: Path) -> None:
    rf.curve(
        tmp_path,
        "ar",
        LINEAR,
        itl={1: 20.0, 2: 22.0, 4: 30.0, 8: 60.0},
        mrr=4,
        ttft={1: 50, 2: 50, 4: 60, 8: 400},
    )
    lim = _limit(tmp_path)
    assert lim.label == "slot-bound" and lim.examined_point == "c8"
    assert lim.bounds.max_running_requests == 4 and lim.bounds.max_running_requests_source == "observed"
    assert lim.evidence[0].startswith("concurrency 8 > max running requests 4 (observed): 4 requests wait")
    assert "TTFT p50 50 ms at c1 -> 400 ms at c8" in lim.evidence[1]
    assert lim.server_counters is None


def test_the_plan_gives_the_slots_when_the_probe_did_not(tmp_path: Path) -> None:
    pts = [rf.point(c, r, v) for c, v in LINEAR.items() for r in range(2)]
    rec = rf.record(config="ar", benchmark=rf.bench(pts), plan_=rf.plan(mrr=8), kv_observed=None)
    rf.write(tmp_path, rec)
    lim = _limit(tmp_path)
    assert lim.label == "slot-bound" and lim.bounds.max_running_requests_source == "plan"
    assert lim.evidence[0].startswith("concurrency 8 = max running requests 8 (plan): every request slot")


def test_a_token_pool_smaller_than_the_slots_is_kv_bound(tmp_path: Path) -> None:
    # 20 prompt + 100 completion tokens per request; 600 KV tokens hold 5 requests, 64 slots
    pts = [rf.point(c, 0, v, n_ok=2) for c, v in LINEAR.items()]
    reqs = [rf.request(c, 0, i, 100) for c in LINEAR for i in range(2)]
    rf.write(
        tmp_path, rf.record(config="ar", benchmark=rf.bench(pts), kv_observed=600, mrr_observed=64), reqs
    )
    lim = _limit(tmp_path)
    assert lim.bounds.tokens_per_request == 120.0 and lim.bounds.kv_requests == 5
    assert lim.label == "kv-bound"
    assert (
        lim.evidence[0]
        == "8 requests in flight >= KV bound 5 (600 tokens (observed) / 120 tokens per request)"
    )


def test_decode_rate_falling_below_the_bounds_is_compute_bound(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", LINEAR, itl={1: 20.0, 2: 21.0, 4: 23.0, 8: 30.0})
    lim = _limit(tmp_path)
    assert lim.label == "compute-bound"
    assert lim.per_user_tok_s_lowest == 50.0 and round(lim.per_user_tok_s_examined or 0, 1) == 33.3
    assert "-33%" in lim.evidence[0]


def test_an_slo_failing_below_every_bound_is_slo_bound(tmp_path: Path) -> None:
    slo = {"ttft_ms_p99": 150.0}
    rf.curve(tmp_path, "ar", LINEAR, itl=FLAT_ITL, ttft={1: 50, 2: 60, 4: 100, 8: 120}, slo=slo)
    lim = _limit(tmp_path)
    assert lim.label == "slo-bound" and lim.examined_point == "c4"
    assert (lim.limit_level, lim.next_level) == (2.0, 4.0)
    assert lim.slo.met_up_to == 2.0 and lim.slo.first_failing == "c4"
    (fail,) = lim.slo.failures
    assert (fail.column, fail.limit, fail.value, fail.met) == ("ttft_ms_p99", 150.0, 200.0, False)
    assert "SLO ttft_ms_p99 <= 150 fails at c4: ttft_ms_p99 = 200.0" in lim.evidence


def test_a_per_request_slo_is_judged_on_the_p99_and_an_unknown_key_is_listed(tmp_path: Path) -> None:
    slo = {"ttft_ms": 150.0, "goodput_share": 0.99}
    rf.curve(tmp_path, "ar", LINEAR, itl=FLAT_ITL, ttft={1: 50, 2: 80, 4: 60, 8: 70}, slo=slo)
    lim = _limit(tmp_path)
    assert lim.slo.unjudged == ["goodput_share"]
    assert lim.slo.first_failing == "c2" and lim.slo.failures[0].column == "ttft_ms_p99"
    assert lim.limit_level == 1.0 and lim.next_level == 2.0


def test_a_level_the_search_judged_takes_the_search_verdict_not_the_mean(tmp_path: Path) -> None:
    # c4's mean TTFT p99 (100 ms) is within 150 ms, but the search found its 95% bound straddling the
    # limit (inconclusive, counted as missed): the deploy answer agrees with the search, not the mean
    slo = {"ttft_ms_p99": 150.0}
    path = rf.curve(tmp_path, "ar", LINEAR, itl=FLAT_ITL, ttft={1: 50, 2: 60, 4: 100, 8: 120}, slo=slo)
    rec = json.loads(path.read_text())
    judged = {"ttft_ms_p99": {"limit": 150.0, "estimate": 100.0, "ci_low": 90.0, "ci_high": 160.0}}
    rec["benchmark"]["search"] = {
        "verdict": "limit_found",
        "levels": [
            {
                "level": 4,
                "point": "c4",
                "role": "slo",
                "objectives": {"ttft_ms_p99": {**judged["ttft_ms_p99"], "state": "inconclusive"}},
            },
        ],
    }
    path.write_text(json.dumps(rec))
    lim = _limit(tmp_path)
    assert lim.slo.first_failing == "c4" and lim.slo.met_up_to == 2.0
    assert lim.slo.failures[0].value == 100.0 and lim.limit_level == 2.0


def _searched(path: Path, levels: list[dict[str, object]]) -> None:
    rec = json.loads(path.read_text())
    rec["benchmark"]["search"] = {"verdict": "unresolved", "levels": levels}
    path.write_text(json.dumps(rec))


def _passed(level: int, ci_high: float, **extra: object) -> dict[str, object]:
    judged = {"limit": 150.0, "estimate": ci_high - 10, "ci_low": ci_high - 20, "ci_high": ci_high}
    return {
        "level": level,
        "point": f"c{level}",
        "role": "slo",
        "trusted": True,
        "objectives": {"ttft_ms_p99": {**judged, "state": "pass"}},
        **extra,
    }


def test_a_level_the_search_left_untrusted_is_not_judged_and_the_limit_stops_below_it(tmp_path: Path) -> None:
    # c4's points were all invalid (a starved client): the search did not judge it. Its mean TTFT p99
    # (100 ms) is within 150 ms, and c8 passed, yet the answer must not vouch for c4 or anything above
    slo = {"ttft_ms_p99": 150.0}
    path = rf.curve(tmp_path, "ar", LINEAR, itl=FLAT_ITL, ttft={1: 50, 2: 60, 4: 100, 8: 70}, slo=slo)
    untrusted = {"limit": 150.0, "estimate": None, "ci_low": None, "ci_high": None, "state": "untrusted"}
    _searched(
        path,
        [
            _passed(1, 60.0),
            _passed(2, 80.0, remeasured=["c2-r3"]),
            {
                "level": 4,
                "point": "c4",
                "role": "slo",
                "trusted": False,
                "verdict": "inconclusive",
                "objectives": {"ttft_ms_p99": untrusted},
            },
            _passed(8, 100.0),
        ],
    )
    lim = _limit(tmp_path)
    assert (lim.limit_level, lim.next_level, lim.examined_point) == (2.0, 4.0, "c4")
    assert lim.slo.met_up_to == 2.0 and lim.slo.first_failing is None and lim.slo.failures == []
    assert lim.slo.untrusted == ["c4"] and lim.slo.remeasured == ["c2"]
    assert lim.label == "not reached" and "no bound reached by c4, the first level not judged" in lim.evidence
    assert any(e.startswith("not judged") and e.endswith(": c4") for e in lim.evidence)
    assert "re-measured (invalid points replaced): c2" in lim.evidence
    # the limits document keeps both lists, and reads back
    (a,) = answer.compute(results.load(tmp_path / "run1"))
    doc = json.loads(schema.to_json(a.limits))
    (entry,) = [x for x in doc["limits"] if x["config"] == "ar"]
    assert entry["slo"]["untrusted"] == ["c4"] and entry["slo"]["remeasured"] == ["c2"]


def test_an_untrusted_objective_is_neither_met_nor_missed() -> None:
    lv: Any = SimpleNamespace(point="c4", metric=lambda column: 100.0)  # its mean would meet the SLO
    judged = slo.judge(
        {"ttft_ms_p99": 150.0},
        lv,
        {"trusted": False, "objectives": {"ttft_ms_p99": {"state": "untrusted", "estimate": None}}},
    )
    assert [c.met for c in judged.checks] == [None] and judged.met is None


def test_an_slo_failing_at_the_lowest_level_has_no_limit_level(tmp_path: Path) -> None:
    rf.curve(
        tmp_path, "ar", LINEAR, itl=FLAT_ITL, ttft={1: 500, 2: 500, 4: 500, 8: 500}, slo={"ttft_ms_p50": 100}
    )
    lim = _limit(tmp_path)
    assert lim.label == "slo-bound" and lim.limit_level is None and lim.next_level == 1.0


def test_nothing_reached_says_the_levels_stopped_first(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", LINEAR, itl=FLAT_ITL)
    lim = _limit(tmp_path)
    assert lim.label == "not reached" and lim.limit_level == 8.0 and lim.next_level is None
    assert lim.evidence[0] == "no bound reached by the highest measured level (c8)"
    assert lim.evidence[-1] == "in flight 8; bounds: slots 64, KV unknown (no request rows)"
