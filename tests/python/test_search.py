"""The SLO-bounded search on synthetic point results: what it measures, what it concludes, how it resumes.

Each test drives the search exactly as the playbook does: ``decide`` names the next point, a synthetic
server "measures" it (request rows drawn from a latency curve with seeded noise), ``commit_point`` writes
it, and so on until the search says done. The curves are functions of the load level, so every test
knows the true limit and can check the answer against it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from sglbench import resume, search

IDENTITY = "i" * 64
SLOTS = {"max_running_requests": 64}  # a server with room to spare


def _rows(
    n: int, ttft_ms: float, itl_ms: float, rng: random.Random, *, noise: float, tokens: int = 16
) -> list[dict[str, Any]]:
    """``n`` requests whose TTFT and per-token gaps scatter around the given values (relative noise)."""
    rows = []
    for i in range(n):
        sent = i * 0.01
        first = sent + max(0.0, ttft_ms * (1 + rng.gauss(0, noise))) / 1000.0
        t, chunk_t = first, [first]
        for _ in range(tokens - 1):
            t += max(1e-6, itl_ms * (1 + rng.gauss(0, noise))) / 1000.0
            chunk_t.append(t)
        rows.append(
            {
                "idx": i,
                "sent_s": sent,
                "ready_s": sent,
                "scheduled_s": sent,
                "end_s": t,
                "chunk_t": chunk_t,
                "chunk_tokens": list(range(1, tokens + 1)),
                "prompt_tokens": 100,
                "completion_tokens": tokens,
                "error": None,
            }
        )
    return rows


Curve = Callable[[float], tuple[float, float]]  # level -> (TTFT ms, ITL ms) the server gives at that load


def _drive(
    attempt: Path,
    load: dict[str, Any],
    curve: Curve,
    capacity: dict[str, Any],
    *,
    noise: float = 0.03,
    requests: int = 60,
    stop_after: int | None = None,
    measured: list[str] | None = None,
    time_scale: float | None = None,
    tok_s: Callable[[float], float] | None = None,
    baseline: Path | None = None,
    starved: Callable[[dict[str, Any]], Curve | None] | None = None,
) -> search.Decision:
    """Run the search to its end (or until ``stop_after`` points were measured: a kill), as bench.yml does.
    ``starved``: for a point the client self-check flags invalid, the curve its rows follow instead (what a
    starved client would have seen), else None."""
    spec = search.parse_spec(load)
    assert spec is not None
    cap = search.Capacity.from_args(capacity)
    log = measured if measured is not None else []
    count = 0
    while True:
        decision = search.decide(str(attempt), spec, cap, IDENTITY, str(baseline) if baseline else None)
        if decision.done or (stop_after is not None and count >= stop_after):
            return decision
        point = decision.point
        assert point is not None
        level = point["request_rate"] if point["request_rate"] is not None else point["concurrency"]
        bad = starved(point) if starved is not None else None
        ttft, itl = (bad or curve)(float(level))
        rng = random.Random(f"{point['key']}")
        scale = time_scale or 1.0
        rows = _rows(requests, ttft * scale, itl * scale, rng, noise=noise)
        meta = {"server_info": {"sglbench_sim": {"time_scale": time_scale}}} if time_scale else {}
        summary: dict[str, Any] = {"n_err": 0, "valid": bad is None, "client": {"wall_s": 2.0}}
        if bad is not None:
            summary["invalid_reasons"] = ["client send lateness p99 9.0 ms > 5 ms"]
        if tok_s is not None:  # output tok/s as the stand-in reports it (its time scale not undone)
            true = tok_s(float(level)) / scale * (0.5 if bad is not None else 1.0)
            jitter = random.Random(f"{attempt.name}:{point['key']}:tok_s").gauss(0, noise)
            summary["output_throughput_tok_s"] = true * (1 + jitter)
        resume.commit_point(str(attempt), point, outcome="ok", summary=summary, meta=meta, records=rows)
        log.append(str(point["key"]))
        count += 1


def _load(**search_settings: Any) -> dict[str, Any]:
    slo = search_settings.pop("slo", {"ttft_ms_p99": 1000})
    return {
        "repeats": search_settings.pop("repeats", 2),
        "seed": 0,
        "max_new_tokens": 16,
        "slo": slo,
        "search": {"enabled": True, **search_settings},
    }


def linear_ttft(per_level_ms: float) -> Curve:
    return lambda level: (per_level_ms * level, 20.0)


def _levels(decision: search.Decision) -> list[int | float]:
    return [lv["level"] for lv in decision.doc["levels"]]


# -- the answer -------------------------------------------------------------------------------------
def _true_limit(per_level_ms: float, noise: float, slo_ms: float) -> int:
    """The highest level whose true TTFT p99 (the curve times the noise's 99th percentile) meets the SLO."""
    return int(slo_ms / (per_level_ms * (1 + noise * NormalDist().inv_cdf(0.99))))


@pytest.mark.parametrize("noise", [0.01, 0.03, 0.05])
def test_a_noisy_monotone_curve_gives_its_limit_within_one_step(tmp_path: Path, noise: float) -> None:
    # TTFT = 45 ms x concurrency, relative noise: true limits 21, 20 and 19 under TTFT p99 <= 1000 ms
    d = _drive(tmp_path, _load(max_levels=12), linear_ttft(45.0), SLOTS, noise=noise)
    doc, true = d.doc, _true_limit(45.0, noise, 1000.0)
    assert doc["verdict"] == "limit_found" and doc["budget"]["exhausted"] is None
    assert doc["next_above"] - doc["limit"] == doc["step"] == 1
    assert doc["limit"] <= true and true - doc["limit"] <= doc["step"]  # the CI only ever errs low
    assert _levels(d)[:7] == [1, 2, 4, 8, 16, 32, 24]  # bracket by doubling, then bisect
    passed = [lv["level"] for lv in doc["levels"] if lv["pass"]]
    assert max(passed) == doc["limit"] and all(
        lv["level"] > doc["limit"] for lv in doc["levels"] if not lv["pass"]
    )


# -- points the client self-check flagged invalid ---------------------------------------------------
def _starved_at(keys: set[str], curve: Curve) -> Callable[[dict[str, Any]], Curve | None]:
    return lambda point: curve if point["key"] in keys else None


def test_a_level_with_invalid_points_is_measured_again_and_judged_on_its_valid_points_only(
    tmp_path: Path,
) -> None:
    # both first repeats of c16 invalid, their rows far beyond the SLO (a starved client's); one of c8's
    clean = _drive(tmp_path / "clean", _load(max_levels=12), linear_ttft(45.0), SLOTS)
    measured: list[str] = []
    d = _drive(
        tmp_path / "starved",
        _load(max_levels=12),
        linear_ttft(45.0),
        SLOTS,
        measured=measured,
        starved=_starved_at({"c16-r0", "c16-r1", "c8-r1"}, lambda _: (9000.0, 20.0)),
    )
    doc = d.doc
    by = {lv["level"]: lv for lv in doc["levels"]}
    assert [k for k in measured if k.startswith(("c8-", "c16-"))] == [
        *("c8-r0", "c8-r1", "c8-r2"),  # one invalid point: one re-measure
        *("c16-r0", "c16-r1", "c16-r2", "c16-r3"),  # two: two
    ]
    assert by[16]["trusted"] and by[16]["pass"] and by[16]["points"] == ["c16-r2", "c16-r3"]
    assert by[16]["remeasured"] == ["c16-r2", "c16-r3"] and len(by[16]["invalid"]) == 2
    assert by[8]["trusted"] and by[8]["points"] == ["c8-r0", "c8-r2"] and by[8]["remeasured"] == ["c8-r2"]
    assert by[16]["requests"] == by[4]["requests"]  # the invalid repeats' requests were not judged
    # the answer is the clean run's: the invalid points changed nothing
    assert (doc["verdict"], doc["limit"], _levels(d)) == (
        clean.doc["verdict"],
        clean.doc["limit"],
        _levels(clean),
    )
    assert doc["trust"] == {"remeasure": 2, "remeasured": [8, 16], "untrusted": []}
    assert [p["key"] for p in d.expected if p["key"].startswith("c16")] == [f"c16-r{r}" for r in range(4)]
    state = json.loads((tmp_path / "starved" / search.STATE_FILE).read_text())
    assert state["progress"]["phase"] == "done" and state["progress"]["committed"]["slo"] == len(measured)


def test_a_level_never_measured_valid_is_not_judged_and_the_limit_below_it_is_unresolved(
    tmp_path: Path,
) -> None:
    # every point of c21 invalid, its rows well within the SLO: judged as measured, it would pass
    every = {f"c21-r{r}" for r in range(4)}
    measured: list[str] = []
    d = _drive(
        tmp_path,
        _load(max_levels=12),
        linear_ttft(45.0),
        SLOTS,
        measured=measured,
        starved=_starved_at(every, lambda _: (100.0, 20.0)),
    )
    doc = d.doc
    assert _levels(d) == [1, 2, 4, 8, 16, 32, 24, 20, 22, 21]
    assert sorted(k for k in measured if k.startswith("c21-")) == sorted(every)  # re-measured, at most 2 more
    (c21,) = [lv for lv in doc["levels"] if lv["level"] == 21]
    assert (c21["trusted"], c21["verdict"], c21["pass"]) == (False, "inconclusive", False)
    assert c21["objectives"]["ttft_ms_p99"]["state"] == "untrusted"
    assert c21["objectives"]["ttft_ms_p99"]["estimate"] is None and c21["points"] == []
    # the limit holds on judged levels only; the level above it was never judged: no limit_found
    assert (doc["verdict"], doc["limit"], doc["next_above"]) == ("unresolved", 20, 21)
    assert doc["trust"]["untrusted"] == [21]
    # a replay decides the same from the committed points, measuring nothing
    again: list[str] = []
    assert _drive(tmp_path, _load(max_levels=12), linear_ttft(45.0), SLOTS, measured=again).doc == doc
    assert again == []


def test_a_search_killed_while_re_measuring_a_level_measures_nothing_twice(tmp_path: Path) -> None:
    starved = _starved_at({"c4-r0", "c4-r1"}, lambda _: (9000.0, 20.0))
    whole = _drive(tmp_path / "whole", _load(max_levels=12), linear_ttft(45.0), SLOTS, starved=starved)
    first: list[str] = []
    part = _drive(
        tmp_path / "k",
        _load(max_levels=12),
        linear_ttft(45.0),
        SLOTS,
        stop_after=7,
        measured=first,
        starved=starved,
    )
    assert (
        first[-3:] == ["c4-r0", "c4-r1", "c4-r2"] and part.point is not None and part.point["key"] == "c4-r3"
    )
    state = json.loads((tmp_path / "k" / search.STATE_FILE).read_text())
    assert state["progress"] == {
        "phase": "slo",
        "next_point": "c4-r3",
        "remeasure": True,
        "committed": {"slo": 7, "crossover": 0},
    }
    second: list[str] = []
    again = _drive(
        tmp_path / "k", _load(max_levels=12), linear_ttft(45.0), SLOTS, measured=second, starved=starved
    )
    assert second[0] == "c4-r3" and not set(first) & set(second) and again.doc == whole.doc


def test_an_untrusted_level_gives_the_crossover_no_throughput_and_is_not_measured_again(
    tmp_path: Path,
) -> None:
    # the speculative config's points at the baseline's level inside the crossover bracket all invalid,
    # their tok/s halved (a starved client's): they must not place the crossover
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, load)
    clean = _drive(tmp_path / "clean", load, linear_ttft(48.0), SPEC_SLOTS, tok_s=spec_tok_s, baseline=base)
    first_x = clean.doc["crossover"]["levels"][0]
    every = {f"c{first_x}-r{r}" for r in range(4)}
    d = _drive(
        tmp_path / "df",
        load,
        linear_ttft(48.0),
        SPEC_SLOTS,
        tok_s=spec_tok_s,
        baseline=base,
        starved=_starved_at(every, linear_ttft(48.0)),
    )
    doc, x = d.doc, d.doc["crossover"]
    entries = [lv for lv in doc["levels"] if lv["level"] == first_x]
    assert len(entries) == 1 and entries[0]["trusted"] is False and entries[0]["tok_s"] is None
    assert d.done and x["status"] == "crosses" and x["stopped"] == "resolved"
    # its speedup there is interpolated from the trusted levels around it, not the starved tok/s (half)
    assert x["speedup"][str(first_x)] == pytest.approx(
        clean.doc["crossover"]["speedup"][str(first_x)], abs=0.1
    )
    lo, hi = x["between"]
    assert lo - 1 <= TRUE_CROSSOVER <= hi + 1


def test_the_baselines_throughput_comes_from_its_valid_points_only(tmp_path: Path) -> None:
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = tmp_path / "ar-tp1"
    starved = _starved_at({"c8-r0", "c8-r1"}, linear_ttft(48.0))  # tok/s halved
    _drive(base, load, linear_ttft(48.0), SLOTS, tok_s=base_tok_s, noise=0.0, starved=starved)
    (base / "record.json").write_text(json.dumps({"outcome": "ok"}))
    tok_s = search.Baseline.from_attempt(str(base), search_spec(load))
    assert tok_s is not None and tok_s.tok_s[8.0] == pytest.approx(base_tok_s(8), rel=1e-6)


def test_the_budget_of_levels_stops_the_bisection_and_says_so(tmp_path: Path) -> None:
    d = _drive(tmp_path, _load(max_levels=8), linear_ttft(45.0), SLOTS)
    doc = d.doc
    assert len(doc["levels"]) == 8 and doc["budget"]["exhausted"] == "max_levels"
    assert doc["verdict"] == "limit_found" and doc["limit"] <= 22 < doc["next_above"]
    assert doc["step"] == doc["next_above"] - doc["limit"] <= 4


def test_the_time_budget_counts_measured_seconds(tmp_path: Path) -> None:
    # every point reports 2 s of measurement, two repeats per level: 3 levels fit in 12 s
    d = _drive(tmp_path, _load(time_budget_s=12), linear_ttft(45.0), SLOTS)
    assert _levels(d) == [1, 2, 4] and d.doc["budget"]["exhausted"] == "time_budget_s"
    assert d.doc["verdict"] == "unresolved" and d.doc["limit"] == 4 and d.doc["next_above"] is None


def test_a_non_monotone_curve_gives_a_level_that_passed_below_the_first_failure(tmp_path: Path) -> None:
    # passes up to 5, fails at 6..9 (a bad region), passes 10..20 again, fails above
    def curve(level: float) -> tuple[float, float]:
        return (1500.0 if 6 <= level <= 9 or level > 20 else 300.0, 20.0)

    d = _drive(tmp_path, _load(max_levels=10), curve, SLOTS)
    doc = d.doc
    assert doc["verdict"] == "limit_found" and doc["limit"] == 5 and doc["next_above"] == 6
    assert _levels(d) == [1, 2, 4, 8, 6, 5]
    assert all(not lv["pass"] for lv in doc["levels"] if lv["level"] > doc["limit"])


def test_a_config_that_never_meets_the_slo(tmp_path: Path) -> None:
    d = _drive(tmp_path, _load(start=4), linear_ttft(1500.0), SLOTS)
    doc = d.doc
    assert doc["verdict"] == "never_met" and doc["limit"] is None and _levels(d) == [4, 2, 1]
    assert all(lv["verdict"] == "fail" for lv in doc["levels"])


def test_a_config_limited_by_its_request_slots(tmp_path: Path) -> None:
    d = _drive(
        tmp_path, _load(), linear_ttft(10.0), {"max_running_requests": 12, "max_total_num_tokens": 10**6}
    )
    doc = d.doc
    assert doc["verdict"] == "plan_limited" and doc["limit"] == doc["bound"] == 12
    assert doc["bound_by"] == "max_running_requests" and _levels(d) == [1, 2, 4, 8, 12]


def test_a_config_limited_by_its_kv_tokens(tmp_path: Path) -> None:
    # 116 tokens per request (100 prompt + 16 output): a pool of 1000 tokens holds 8 of them
    d = _drive(
        tmp_path, _load(), linear_ttft(10.0), {"max_running_requests": 64, "max_total_num_tokens": 1000}
    )
    doc = d.doc
    assert doc["verdict"] == "plan_limited" and doc["limit"] == 8 and doc["bound_by"] == "kv_tokens"
    assert doc["capacity"]["tokens_per_request"] == pytest.approx(116.0)
    assert max(_levels(d)) == 8  # never probed beyond what the pool holds


def test_an_interval_straddling_the_limit_does_not_pass(tmp_path: Path) -> None:
    # 990 ms p99 with 20 % noise: the estimate may sit below 1000 ms but its upper bound does not
    spec = search.parse_spec(_load())
    assert spec is not None
    rng = random.Random(1)
    reps = [
        [search.request_from_row(r, 1.0, spec.request_slo) for r in _rows(40, 700.0, 20.0, rng, noise=0.2)]
        for _ in range(2)
    ]
    out = search.judge_level(spec, "c9", reps)
    ttft = out["objectives"]["ttft_ms_p99"]
    assert ttft["ci_low"] < 1000.0 < ttft["ci_high"] and ttft["bound"] == "upper"
    assert out["verdict"] == "inconclusive" and out["pass"] is False


def test_goodput_is_judged_on_its_lower_bound(tmp_path: Path) -> None:
    load = _load(slo={"ttft_ms": 500, "goodput": 0.9})
    spec = search.parse_spec(load)
    assert spec is not None and spec.objectives[0].bound == "lower"
    rng = random.Random(2)
    rows = _rows(200, 450.0, 20.0, rng, noise=0.2)  # ~29 % of requests above 500 ms
    reps = [[search.request_from_row(r, 1.0, spec.request_slo) for r in rows]]
    good = search.judge_level(spec, "c4", reps)["objectives"]["goodput"]
    assert good["ci_high"] < 0.9 and good["state"] == "fail"
    rows = _rows(200, 300.0, 20.0, rng, noise=0.2)  # 0.03 % above 500 ms
    reps = [[search.request_from_row(r, 1.0, spec.request_slo) for r in rows]]
    good = search.judge_level(spec, "c4", reps)["objectives"]["goodput"]
    assert good["ci_low"] >= 0.9 and good["state"] == "pass"


def test_the_stand_ins_time_scale_is_undone_before_judging(tmp_path: Path) -> None:
    # the stand-in at scale 0.1 answers 10x faster: 45 ms x level real-world is 4.5 ms x level measured
    d = _drive(tmp_path, _load(max_levels=12), linear_ttft(45.0), SLOTS, time_scale=0.1)
    true = _true_limit(45.0, 0.03, 1000.0)
    assert d.doc["verdict"] == "limit_found" and d.doc["limit"] <= true < d.doc["next_above"]
    assert d.doc["levels"][0]["time_scale"] == 0.1


def test_open_loop_rates_double_then_bisect_geometrically_within_littles_bound(tmp_path: Path) -> None:
    # TTFT grows with the rate; 4 slots and ~0.3 s E2E at low load cap the rate at about 4 / 0.3 s
    def curve(rate: float) -> tuple[float, float]:
        return (50.0 * rate, 20.0)

    load = _load(mode="rate", start=0.5, max_levels=12, resolution=0.05, slo={"ttft_ms_p99": 600})
    d = _drive(tmp_path, load, curve, SLOTS)
    doc = d.doc
    assert _levels(d)[:4] == [0.5, 1.0, 2.0, 4.0] and doc["mode"] == "rate"
    true = 600.0 / (50.0 * (1 + 0.03 * NormalDist().inv_cdf(0.99)))  # 11.2 req/s
    assert doc["verdict"] == "limit_found" and doc["limit"] <= true < doc["next_above"]
    assert doc["next_above"] / doc["limit"] <= 1.05 and "Little" in (doc["bound_by"] or "")
    assert all(lv["point"].startswith("r") for lv in doc["levels"])


# -- the crossover against the baseline ----------------------------------------------------------------
# The sim host's shape (tests/python/test_search_simhost.py): a baseline whose tok/s grows almost linearly
# with the concurrency (memory-bound decode) and a speculative config 3x faster at low load whose verify
# steps go compute bound, so its speedup falls through 1 near concurrency 18; both share the TTFT curve
# (the same prefills) and the speculative server holds 22 requests.
def base_tok_s(c: float) -> float:
    return c / (0.038 + 0.0003 * c)


def spec_tok_s(c: float) -> float:
    return base_tok_s(c) * (18.4 / c) ** 0.45 if c > 4 else base_tok_s(c) * (18.4 / 4) ** 0.45


TRUE_CROSSOVER = 18.4
SPEC_SLOTS = {"max_running_requests": 22}


def _baseline_run(tmp_path: Path, load: dict[str, Any], *, noise: float = 0.02) -> Path:
    """The baseline's attempt, searched and ended ok (its record), as the cycle leaves it."""
    base = tmp_path / "ar-tp1"
    _drive(base, load, linear_ttft(48.0), SLOTS, tok_s=base_tok_s, noise=noise)
    (base / "record.json").write_text(json.dumps({"outcome": "ok"}))
    return base


@pytest.mark.parametrize("noise", [0.0, 0.01, 0.02])
def test_a_speculative_search_locates_its_crossover_within_one_step_of_the_truth(
    tmp_path: Path, noise: float
) -> None:
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, load, noise=noise)
    d = _drive(
        tmp_path / "df-tp1",
        load,
        linear_ttft(48.0),
        SPEC_SLOTS,
        tok_s=spec_tok_s,
        baseline=base,
        noise=noise,
    )
    doc, x = d.doc, d.doc["crossover"]
    assert d.done and len(doc["levels"]) <= 8 and doc["budget"]["levels_measured"] == len(doc["levels"])
    assert x["baseline"] == "ar-tp1" and x["status"] == "crosses" and x["stopped"] == "resolved"
    lo, hi = x["between"]
    assert x["step"] == hi - lo == 1 and lo - 1 <= TRUE_CROSSOVER <= hi + 1  # within one step
    # the SLO search's own answer is untouched by the crossover levels it added
    slo_levels = [lv["level"] for lv in doc["levels"] if lv["role"] == "slo"]
    assert slo_levels[:3] == [4, 8, 16] and doc["limit"] in (21, 22)
    assert [lv["level"] for lv in doc["levels"] if lv["role"] == "crossover"] == x["levels"] != []
    # the baseline's levels inside the bracket were measured first: compared where both measured
    base_levels = {float(k) for k in search.Baseline.from_attempt(str(base), search_spec(load)).tok_s}
    assert {lv for lv in base_levels if 16 < lv < 22} <= {float(v) for v in _levels(d)}


def search_spec(load: dict[str, Any]) -> search.SearchSpec:
    spec = search.parse_spec(load)
    assert spec is not None
    return spec


def test_without_an_ended_baseline_the_search_is_only_the_slo_search(tmp_path: Path) -> None:
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, load)
    (base / "record.json").write_text(json.dumps({"outcome": "failed"}))  # its attempt did not end ok
    d = _drive(tmp_path / "df", load, linear_ttft(48.0), SPEC_SLOTS, tok_s=spec_tok_s, baseline=base)
    assert d.doc["crossover"] is None and all(lv["role"] == "slo" for lv in d.doc["levels"])
    off = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150}, crossover=False)
    d = _drive(tmp_path / "df-off", off, linear_ttft(48.0), SPEC_SLOTS, tok_s=spec_tok_s, baseline=base)
    assert d.doc["crossover"] is None


def test_the_crossover_levels_stay_within_the_budget_of_levels_and_say_so(tmp_path: Path) -> None:
    load = _load(start=4, max_levels=5, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150}))
    d = _drive(tmp_path / "df", load, linear_ttft(48.0), SPEC_SLOTS, tok_s=spec_tok_s, baseline=base)
    x = d.doc["crossover"]
    assert len(d.doc["levels"]) == 5 and x["stopped"] == "max_levels" and x["step"] > 1


def test_a_config_faster_throughout_measures_the_baselines_highest_level_it_holds(tmp_path: Path) -> None:
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, load)
    d = _drive(
        tmp_path / "df",
        load,
        linear_ttft(48.0),
        {"max_running_requests": 12},  # plan-limited well below the crossover
        tok_s=lambda c: 2 * base_tok_s(c),
        baseline=base,
    )
    x = d.doc["crossover"]
    assert x["status"] == "faster throughout" and x["stopped"] == "faster throughout"
    assert _levels(d) == [4, 8, 12] and x["levels"] == []  # the baseline measured nothing in (8, 12]


def test_a_search_killed_while_locating_the_crossover_measures_nothing_twice(tmp_path: Path) -> None:
    load = _load(start=4, max_levels=8, slo={"ttft_ms_p99": 1150})
    base = _baseline_run(tmp_path, load)
    whole = _drive(
        tmp_path / "a" / "df", load, linear_ttft(48.0), SPEC_SLOTS, tok_s=spec_tok_s, baseline=base
    )
    slo_points = 2 * sum(lv["role"] == "slo" for lv in whole.doc["levels"])
    first: list[str] = []
    kw: dict[str, Any] = {"tok_s": spec_tok_s, "baseline": base}
    part = _drive(
        tmp_path / "df", load, linear_ttft(48.0), SPEC_SLOTS, stop_after=slo_points + 1, measured=first, **kw
    )
    assert not part.done and part.doc["verdict"] is None and part.doc["crossover"]["stopped"] is None
    second: list[str] = []
    again = _drive(tmp_path / "df", load, linear_ttft(48.0), SPEC_SLOTS, measured=second, **kw)
    assert not set(first) & set(second) and again.doc == whole.doc


def test_on_the_stand_ins_model_the_two_searches_find_its_limits_and_crossover(tmp_path: Path) -> None:
    """The sim host acceptance scenario (tests/python/test_search_simhost.py) in virtual time: every point
    is the stand-in's model (sglbench.sim.truth, no noise), the decisions are the search's."""
    import test_search_simhost as sim

    from sglbench.hostlib import metrics
    from sglbench.sim import truth

    models = Path(__file__).resolve().parents[1] / "fixtures" / "models"
    spec = search_spec(sim.BENCH)
    window = sim.BENCH["duration_s"] / sim.SCALE

    def model(i: int) -> truth.ServerModel:
        cfg = sim.MATRIX[i]
        flt = {"python": "python3", "port_base": 30000, "gpu_ids": [0]}
        argv = _instances(cfg, flt)[0]["argv"][3:]
        return truth.server_model([a.replace("/models/", f"{models}/") for a in argv], sim.UNIT_ENV)

    def run(name: str, m: truth.ServerModel, baseline: Path | None = None) -> dict[str, Any]:
        d = tmp_path / name
        cap = search.Capacity(m.max_running, m.max_total_tokens, "plan")
        while True:
            dec = search.decide(str(d), spec, cap, IDENTITY, str(baseline) if baseline else None)
            if dec.done:
                (d / "record.json").write_text(json.dumps({"outcome": "ok"}))
                return dec.doc
            p = dec.point
            assert p is not None
            load = truth.Workload((sim.PROMPT,), sim.OUTPUT, window, seed=p["repeat"])
            rows = truth.simulate(m, load, concurrency=p["concurrency"])
            summary = {**metrics.summarize_point(rows), "valid": True, "client": {"wall_s": 2.0}}
            resume.commit_point(str(d), p, outcome="ok", summary=summary, records=rows)

    ar, df = model(0), model(1)
    a = run("qwen27b-ar-tp1", ar)
    d = run("qwen27b-dflash-tp1", df, tmp_path / "qwen27b-ar-tp1")
    assert (a["verdict"], a["limit"], a["step"]) == ("limit_found", 22, 1) and len(a["levels"]) == 8
    assert (d["verdict"], d["limit"], d["bound_by"]) == ("plan_limited", 20, "max_running_requests")
    assert [lv["level"] for lv in d["levels"]] == [4, 8, 16, 20, 18, 19]  # then the crossover's levels
    x = d["crossover"]
    assert (x["status"], x["between"], x["step"], x["stopped"]) == ("crosses", [18, 19], 1, "resolved")
    true = truth.crossover(df, ar, truth.Workload((sim.PROMPT,), sim.OUTPUT, window), levels=[18, 19])
    assert true["speedup"][18] > 1 > true["speedup"][19]  # the model crosses between the same two levels


def _instances(cfg: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]]:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "plugins" / "filter" / "sglbench.py"
    mod_spec = importlib.util.spec_from_file_location("sglbench_filter_for_search", path)
    assert mod_spec and mod_spec.loader
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    out: list[dict[str, Any]] = mod.instances([cfg], settings)
    return out


# -- resumable, never measured twice ---------------------------------------------------------------
def test_a_killed_search_continues_where_it_stopped_and_measures_nothing_twice(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    killed = tmp_path / "killed"
    reference = _drive(whole, _load(max_levels=12), linear_ttft(45.0), SLOTS)
    first: list[str] = []
    part = _drive(
        killed,
        _load(max_levels=12),
        linear_ttft(45.0),
        SLOTS,
        stop_after=5,
        measured=first,
    )
    assert not part.done and part.point is not None and part.point["key"] == "c4-r1"  # killed mid-level
    assert first == ["c1-r0", "c1-r1", "c2-r0", "c2-r1", "c4-r0"]
    (killed / resume.POINTS_DIR / "c4-r0.json").unlink()  # the kill hit before this point's commit
    second: list[str] = []
    again = _drive(killed, _load(max_levels=12), linear_ttft(45.0), SLOTS, measured=second)
    assert second[0] == "c4-r0" and not set(first[:4]) & set(second)
    assert again.doc["limit"] == reference.doc["limit"] and _levels(again) == _levels(reference)
    assert [p["key"] for p in again.expected] == [p["key"] for p in reference.expected]
    # a third run decides done at once, from the committed points alone
    third: list[str] = []
    done = _drive(killed, _load(max_levels=12), linear_ttft(45.0), SLOTS, measured=third)
    assert third == [] and done.done and done.doc == again.doc


def test_a_partial_level_is_completed_before_anything_else(tmp_path: Path) -> None:
    d = _drive(tmp_path, _load(repeats=3), linear_ttft(45.0), SLOTS, stop_after=4)
    assert d.point is not None and d.point["key"] == "c2-r1"
    assert [p["key"] for p in d.expected][-3:] == ["c2-r0", "c2-r1", "c2-r2"]


def test_the_judgement_cache_is_refreshed_when_a_point_is_measured_again(tmp_path: Path) -> None:
    load = _load(max_levels=3)
    _drive(tmp_path, load, linear_ttft(45.0), SLOTS)
    state = json.loads((tmp_path / search.STATE_FILE).read_text())
    assert set(state["cache"]["levels"]) == {"c1", "c2", "c4"}
    spec = search.parse_spec(load)
    assert spec is not None
    # c2 measured again, now failing: the cached pass must not survive
    point = resume.level_points(IDENTITY, 2, None, 2, 0)[0]
    rows = _rows(60, 5000.0, 20.0, random.Random(0), noise=0.01)
    summary = {"n_err": 0, "valid": True, "client": {"wall_s": 2.0}}
    resume.commit_point(str(tmp_path), point, outcome="ok", summary=summary, records=rows, now=2e9)
    d = search.decide(str(tmp_path), spec, search.Capacity.from_args(SLOTS), IDENTITY)
    assert d.doc["levels"][1]["pass"] is False and d.doc["verdict"] == "limit_found" and d.doc["limit"] == 1


def test_committed_points_are_recognised_by_their_hash_not_their_name(tmp_path: Path) -> None:
    load = _load(max_levels=3)
    _drive(tmp_path, load, linear_ttft(45.0), SLOTS)
    spec = search.parse_spec(load)
    assert spec is not None
    keys = [p["key"] for p in search.committed_points(str(tmp_path), IDENTITY, spec)]
    assert keys == ["c1-r0", "c1-r1", "c2-r0", "c2-r1", "c4-r0", "c4-r1"]
    plan = resume.plan_points(str(tmp_path), search.committed_points(str(tmp_path), IDENTITY, spec))
    assert plan["moved"] == [] and len(plan["done"]) == 6
    # another attempt identity (other argv, SGLang, prompts...): the same files are stale, moved aside
    plan = resume.plan_points(str(tmp_path), search.committed_points(str(tmp_path), "o" * 64, spec))
    assert (
        plan["done"] == [] and {m["reason"] for m in plan["moved"]} == {"stale"} and len(plan["moved"]) == 12
    )


# -- settings ---------------------------------------------------------------------------------------
def test_the_fixed_ladder_stays_the_default() -> None:
    assert search.parse_spec({"repeats": 3}) is None
    assert search.parse_spec({"search": {"enabled": False, "mode": "rate"}}) is None


def _bad(slo: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"search": {"enabled": True, **settings}, "slo": slo}


P99 = {"ttft_ms_p99": 1}


@pytest.mark.parametrize(
    ("load", "message"),
    [
        (_bad(P99, mod="rate"), "search.mod is not a search"),
        (_bad(P99, mode="bisect"), "search.mode must be one of"),
        (_bad({}), "names no objective"),
        (_bad({"ttft_p99": 5}), "slo.ttft_p99 is not an SLO"),
        (_bad({"goodput": 0.99}), "goodput needs a per-request SLO"),
        (_bad({"ttft_ms": 1, "goodput": 99}), "slo.goodput is the least share"),
        (_bad(P99, start=2.5), "search.start must be a whole"),
        (_bad(P99, max_levels=0), "search.max_levels must be"),
        (_bad(P99, enabled="yes"), "search.enabled must be true or false"),
        (_bad({"itl_ms_p50": 1}, start=8, floor=16), "must not exceed"),
        ({**_bad(P99), "request_rate": [1.0]}, "request_rate must be empty"),
    ],
)
def test_bad_settings_fail_with_one_line_naming_the_field(load: dict[str, Any], message: str) -> None:
    with pytest.raises(search.SearchError) as err:
        search.parse_spec(load)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_objectives_come_from_the_slo_block_with_the_metric_names_of_the_result_schema() -> None:
    spec = search.parse_spec(
        _load(slo={"ttft_ms_p99": 2000, "itl_ms_p50": 25, "itl_ms_p99": 100, "tpot_ms": 50, "goodput": 0.99})
    )
    assert spec is not None
    assert [(o.name, o.bound) for o in spec.objectives] == [
        ("goodput", "lower"),
        ("itl_ms_p50", "upper"),
        ("itl_ms_p99", "upper"),
        ("ttft_ms_p99", "upper"),
    ]
    assert spec.request_slo.active() == {"tpot_ms": 50.0} and spec.iterations == 8 * (2 + 2)


def test_the_slo_keys_have_one_reading_for_the_search_and_the_deploy_answer() -> None:
    # without a goodput floor a per-request SLO is a ceiling on its p99 (the stricter of two wins)
    (obj,) = search.parse_objectives({"ttft_ms": 2000, "ttft_ms_p99": 1500})[0]
    assert (obj.name, obj.limit, obj.metric, obj.quantile) == ("ttft_ms_p99", 1500, "ttft_ms", 99)
    (obj,) = search.parse_objectives({"tpot_ms": 50})[0]
    assert obj.name == "tpot_ms_p99" and obj.limit == 50
    # with one, the per-request SLOs only count good requests
    objectives, request_slo = search.parse_objectives({"ttft_ms": 2000, "goodput": 0.99})
    assert [o.name for o in objectives] == ["goodput"] and request_slo.active() == {"ttft_ms": 2000.0}
    # a reader of results lists what is no SLO instead of failing
    objectives, _slo, unknown = search.read_objectives({"itl_ms_p50": 25, "ttft_ms_mean": 1, "goodput": 0.9})
    assert [o.name for o in objectives] == ["itl_ms_p50"] and unknown == ["goodput", "ttft_ms_mean"]
    with pytest.raises(search.SearchError, match=r"slo\.ttft_ms_mean is not an SLO"):
        search.parse_objectives({"ttft_ms_mean": 1})
