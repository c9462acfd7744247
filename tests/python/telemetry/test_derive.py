from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from recordfactory import raw_telemetry

from sglbench import resume
from sglbench.telemetry import clock, derive, steady

START, SECONDS = 1_000.0, 10.0


def test_constant_power_energy_per_token_and_cost() -> None:
    raw = raw_telemetry(start=START, seconds=SECONDS, gpus=(0, 1), power_w=250.0)
    off = clock.estimate(START - 3.0, START + SECONDS + 3.0, START - 1.5, START + SECONDS + 1.5)
    tokens, price = 4000, 2.5
    out = derive.derive(raw, clock=off, output_tokens=tokens, gpu_hour_usd=price)
    energy = 2 * 250.0 * SECONDS
    assert out["energy_j"] == pytest.approx(energy)
    assert out["j_per_token"] == pytest.approx(energy / tokens)
    assert out["tokens_per_j"] == pytest.approx(tokens / energy)
    assert [g["tokens_per_j"] for g in out["per_gpu"]] == pytest.approx([tokens / (energy / 2)] * 2)
    assert out["power_mean_w"] == pytest.approx(500.0)
    assert out["power_peak_w"] == pytest.approx(250.0)
    usd = price * 2 * SECONDS / 3600
    assert out["cost"]["usd"] == pytest.approx(usd)
    assert out["cost"]["usd_per_mtok"] == pytest.approx(usd / tokens * 1e6)
    assert out["flags"] == []
    assert out["steady"]["status"] == steady.TOO_SHORT  # ten 1 s scrapes: two MSER batches
    assert out["window"]["controller_start"] == pytest.approx(START - off.offset_s)
    assert out["clock"]["offset_s"] == pytest.approx(off.offset_s)


def test_energy_covers_exactly_the_window_when_power_steps_inside_a_sampling_interval() -> None:
    # 100 W until t=1004.3, then 500 W; samples every 0.2 s do not fall on the window edges.
    raw = raw_telemetry(
        start=START + 0.05, seconds=SECONDS, power_w=lambda t, g: 100.0 if t < START + 4.3 else 500.0
    )
    out = derive.derive(raw)
    # Exact integral of the piecewise-linear series the samples describe: the step is one ramp of 0.2 s,
    # from the last 100 W sample.
    times = [row[0] for row in raw["gpu"]["rows"]]
    ramp_start = max(t for t in times if t < START + 4.3)
    before = (ramp_start - (START + 0.05)) * 100.0
    ramp = 0.2 * 300.0
    after = (START + 0.05 + SECONDS - (ramp_start + 0.2)) * 500.0
    assert out["energy_j"] == pytest.approx(before + ramp + after, rel=1e-9)


def test_a_gap_is_bridged_flagged_and_located() -> None:
    raw = raw_telemetry(gpus=(0, 1), drop=lambda t, g: g == 1 and START + 3.0 < t < START + 6.0)
    out = derive.derive(raw, output_tokens=100)
    assert "gaps" in out["flags"]
    (gap,) = [g for g in out["gaps"] if g.get("gpu") == 1]
    assert gap["start"] == pytest.approx(START + 3.0) and gap["end"] == pytest.approx(START + 6.0)
    assert out["energy_j"] == pytest.approx(2 * 300.0 * SECONDS)  # constant power: the bridge is exact


def test_a_gpu_without_samples_leaves_energy_unknown() -> None:
    raw = raw_telemetry(gpus=(0, 1), drop=lambda t, g: g == 1)
    out = derive.derive(raw, output_tokens=100)
    assert out["energy_j"] is None and out["j_per_token"] is None and out["power_mean_w"] is None
    assert out["missing_gpus"] == [1]
    assert {"missing_gpu", "gaps"} <= set(out["flags"])
    assert out["per_gpu"][0]["energy_j"] == pytest.approx(300.0 * SECONDS)


def test_thermal_throttling_flags_the_point_and_idle_does_not() -> None:
    hot = raw_telemetry(throttle=lambda t, g: 0x40 if START + 2.0 <= t < START + 4.0 else 0x1)
    out = derive.derive(hot)
    assert out["throttled_share"] == pytest.approx(0.2, abs=0.021)
    assert out["throttle_reasons"] == ["hw_thermal_slowdown"]
    assert "throttled" in out["flags"]
    idle = derive.derive(raw_telemetry(throttle=0x1))
    assert idle["throttled_share"] == 0.0 and "throttled" not in idle["flags"]
    # An episode entirely outside the window is not the point's.
    before = derive.derive(raw_telemetry(throttle=lambda t, g: 0x4 if t < START - 0.3 else 0))
    assert before["throttled_share"] == 0.0


def test_server_figures() -> None:
    raw = raw_telemetry(
        running=lambda t: 8.0,
        queued=lambda t: 3.0 if START + 4 <= t <= START + 5 else 0.0,
        kv_usage=lambda t: 0.2 + 0.06 * (t - START),
    )
    raw["server"]["rows"] += [
        [START - 1.0, "metrics", "num_retracted_requests_total", 2.0],
        [START + 5.0, "metrics", "num_retracted_requests_total", 5.0],
        [START + 11.0, "metrics", "num_retracted_requests_total", 9.0],
    ]
    s = derive.derive(raw)["server"]
    assert s["running_mean"] == pytest.approx(8.0)
    assert s["queue_peak"] == pytest.approx(3.0)
    assert s["kv_usage_mean"] == pytest.approx(0.2 + 0.06 * SECONDS / 2)
    # The counter is read at the window's edges, linear between its samples.
    at_start = 2.0 + (5.0 - 2.0) * 1.0 / 6.0
    at_end = 5.0 + (9.0 - 5.0) * 5.0 / 6.0
    assert s["retractions"] == pytest.approx(at_end - at_start)
    assert s["spec_accept_length_mean"] is None


def test_queue_falls_back_to_the_load_endpoint() -> None:
    raw = raw_telemetry(queued=6.0)
    raw["server"]["rows"] = [r for r in raw["server"]["rows"] if r[2] != "num_queue_reqs"]
    assert derive.derive(raw)["server"]["queue_peak"] == pytest.approx(6.0)


def test_steady_window_of_a_ramping_point_excludes_the_ramp() -> None:
    seconds, ramp_s = 60.0, 12.0
    raw = raw_telemetry(
        seconds=seconds,
        server_interval_ms=500,
        running=lambda t: min(16.0, 16.0 * max(0.0, t - START) / ramp_s),
        gen_throughput=lambda t: 50.0 * min(16.0, 16.0 * max(0.0, t - START) / ramp_s),
        power_w=lambda t, g: 150.0 + 20.0 * min(16.0, 16.0 * max(0.0, t - START) / ramp_s),
    )
    out = derive.derive(raw, output_tokens=20_000)
    st = out["steady"]
    assert st["status"] == steady.STEADY and st["series"] == "metrics:num_running_reqs"
    assert st["start"] >= START + ramp_s
    assert st["power_mean_w"] == pytest.approx(150.0 + 20.0 * 16.0)
    assert st["j_per_token"] == pytest.approx((150.0 + 320.0) / (50.0 * 16.0))
    assert out["power_mean_w"] < st["power_mean_w"]  # the whole window includes the ramp
    assert "not_steady" not in out["flags"]


def test_a_point_that_only_ramps_is_flagged() -> None:
    raw = raw_telemetry(seconds=40.0, server_interval_ms=500, running=lambda t: 0.5 * (t - START + 1))
    out = derive.derive(raw)
    assert out["steady"]["status"] == steady.NOT_STEADY and "not_steady" in out["flags"]
    assert "start" not in out["steady"]


def test_missing_clock_and_host_errors_are_flagged() -> None:
    errs = [f"sample {i} unreadable" for i in range(derive.MAX_ERRORS + 5)]
    out = derive.derive(raw_telemetry(errors=errs), clock=clock.unknown("no controller times"))
    assert {"clock_unknown", "sampling_errors"} <= set(out["flags"])
    assert out["n_errors"] == len(errs) and len(out["errors"]) == derive.MAX_ERRORS
    assert out["window"]["controller_start"] is None


def _blank(raw: dict[str, Any], column: str, value: Any) -> dict[str, Any]:
    i = raw["gpu"]["columns"].index(column)
    for r in raw["gpu"]["rows"]:
        r[i] = value
    return raw


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), "[N/A]"])
def test_unreadable_power_samples_count_as_missing(bad: Any) -> None:
    out = derive.derive(_blank(raw_telemetry(), "power_w", bad), output_tokens=10)
    assert out["energy_j"] is None and out["missing_gpus"] == [0]


def test_empty_document_parts() -> None:
    raw = raw_telemetry()
    raw["gpu"] = {"columns": [], "rows": []}
    raw["server"] = None
    out = derive.derive(raw, output_tokens=0, gpu_hour_usd=None)
    assert out["energy_j"] is None and out["server"] is None and out["cost"] is None
    assert out["steady"]["status"] == steady.NO_SERIES
    assert out["output_tokens"] is None
    # A row of the wrong width is skipped, not misread.
    raw2 = raw_telemetry()
    raw2["gpu"]["rows"].append([START + 1.0, 0, 9e9])
    assert derive.derive(raw2)["power_peak_w"] == pytest.approx(300.0)


@pytest.mark.parametrize(
    "raw", [None, [], {"window": None}, {"window": {"start": 5.0, "end": 1.0}}, {"window": {"start": "a"}}]
)
def test_unusable_documents_raise(raw: Any) -> None:
    with pytest.raises(derive.TelemetryError):
        derive.derive(raw)


def test_huge_numbers_stay_finite_and_json_safe() -> None:
    out = derive.derive(raw_telemetry(power_w=1e300, gpus=(0, 1)), output_tokens=2**62, gpu_hour_usd=1e12)
    assert out["energy_j"] is None or math.isfinite(out["energy_j"])
    for key in ("j_per_token", "tokens_per_j", "power_mean_w"):
        assert out[key] is None or math.isfinite(out[key])
    assert math.isfinite(out["cost"]["usd_per_mtok"])


def test_cost_needs_a_price_and_gpus() -> None:
    assert derive.cost(None, 1, 10.0, 100) is None
    assert derive.cost(-1.0, 1, 10.0, 100) is None
    assert derive.cost(float("nan"), 1, 10.0, 100) is None
    assert derive.cost(3.0, 0, 10.0, 100) is None
    doc = derive.cost(3.6, 4, 100.0, None)
    assert (
        doc is not None
        and doc["usd"] == pytest.approx(3.6 * 4 * 100.0 / 3600)
        and doc["usd_per_mtok"] is None
    )


def test_every_listed_figure_is_derived_and_read_back() -> None:
    """Each TELEMETRY_FIGURES entry names a place derive() fills: a rich point has every one."""
    from sglbench.hostlib import result_schema

    raw = raw_telemetry(seconds=60.0, server_interval_ms=500, gen_throughput=800.0)
    raw["server"]["rows"] += [
        [START - 1.0, "metrics", "spec_accept_length", 2.5],
        [START + 61.0, "metrics", "spec_accept_length", 2.5],
        [START - 1.0, "metrics", "num_retracted_requests_total", 0.0],
        [START + 61.0, "metrics", "num_retracted_requests_total", 1.0],
    ]
    off = clock.estimate(START - 2, START + 62, START - 1.5, START + 61.5)
    doc = derive.derive(raw, clock=off, output_tokens=48_000, gpu_hour_usd=3.0)
    tel = result_schema.PointTelemetry.from_reader(result_schema.Reader("mem", doc))
    missing = [f.key for f in result_schema.TELEMETRY_FIGURES if tel.figure(f.key) is None]
    assert missing == []
    assert tel.steady_status == steady.STEADY and tel.gpus == [0]
    assert set(doc["flags"]) <= set(result_schema.TELEMETRY_FLAGS)


@given(
    gaps=st.lists(st.floats(0.01, 0.6), min_size=30, max_size=120),
    power=st.floats(0.0, 1500.0),
    n_gpus=st.integers(1, 4),
    offset=st.floats(0.0, 0.5),
)
@settings(max_examples=40, deadline=None)
def test_constant_power_integrates_exactly_over_any_irregular_sampling(
    gaps: list[float], power: float, n_gpus: int, offset: float
) -> None:
    times = [START - 1.0]
    for g in gaps:
        times.append(times[-1] + g)
    end = times[-1] - 0.5
    assume(end - (START + offset) > 1.0)
    raw = raw_telemetry(start=START + offset, seconds=end - START - offset, gpus=tuple(range(n_gpus)))
    raw["gpu"]["rows"] = [[t, g, power, 0, 0, 0, 1500.0, 50.0, 0] for t in times for g in range(n_gpus)]
    out = derive.derive(raw, output_tokens=100)
    seconds = end - START - offset
    assert out["energy_j"] == pytest.approx(power * n_gpus * seconds, rel=1e-6, abs=1e-6)
    assert out["throttled_share"] == 0.0
    # Flagged as gaps exactly when a step between two samples that reaches into the window is longer than
    # three intervals (the samples begin before the window and end after it).
    long_step = any(b - a > 3 * 0.2 and b > START + offset and a < end for a, b in pairwise(times))
    assert ("gaps" in out["flags"]) == long_step


def test_no_steady_window_begins_before_the_first_request_completed() -> None:
    """A noisy open-loop ramp of 3 s: MSER-5 cuts inside it (at 2.5 s here); requests in flight can only
    grow until the first one completes, so the steady window starts no earlier (and a window with too
    little left is not steady)."""
    import random

    ramp_s = 3.0
    rng = random.Random(5)
    noise = {round(START + i * 0.1, 1): rng.gauss(0, 2.5) for i in range(400)}

    def running(t: float) -> float:
        level = min(10.0, 10.0 * max(0.0, t - START) / ramp_s)
        return max(0.0, level + noise.get(round(t, 1), 0.0))

    raw = raw_telemetry(seconds=30.0, server_interval_ms=100, running=running)
    plain = derive.derive(raw)["steady"]
    after = derive.derive(raw, steady_after=START + ramp_s)["steady"]
    assert plain["status"] == after["status"] == steady.STEADY
    assert plain["start"] < START + ramp_s and after["start"] == pytest.approx(START + ramp_s)
    assert derive.derive(raw, steady_after=START + 29.5)["steady"]["status"] == steady.NOT_STEADY


def test_first_completed_is_the_earliest_measured_success() -> None:
    rows = [
        {"warmup": True, "end_s": 0.1},
        {"end_s": 0.9, "error": "boom"},
        {"end_s": 1.5},
        {"end_s": 1.2},
        {"end_s": None},
    ]
    assert resume.first_completed({"t0_unix": 100.0}, rows) == pytest.approx(101.2)
    assert resume.first_completed({}, rows) is None and resume.first_completed({"t0_unix": 1.0}, []) is None
