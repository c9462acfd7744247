"""sim/power.py and the nvidia-smi stand-in's telemetry: the power model, the published record, the
readings over a sample interval, the throttle setting, and a load served through a throttling episode
whose readings, cap bit, draws and J/token hold to the serving process's own account."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sim_harness import NVIDIA_SMI, Sim, free_port, launch, model, sim_env

from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.hostlib import loadgen, telemetry
from sglbench.hostlib.prompts import synthetic_prompts
from sglbench.sim import power, settings, truth
from sglbench.sim.timing import TimingModel
from sglbench.telemetry import derive

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
    """Trapezoid of one GPU's power over [start, end], the ends interpolated (what the telemetry reader
    documents for a point's energy)."""
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


def _wall_minus_monotonic() -> float:
    """``time.time() - time.monotonic()``, from the tightest of a few paired reads (the stand-in's record
    is on the monotonic clock, nvidia-smi's timestamps on the wall clock)."""
    best: tuple[float, float] | None = None
    for _ in range(50):
        a = time.monotonic()
        wall = time.time()
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, wall - (a + b) / 2)
    assert best is not None
    return best[1]


@dataclass(frozen=True)
class _Account:
    """The stand-in's own energy account of its GPU, read from its published record at one instant."""

    wall: float
    energy_j: float
    busy_s: float
    board: power.Board


def _account(state_dir: str, offset: float) -> _Account:
    (board,) = power.read_boards(state_dir)
    now = time.monotonic()
    energy, busy = board.at(now)
    return _Account(now + offset, energy, busy, board)


def _wait_rows(sampler: telemetry.Sampler, ok: Callable[[list[list]], bool], what: str) -> None:
    """Wait until the sampler's GPU rows satisfy ``ok``; the bound only sizes a failure."""
    deadline = time.monotonic() + 60.0
    while not ok(sorted(list(sampler.gpu_rows))):
        assert time.monotonic() < deadline, f"no {what} within 60 s: {sampler.errors.as_list()}"
        time.sleep(0.01)


def _share_band(timing: TimingModel, concurrency: int, prompt: int, output: int) -> tuple[float, float]:
    """The lowest and highest share of the idle-to-limit swing any step of the load can draw: prefills of
    up to ``concurrency`` prompts at once, decode steps of up to ``concurrency`` requests."""
    shares = [timing.prefill_intensity(n) for n in range(1, concurrency * prompt + 1)]
    shares += [
        timing.decode_intensity(b, kv)
        for b in range(1, concurrency + 1)
        for kv in range(prompt, b * (prompt + output) + 1)
    ]
    k = [power.K_MEMORY + (power.K_COMPUTE - power.K_MEMORY) * min(1.0, max(0.0, x)) for x in shares]
    return min(k), max(k)


def test_served_load_through_a_throttle_episode_matches_the_stand_ins_own_account(tmp_path: Path) -> None:
    """One GPU sampled through the nvidia-smi stand-in every 50 ms by the product's sampler, running from
    before the stand-in starts to after the load has ended, and a closed-loop load (concurrency 2)
    running from before a power-cap episode to after it. Everything judged is a fact of the stand-in's
    own account (its published record: cumulative energy and busy seconds, the episode's bounds on the
    monotonic clock) or holds by sample order, so a loaded machine (sparser samples, starved steps)
    cannot change a verdict:

    - the readings carry the account: their energy and busy time between two samples the server was idle
      at are the account's between those instants (1 %);
    - the cap bit shows on every sample read inside the episode and on none read outside it (a sample is
      read between its own timestamp and the next one's), and the product's reader names it;
    - power per busy second (``(power - idle) / utilization``) is the model's step draw for this load,
      times the throttle factor inside the episode (median of the samples whose interval lies inside),
      and the SM clock the boost clock, times the factor inside;
    - the point's energy and J/token from the product's reader are the trapezoid of the rows over the
      measured window, and within the trapezoid's own discretization (bounded from the actual samples)
      of the account's energy over that window."""
    prompt, output, concurrency = 8, 64, 2
    offset_s, episode_s = 2.0, 1.5
    args = ["--model-path", model("qwen3-8b"), "--enable-metrics"]
    fast_start = {
        "SGLBENCH_SIM_INIT_SECONDS": "0",
        "SGLBENCH_SIM_GRAPH_SECONDS": "0",
        "SGLBENCH_SIM_LOAD_GIBPS": "1000",
    }
    env = sim_env(
        tmp_path / "state",
        SGLBENCH_SIM_TIME_SCALE="1",
        SGLBENCH_SIM_THROTTLE=f"{offset_s}:{episode_s}:power",
        **fast_start,
    )
    state_dir = env["SGLBENCH_SIM_STATE_DIR"]
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!/bin/sh\nexec env SGLBENCH_SIM_STATE_DIR={state_dir} "
        f'PYTHONPATH={env["PYTHONPATH"]} {sys.executable} {NVIDIA_SMI} "$@"\n'
    )
    smi.chmod(0o755)
    port = free_port()
    gpu_cfg = telemetry.TelemetryConfig(enabled=True, gpus=(0,), gpu_interval_ms=50, nvidia_smi=str(smi))
    server_cfg = telemetry.TelemetryConfig(
        enabled=True, server_interval_ms=200, metrics=True, load_endpoint="/v1/loads"
    )
    offset = _wall_minus_monotonic()
    sampler = telemetry.Sampler(gpu_cfg, f"http://127.0.0.1:{port}")
    sampler.start()  # before the server: a GPU nobody serves on reads idle
    scraper = telemetry.Sampler(server_cfg, f"http://127.0.0.1:{port}")
    sim: Sim | None = None
    try:
        sim = launch(tmp_path / "srv", args, env=env, port=port)
        scraper.start()
        before = _account(state_dir, offset)
        board = before.board
        assert board.throttle_bits == power.REASON_SW_POWER_CAP
        episode = (board.throttle_from + offset, board.throttle_to + offset)
        # two samples read while the server is idle, before any request
        _wait_rows(sampler, lambda rows: sum(r[0] >= before.wall for r in rows) >= 2, "idle samples")
        lead = episode[0] - time.time()
        assert lead > 0, f"the load would begin {-lead:.2f} s after the episode began"
        spec = loadgen.BenchSpec(
            url=sim.url,
            prompts=synthetic_prompts(64, prompt, 0),
            points=[loadgen.LoadPoint(concurrency=concurrency)],
            sampling=loadgen.SamplingSpec(max_new_tokens=output, ignore_eos=True),
            num_prompts=10**6,
            duration_s=lead + episode_s + 1.5,  # to well after the episode
            warmup=0,
            repeats=1,
        )
        result = loadgen.run_campaign(spec)
        after = _account(state_dir, offset)  # every request has ended: the server is idle
        # two samples read after that, so the last interval judged lies in the idle time
        _wait_rows(sampler, lambda rows: sum(r[0] >= after.wall for r in rows) >= 2, "samples after the load")
    finally:
        parts = sampler.stop()
        scraped = scraper.stop()
        if sim is not None:
            sim.stop()
    assert parts["errors"] == [] and scraped["errors"] == [], (parts["errors"], scraped["errors"])
    fig, idle_w = board.fig, board.fig.idle_w
    rows = [r for r in parts["gpu"]["rows"] if r[1] == 0]
    t = [r[0] for r in rows]
    (pr,) = result.points
    window = telemetry.measured_window(pr.t0_wall, pr.records)
    start, end = window["start"], window["end"]
    assert start is not None and end is not None and start >= before.wall and end <= after.wall
    figures: dict[str, object] = {"samples": len(rows), "episode": episode, "window": [start, end]}

    # The readings carry the account: between a sample read in the idle time before the load (read
    # between its timestamp and the next one's, both before the first request) and one read after it.
    idle_before = [k for k in range(len(rows) - 1) if t[k] >= before.wall and t[k + 1] <= start]
    idle_after = [k for k in range(len(rows)) if t[k] >= after.wall]
    assert idle_before and idle_after, "no sample read in the idle time before or after the load"
    a, b = idle_before[-1], idle_after[0]
    read_j = sum(rows[k][2] * (t[k] - t[k - 1]) for k in range(a + 1, b + 1))
    read_busy = sum(rows[k][3] / 100 * (t[k] - t[k - 1]) for k in range(a + 1, b + 1))
    account_j = (
        after.energy_j + idle_w * (t[b] - after.wall) - before.energy_j - idle_w * (t[a] - before.wall)
    )
    account_busy = after.busy_s - before.busy_s
    figures.update(read_j=read_j, account_j=account_j, read_busy_s=read_busy, account_busy_s=account_busy)
    assert read_j == pytest.approx(account_j, rel=0.01)
    # Utilization is printed in whole percent (half a percent of the span at most) and capped at 100 %: a
    # step that ran late is read as idle past its nominal end, and the reading after it cannot show more
    # than all busy, so the readings may only fall short of the account's busy time.
    assert read_busy <= account_busy + 0.005 * (t[b] - t[a])

    # The cap bit, by when each sample was read: after its timestamp, before the next sample's.
    capped = [bool(r[8] & power.REASON_SW_POWER_CAP) for r in rows]
    inside = [k for k in range(len(rows) - 1) if t[k] >= episode[0] and t[k + 1] < episode[1]]
    outside = [k for k in range(len(rows) - 1) if t[k + 1] < episode[0] or t[k] >= episode[1]]
    assert len(inside) >= 3 and all(capped[k] for k in inside), [(t[k], rows[k][8]) for k in inside]
    assert not any(capped[k] for k in outside), [(t[k], rows[k][8]) for k in outside if capped[k]]
    assert any(capped), "no power-cap sample"
    first_cap, last_cap = (
        min(k for k in range(len(rows)) if capped[k]),
        max(k for k in range(len(rows)) if capped[k]),
    )
    assert all(capped[first_cap : last_cap + 1]), "the cap bit came and went"

    # Power per busy second and the SM clock: the model's step draw for this load, throttled inside.
    served = truth.server_model(args, {k: v for k, v in env.items() if k.startswith("SGLBENCH_SIM_")})
    lo, hi = _share_band(served.timing, concurrency, prompt, output)
    factor = board.throttle_factor
    assert factor == power.THROTTLE_BITS["power"][1]
    swing = fig.max_w - fig.idle_w

    def dynamic_w(k: int) -> float:
        return (rows[k][2] - idle_w) / (rows[k][3] / 100)

    busy_inside = [k for k in inside if k > 0 and t[k - 1] >= episode[0] and rows[k][3] >= 50]
    busy_before = [k for k in outside if t[k + 1] < episode[0] and rows[k][3] >= 50 and t[k - 1] >= start]
    busy_after = [k for k in outside if k > 0 and t[k - 1] >= episode[1] and rows[k][3] >= 50]
    for ks, scale, where in ((busy_inside, factor, "inside"), (busy_before + busy_after, 1.0, "outside")):
        assert len(ks) >= 3, (where, ks)
        median = statistics.median(dynamic_w(k) for k in ks)
        figures[f"dynamic_w_{where}"] = median
        # A reading after a step that ran late counts its energy but no more than all busy: it may read
        # high, never low (rounding aside). Throttled, the highest step draws far below the lowest
        # unthrottled one.
        assert swing * lo * scale * 0.98 <= median <= swing * hi * scale * 1.15, (where, median, lo, hi)
        assert all(rows[k][6] == round(fig.boost_mhz * scale) for k in ks), (where, [rows[k][6] for k in ks])

    # The point's energy and J/token from the product's reader, against the account over the window.
    tokens = sum(r.completion_tokens or 0 for r in pr.records if r.end_s is not None)
    raw = telemetry.point_telemetry(parts, window, before.wall, after.wall)
    got = derive.derive(raw, output_tokens=tokens)
    assert "sw_power_cap" in got["throttle_reasons"] and "throttled" in got["flags"]
    trapezoid = _window_energy(rows, 0, start, end)
    assert got["energy_j"] == pytest.approx(trapezoid, rel=1e-6)
    assert got["j_per_token"] == pytest.approx(trapezoid / tokens, rel=1e-6)
    # the server was idle from the first account read to the first request, and from the last response on
    window_j = after.energy_j - before.energy_j - idle_w * ((start - before.wall) + (after.wall - end))
    # Against the account, the trapezoid of interval averages differs by what it makes of each interval
    # inside the window, ((p[k] + p[k+1]) / 2 - p[k+1]) * its length (known from the samples), and by at
    # most the largest draw above idle over the parts of the window before its first sample and after its
    # last one (what happened there is the account's alone).
    i = max(k for k in range(len(rows)) if t[k] < start)
    j = max(k for k in range(len(rows)) if t[k] <= end)
    assert i < j, "no sample inside the window"
    inner = sum((rows[k][2] - rows[k + 1][2]) * (t[k + 1] - t[k]) / 2 for k in range(i + 1, j))
    draw = max(swing * hi, max(r[2] for r in rows) - idle_w)
    discretization = abs(inner) + draw * ((t[i + 1] - start) + (end - t[j]))
    figures.update(
        window_j=window_j, reader_j=got["energy_j"], discretization_j=discretization, tokens=tokens
    )
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))
    assert abs(got["energy_j"] - window_j) <= 0.005 * window_j + discretization, figures

    # /metrics and /v1/loads carry the scheduler's live state: at most two running, some seen running
    server = [r for r in scraped["server"]["rows"] if start < r[0] < end]
    for source in ("metrics", "load"):
        running = {r[3] for r in server if r[1:3] == [source, "num_running_reqs"]}
        assert running <= {0.0, 1.0, 2.0} and max(running) >= 1.0, (source, running)
    assert max(r[3] for r in server if r[1:3] == ["metrics", "token_usage"]) > 0
    assert max(r[3] for r in server if r[1:3] == ["metrics", "gen_throughput"]) > 0
