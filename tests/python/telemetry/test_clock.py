from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sglbench.telemetry import clock


def test_symmetric_trip_recovers_the_offset_and_bounds_it_by_half_the_delay() -> None:
    # Host clock 5 s ahead; 0.2 s each way; the host worked 1 s.
    sent = 100.0
    host_started = sent + 0.2 + 5.0
    host_ended = host_started + 1.0
    received = host_ended - 5.0 + 0.2
    off = clock.estimate(sent, received, host_started, host_ended)
    assert off.known
    assert off.offset_s == pytest.approx(5.0)
    assert off.uncertainty_s == pytest.approx(0.2)
    assert off.round_trip_s == pytest.approx(1.4)
    assert off.to_controller(host_started) == pytest.approx(sent + 0.2)


def test_asymmetric_trip_lies_within_the_uncertainty() -> None:
    sent, true_offset = 50.0, -3.0
    host_started = sent + 0.9 + true_offset  # slow outbound leg
    host_ended = host_started + 2.0
    received = host_ended - true_offset + 0.1  # fast return
    off = clock.estimate(sent, received, host_started, host_ended)
    assert off.offset_s is not None and off.uncertainty_s is not None
    assert abs(off.offset_s - true_offset) <= off.uncertainty_s + 1e-9
    assert off.offset_s != pytest.approx(true_offset)  # the asymmetry shows, within the bound


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((None, 2.0, 1.0, 1.5), "controller"),
        ((1.0, 2.0, None, 1.5), "host"),
        ((1.0, float("nan"), 1.0, 1.5), "controller"),
        ((3.0, 2.0, 1.0, 1.5), "received before"),
        ((1.0, 2.0, 1.6, 1.5), "host ended"),
        ((True, 2.0, 1.0, 1.5), "controller"),
        (("1", 2.0, 1.0, 1.5), "controller"),
    ],
)
def test_missing_or_contradicting_times_give_an_unknown_offset(args: tuple, reason: str) -> None:
    off = clock.estimate(*args)
    assert not off.known and off.uncertainty_s is None
    assert reason in (off.reason or "")
    assert off.to_controller(10.0) is None


def test_host_time_longer_than_the_trip_clamps_the_delay_at_zero() -> None:
    off = clock.estimate(10.0, 10.5, 10.0, 10.6)
    assert off.uncertainty_s == 0.0


def test_round_trip_through_dict() -> None:
    off = clock.estimate(1.0, 2.0, 101.2, 101.6)
    assert clock.from_dict(off.to_dict()) == off
    assert not clock.from_dict(None).known
    assert clock.from_dict(clock.unknown("no clock").to_dict()).reason == "no clock"


@given(
    sent=st.floats(0, 2e9),
    out_leg=st.floats(0, 5),
    back_leg=st.floats(0, 5),
    work=st.floats(0, 600),
    offset=st.floats(-1e6, 1e6),
)
def test_true_offset_always_within_the_bound(
    sent: float, out_leg: float, back_leg: float, work: float, offset: float
) -> None:
    host_started = sent + out_leg + offset
    host_ended = host_started + work
    received = host_ended - offset + back_leg
    assume(received >= sent and host_ended >= host_started)  # rounding can reorder equal times
    off = clock.estimate(sent, received, host_started, host_ended)
    assert off.offset_s is not None and off.uncertainty_s is not None
    # Float rounding of epoch-sized numbers: a few ulps of the largest term.
    tol = 1e-6 * max(1.0, abs(sent) + abs(offset)) * 1e-3
    assert abs(off.offset_s - offset) <= off.uncertainty_s + tol
    assert math.isfinite(off.uncertainty_s)
