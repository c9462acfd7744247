"""sim/power.py and the nvidia-smi stand-in's telemetry: the power model, the published record, the
readings over a sample interval, the throttle setting, and a served point whose measured energy per token
is the model's."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from sim_harness import NVIDIA_SMI, Sim, launch, model, sim_env

from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.hostlib import loadgen, telemetry
from sglbench.hostlib.prompts import synthetic_prompts
from sglbench.sim import power, settings, truth

ARTIFACT = Path(__file__).resolve().parents[3] / "build" / "test-artifacts" / "sim_power.json"
KIND = hostlib_gpus.find_gpu("rtx-pro-6000")
assert KIND is not None
FIG = power.figures(KIND)


def test_every_gpu_kind_has_power_figures() -> None:
    for kind in hostlib_gpus.GPU_KINDS:
        fig = power.POWER_FIGURES[kind.name]
        assert 0 < fig.idle_w < fig.max_w and fig.boost_mhz > power.IDLE_SM_CLOCK_MHZ


def test_step_power_rises_with_intensity_and_falls_when_throttled() -> None:
    low, high = power.step_power_w(FIG, 0.0), power.step_power_w(FIG, 1.0)
    assert FIG.idle_w < low < high == pytest.approx(FIG.max_w)
    _bit, factor = power.THROTTLE_BITS["power"]
    assert FIG.idle_w < power.step_power_w(FIG, 0.0, factor) < low


def test_expected_energy_scales_with_time_and_speculation_costs_per_step() -> None:
    ar = truth.server_model(["--model-path", model("qwen3-8b")])
    e1 = power.expected_energy_per_output_token(KIND, ar.timing, prompt_tokens=100, output_tokens=64)
    e01 = power.expected_energy_per_output_token(
        KIND, ar.timing, prompt_tokens=100, output_tokens=64, time_scale=0.1
    )
    assert e01 == pytest.approx(e1 * 0.1)
    # a decode step at batch 1 is memory bound: its draw is near K_MEMORY of the swing
    step = ar.timing.decode_step(1, 200)
    assert e1 == pytest.approx(power.step_power_w(FIG, 0.0) * step, rel=0.1)


def test_meter_record_round_trip_and_readings(tmp_path: Path) -> None:
    now = [100.0]
    meter = power.Meter(FIG, [2, 5], str(tmp_path), clock=lambda: now[0])
    readings = power.Readings(FIG)
    busy_w = power.step_power_w(FIG, 0.0)
    meter.busy(0.0, 1.0)
    first = readings.read(str(tmp_path), [2, 3], now=100.5)  # the first sample: the state at once
    assert first[2].power_w == busy_w and first[2].util_pct == 100.0 and first[2].reasons == 0
    assert first[3].power_w == FIG.idle_w and first[3].reasons == power.REASON_GPU_IDLE  # nobody's GPU
    now[0] = 101.0
    meter.idle()  # the step has ended: nothing changes
    (board,) = power.read_boards(str(tmp_path))
    assert board.pid == os.getpid() and board.gpus == (2, 5)
    assert board.at(103.0) == pytest.approx((busy_w + FIG.idle_w * 2.0, 1.0))
    second = readings.read(str(tmp_path), [2], now=101.5)[2]  # half busy, half idle since the first
    assert second.power_w == pytest.approx((busy_w + FIG.idle_w) / 2)
    assert second.util_pct == pytest.approx(50.0) and second.reasons == 0
    now[0] = 101.5
    meter.set_throttle(102.0, 1.0, "thermal")
    throttled = readings.read(str(tmp_path), [2], now=102.5)[2]
    assert throttled.reasons == power.REASON_HW_THERMAL_SLOWDOWN | power.REASON_GPU_IDLE
    assert throttled.temp_c >= power.THERMAL_SLOWDOWN_TEMP_C
    now[0] = 102.5
    meter.busy(0.0, 1.0)  # a step inside the episode draws the throttled power
    assert readings.read(str(tmp_path), [2], now=102.9)[2].power_w == pytest.approx(
        power.step_power_w(FIG, 0.0, power.THROTTLE_BITS["thermal"][1])
    )
    after = readings.read(str(tmp_path), [2], now=103.5)[2]
    assert after.reasons == 0
    now[0] = 103.5
    meter.idle()
    now[0] = 104.0
    meter.busy(0.0, 0.25)  # a step the scheduler is late to follow: the rest of the time is idle
    late = readings.read(str(tmp_path), [2], now=104.5)[2]
    assert late.util_pct == pytest.approx(25.0)  # 0.25 s busy of the 1.0 s since the reading before
    assert late.power_w == pytest.approx((busy_w * 0.25 + FIG.idle_w * 0.75) / 1.0)
    now[0] = 104.25
    meter.idle()
    busy_before = meter.busy_s
    now[0] = 105.0
    meter.busy(0.0, 0.5)
    now[0] = 105.2
    meter.busy(0.0, 0.5)  # the scheduler caught up on its clock: the step before was 0.2 s
    now[0] = 106.5
    meter.idle()  # late: the last step counts busy for its own 0.5 s only
    assert meter.busy_s - busy_before == pytest.approx(0.7)
    meter.close()
    assert power.read_boards(str(tmp_path)) == []


def test_throttle_setting() -> None:
    assert settings.load_settings({}).throttle is None
    got = settings.load_settings({"SGLBENCH_SIM_THROTTLE": "5:2.5:thermal"}).throttle
    assert got == settings.Throttle(5.0, 2.5, "thermal")
    assert settings.load_settings({"SGLBENCH_SIM_THROTTLE": "1:2"}).throttle == settings.Throttle(1.0, 2.0)
    for bad in ("5", "a:b", "1:0", "1:2:hot", "-1:2"):
        with pytest.raises(settings.SimSettingsError, match="SGLBENCH_SIM_THROTTLE"):
            settings.load_settings({"SGLBENCH_SIM_THROTTLE": bad})


def test_nvidia_smi_query_forms(tmp_path: Path) -> None:
    env = sim_env(tmp_path / "state")
    run = [sys.executable, str(NVIDIA_SMI)]
    one = subprocess.run(
        [*run, "--query-gpu=" + ",".join(telemetry.GPU_FIELDS), "--format=csv,noheader,nounits", "-i", "1"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(one) == 1
    row, from_smi = telemetry.parse_gpu_line(one[0], telemetry.time.time())
    assert from_smi and row[1:] == [1, FIG.idle_w, 0.0, 0.0, 0.0, power.IDLE_SM_CLOCK_MHZ, 32.0, 1]
    header = subprocess.run(
        [*run, "--query-gpu=power.draw,clocks.sm", "--format=csv"], env=env, capture_output=True, text=True
    ).stdout.splitlines()
    assert header[0] == "power.draw [W], clocks.sm [MHz]" and header[1] == f"{FIG.idle_w:.2f} W, 345 MHz"


def _window_energy(rows: list[list], gpu: int, start: float, end: float) -> float:
    """Trapezoid of one GPU's power over [start, end], the ends interpolated."""
    pts = sorted((r[0], r[2]) for r in rows if r[1] == gpu)
    energy = 0.0
    for (t0, p0), (t1, p1) in itertools.pairwise(pts):
        a, b = max(t0, start), min(t1, end)
        if b <= a:
            continue
        pa = p0 + (p1 - p0) * (a - t0) / (t1 - t0)
        pb = p0 + (p1 - p0) * (b - t0) / (t1 - t0)
        energy += (pa + pb) / 2 * (b - a)
    return energy


def test_served_points_energy_follows_the_model_and_the_throttle_shows(tmp_path: Path) -> None:
    """Three points at concurrency 1 on a stand-in at time scale 0.2 (start-up phases made instant),
    sampled through the stand-in's nvidia-smi every 50 ms, with a throttling episode 1.6 s after the server
    is ready: a point the episode misses has about the model's J/token (15 %, see below); the power-cap
    bit shows for the episode's length only, and capped samples draw less than the others. The 0.4 s
    episode can reach two of the 1 s windows at most, wherever a loaded machine puts them: one is missed."""
    scale, prompt, output = 0.2, 128, 48
    args = ["--model-path", model("qwen3-8b"), "--enable-metrics"]
    fast_start = {
        "SGLBENCH_SIM_INIT_SECONDS": "0",
        "SGLBENCH_SIM_GRAPH_SECONDS": "0",
        "SGLBENCH_SIM_LOAD_GIBPS": "1000",
    }
    env = sim_env(
        tmp_path / "state", SGLBENCH_SIM_TIME_SCALE=str(scale), SGLBENCH_SIM_THROTTLE="1.6:0.4", **fast_start
    )
    sim: Sim = launch(tmp_path / "srv", args, env=env)
    try:
        smi = tmp_path / "nvidia-smi"
        smi.write_text(
            f"#!/bin/sh\nexec env SGLBENCH_SIM_STATE_DIR={env['SGLBENCH_SIM_STATE_DIR']} "
            f'PYTHONPATH={env["PYTHONPATH"]} {sys.executable} {NVIDIA_SMI} "$@"\n'
        )
        smi.chmod(0o755)
        cfg = telemetry.TelemetryConfig(
            enabled=True,
            gpus=(0,),
            gpu_interval_ms=50,
            server_interval_ms=200,
            metrics=True,
            load_endpoint="/v1/loads",
            nvidia_smi=str(smi),
        )
        hooks = telemetry.PointSampling(cfg, sim.url)
        spec = loadgen.BenchSpec(
            url=sim.url,
            prompts=synthetic_prompts(64, prompt, 0),
            points=[loadgen.LoadPoint(concurrency=1)] * 3,
            sampling=loadgen.SamplingSpec(max_new_tokens=output, ignore_eos=True),
            num_prompts=10**6,
            duration_s=1.0,
            warmup=1,
            repeats=1,
        )
        result = loadgen.run_campaign(spec, hooks=hooks)
    finally:
        sim.stop()
    served = truth.server_model(args, {k: v for k, v in env.items() if k.startswith("SGLBENCH_SIM_")})
    expected = power.expected_energy_per_output_token(
        KIND, served.timing, prompt_tokens=prompt, output_tokens=output, time_scale=scale
    )
    capped = [r for parts in hooks.points for r in parts["gpu"]["rows"] if r[8] & power.REASON_SW_POWER_CAP]
    assert capped
    episode = (min(r[0] for r in capped), max(r[0] for r in capped))
    # never longer than the 0.4 s episode (plus one sample's stamp); shorter when a loaded machine delays the
    # samples at its edges, so only 'more than one sample' is asked of its length
    assert 0.05 < episode[1] - episode[0] <= 0.45
    unaffected = 0
    figures = {"expected_j_per_token": expected, "episode_s": episode[1] - episode[0], "points": []}
    for pr, parts in zip(result.points, hooks.points, strict=True):
        window = telemetry.measured_window(pr.t0_wall, pr.records)
        rows = parts["gpu"]["rows"]
        assert parts["errors"] == [] and rows
        assert min(r[0] for r in rows) <= window["start"] and max(r[0] for r in rows) >= window["end"] - 0.002
        # /metrics and /v1/loads carry the scheduler's live state: one request running at concurrency 1
        server = parts["server"]["rows"]
        in_window = [r for r in server if window["start"] < r[0] < window["end"]]
        # A read between two requests sees none. How many reads do depends on the client's turnaround and
        # the stand-in's admission, which a loaded machine stretches: only 'one running, sometimes none'.
        for source in ("metrics", "load"):
            running = [r[3] for r in in_window if r[1:3] == [source, "num_running_reqs"]]
            assert set(running) <= {0.0, 1.0} and 1.0 in running, (source, running)
        assert max(r[3] for r in in_window if r[1:3] == ["metrics", "token_usage"]) > 0
        assert max(r[3] for r in server if r[1:3] == ["metrics", "gen_throughput"]) > 0
        busy = [
            r[2]
            for r in rows
            if not r[8] & (power.REASON_GPU_IDLE | power.REASON_SW_POWER_CAP)
            and window["start"] < r[0] < window["end"]
        ]
        assert statistics.median(busy) > statistics.median(c[2] for c in capped)
        if episode[1] + 0.05 < window["start"] or episode[0] - 0.05 > window["end"]:
            unaffected += 1
            tokens = sum(r.completion_tokens or 0 for r in pr.records if r.end_s is not None)
            measured = _window_energy(rows, 0, window["start"], window["end"]) / tokens
            valid = bool(pr.summary.get("valid"))
            figures["points"].append(
                {
                    "measured_j_per_token": measured,
                    "overhead_s": parts["sampling"]["overhead_s"],
                    "valid": valid,
                }
            )
            # The stand-in shares this machine's cores with the other test lanes: a starved scheduler
            # runs its steps longer than modelled, at the same power. So this plumbing check allows 15 %
            # on a point the client judged valid; the 5 % agreement is
            # tests/python/test_telemetry_simhost.py's (inventory/sim's time scale). A point measured while
            # this machine starved the processes (+37 % seen) cannot be judged, and must say so.
            if valid:
                assert measured == pytest.approx(expected, rel=0.15)
            else:  # only the client's self-check may reject it: a starved machine, not the server
                reasons = pr.summary["invalid_reasons"]
                assert reasons and set(reasons) <= set(pr.summary["client"]["reasons"]), reasons
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))
    assert unaffected >= 1
