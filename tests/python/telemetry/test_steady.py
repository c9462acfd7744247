from __future__ import annotations

import random

import pytest

from sglbench.telemetry import steady


def _series(values: list[float], dt: float = 1.0) -> list[tuple[float, float]]:
    return [(i * dt, v) for i, v in enumerate(values)]


def test_ramp_then_plateau_excludes_the_ramp() -> None:
    rng = random.Random(7)
    ramp = [16.0 * i / 20 for i in range(20)]
    plateau = [16.0 + rng.gauss(0, 0.3) for _ in range(60)]
    verdict = steady.mser5(_series(ramp + plateau), "running")
    assert verdict.status == steady.STEADY and verdict.series == "running"
    assert verdict.start is not None and verdict.end is not None
    # The ramp's last sample is at t=19: the steady window starts after it and keeps most of the plateau
    # (MSER may also cut a noisy batch or two beyond the ramp).
    assert verdict.start >= 20.0
    assert verdict.end >= 70.0 and verdict.end - verdict.start >= 30.0


def test_ramp_then_quiet_plateau_is_cut_where_the_ramp_ends() -> None:
    rng = random.Random(1)
    values = [16.0 * i / 20 for i in range(20)] + [16.0 + rng.gauss(0, 0.02) for _ in range(60)]
    verdict = steady.mser5(_series(values, dt=0.5))
    assert verdict.steady and verdict.start == 10.0  # sample 20, half a second apart


def test_plateau_then_drain_excludes_the_drain() -> None:
    rng = random.Random(3)
    plateau = [8.0 + rng.gauss(0, 0.2) for _ in range(60)]
    drain = [8.0 * (1 - i / 15) for i in range(15)]
    verdict = steady.mser5(_series(plateau + drain))
    assert verdict.steady and verdict.end is not None
    assert verdict.end <= 65.0


def test_pure_ramp_never_settles() -> None:
    verdict = steady.mser5(_series([float(i) for i in range(100)]))
    assert verdict.status == steady.NOT_STEADY and not verdict.steady
    assert verdict.start is None and verdict.end is None


def test_flat_series_is_steady_from_the_start() -> None:
    verdict = steady.mser5(_series([4.0] * 40))
    assert verdict.steady and verdict.start == 0.0 and verdict.end == 39.0


@pytest.mark.parametrize(("values", "status"), [([], steady.NO_SERIES), ([1.0] * 19, steady.TOO_SHORT)])
def test_empty_and_short_series(values: list[float], status: str) -> None:
    assert steady.mser5(_series(values)).status == status


def test_mser_truncation_picks_the_end_of_the_warm_up() -> None:
    means = [0.0, 5.0, 10.0, 10.1, 9.9, 10.0, 10.05, 9.95]
    assert steady.mser_truncation(means) == 2
    assert steady.mser_truncation([1.0, 1.0]) == 0


def test_trend_measures_the_change_across_the_window() -> None:
    change, se = steady.trend([0.0, 1.0, 2.0, 3.0, 4.0])
    assert change == pytest.approx(4.0) and se == pytest.approx(0.0, abs=1e-12)
    assert not steady.flat([10.0, 12.0, 14.0, 16.0, 18.0])
    assert steady.flat([10.0, 10.1, 9.9, 10.0, 10.05])


def test_noisy_plateaus_are_steady_across_seeds() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        verdict = steady.mser5(_series([12.0 + rng.gauss(0, 1.0) for _ in range(60)]))
        assert verdict.steady, seed


def test_ramps_are_not_steady_across_lengths() -> None:
    for n in (20, 40, 100, 400):
        assert steady.mser5(_series([3.0 + i * 0.5 for i in range(n)])).status == steady.NOT_STEADY, n


def test_a_ramp_straight_into_a_drain_is_not_steady() -> None:
    """Running requests of an open-loop point too short to settle: up for 3 s, down for 3 s (a fitted line
    through it is flat; its level is not)."""
    rng = random.Random(3)
    up = [30.0 * i / 34 + rng.gauss(0, 0.7) for i in range(34)]
    down = [30.0 - 30.0 * i / 28 + rng.gauss(0, 0.7) for i in range(28)]
    assert steady.mser5(_series([0.0, 0.0, *up, *down], dt=0.1)).status == steady.NOT_STEADY


def test_a_plateau_with_poisson_noise_stays_level() -> None:
    """Counts around 25 with their natural spread (sd 5) are one level, whatever the seed."""
    for seed in range(20):
        rng = random.Random(seed)
        values = [max(0.0, rng.gauss(25.0, 5.0)) for _ in range(60)]
        assert steady.mser5(_series(values)).status == steady.STEADY, seed


def _open_loop_running(seed: int, rate: float, service_s: float, seconds: float, dt: float) -> list[float]:
    """Requests in flight, sampled every ``dt``, of Poisson arrivals at ``rate`` each served for
    ``service_s`` (an open-loop point from an idle server: a ramp of ``service_s``, then it fluctuates)."""
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    while t < seconds:
        t += rng.expovariate(rate)
        arrivals.append(t)
    return [sum(1 for a in arrivals if a <= i * dt < a + service_s) for i in range(int(seconds / dt))]


def test_an_open_loop_point_is_steady_once_its_first_samples_are_cut_across_seeds() -> None:
    """Its running requests fluctuate slowly (correlated over a service time) around rate x service = 10:
    never flagged, the idle start always cut, and the window's mean near 10. (MSER-5 may cut inside a
    noisy ramp, or well after it when a fluctuation looks like warm-up.)"""
    for seed in range(10):
        values = _open_loop_running(seed, rate=5.0, service_s=2.0, seconds=16.0, dt=0.1)
        w = steady.mser5(_series(values, dt=0.1))
        assert w.status == steady.STEADY and w.start is not None and w.end is not None, (seed, w)
        kept = values[round(w.start / 0.1) : round(w.end / 0.1) + 1]
        assert w.start >= 0.5 and abs(sum(kept) / len(kept) - 10.0) < 4.0, (seed, w)
