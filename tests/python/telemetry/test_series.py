from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglbench.telemetry import clock, series


def test_clean_drops_missing_and_non_finite_and_sorts() -> None:
    raw = [(3.0, 1.0), (1.0, None), (2.0, float("nan")), (None, 5.0), (0.5, 2.0), (3.0, 4.0), ("x", 1)]
    assert series.clean(raw) == [(0.5, 2.0), (3.0, 4.0)]
    assert series.clean([]) == []


def test_cut_interpolates_the_edges_exactly() -> None:
    s = [(0.0, 0.0), (10.0, 100.0)]
    c = series.cut(s, 2.5, 7.5)
    assert c == [(2.5, 25.0), (7.5, 75.0)]
    # Integral of a linear ramp over [2.5, 7.5]: mean 50 x 5 s.
    assert series.integral(c) == pytest.approx(250.0)
    assert series.time_mean(c) == pytest.approx(50.0)


def test_cut_keeps_inner_samples_and_holds_beyond_the_data() -> None:
    s = [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)]
    assert series.cut(s, 0.0, 4.0) == [(0.0, 10.0), (1.0, 10.0), (2.0, 20.0), (3.0, 30.0), (4.0, 30.0)]
    assert series.cut([], 0.0, 1.0) == []
    assert series.cut(s, 2.0, 1.0) == []
    assert series.cut(s, 2.0, 2.0) == [(2.0, 20.0)]


def test_window_given_on_the_controller_clock_cuts_the_host_series_at_the_same_instants() -> None:
    # Host clock 100 s ahead; power 200 W before host t=1050, 400 W after (a step sampled every 0.2 s).
    host = series.clean((1000 + i * 0.2, 200.0 if 1000 + i * 0.2 < 1050 else 400.0) for i in range(500))
    off = clock.estimate(949.0, 961.0, 1049.5, 1060.5)
    assert off.offset_s == pytest.approx(100.0)
    ctl_start, ctl_end = 950.0, 960.0  # the controller's window = host 1050 .. 1060
    start, end = ctl_start + off.offset_s, ctl_end + off.offset_s
    c = series.cut(host, start, end)
    assert c[0][0] == start and c[-1][0] == end
    assert series.integral(c) == pytest.approx(4000.0, rel=1e-9)
    # Read without the offset, the same window would straddle nothing but the 200 W part.
    assert series.integral(series.cut(host, ctl_start + 50, ctl_end + 50)) == pytest.approx(2000.0)


def test_trapezoid_over_irregular_samples() -> None:
    s = [(0.0, 0.0), (0.1, 1.0), (0.5, 1.0), (2.0, 4.0)]
    expected = 0.1 * 0.5 + 0.4 * 1.0 + 1.5 * 2.5
    assert series.integral(s) == pytest.approx(expected)


def test_gaps_find_long_steps_and_uncovered_edges() -> None:
    s = [(t / 10, 1.0) for t in range(0, 31)] + [(t / 10, 1.0) for t in range(60, 101)]
    found = series.gaps(s, 0.0, 10.0, 0.1)
    assert [(g.start, g.end) for g in found] == [(3.0, 6.0)]
    # The window starts 1 s before the first sample: that head is a gap too.
    head = series.gaps(s, -1.0, 10.0, 0.1)
    assert (head[0].start, head[0].end) == (-1.0, 0.0)
    # A window with no sample in it is one gap; a regular series none.
    assert [(g.start, g.end) for g in series.gaps([], 0.0, 5.0, 0.2)] == [(0.0, 5.0)]
    assert series.gaps([(t / 5, 1.0) for t in range(0, 51)], 1.0, 9.0, 0.2) == []


def test_a_gap_is_bridged_and_reported() -> None:
    s = [(0.0, 100.0), (0.2, 100.0), (5.0, 100.0), (5.2, 100.0)]
    assert series.integral(series.cut(s, 0.0, 5.2)) == pytest.approx(520.0)
    assert [round(g.seconds, 6) for g in series.gaps(s, 0.0, 5.2, 0.2)] == [4.8]


def test_share_where_on_a_step_series() -> None:
    s = [(0.0, 0.0), (2.0, 1.0), (3.0, 0.0)]
    assert series.share_where(s, 0.0, 10.0, lambda v: v > 0) == pytest.approx(0.1)
    assert series.share_where([], 0.0, 10.0, bool) is None


def test_huge_values_stay_finite() -> None:
    s = [(1.7e9 + i * 0.2, 1e300) for i in range(100)]
    c = series.cut(s, 1.7e9 + 1.0, 1.7e9 + 10.0)
    value = series.integral(c)
    assert math.isfinite(value) and value == pytest.approx(9e300, rel=1e-6)


@given(
    st.lists(
        st.tuples(st.floats(0, 100), st.floats(-1e6, 1e6)), min_size=2, max_size=50, unique_by=lambda p: p[0]
    ),
    st.floats(0, 100),
    st.floats(0, 100),
)
def test_cut_integral_is_additive(points: list, a: float, b: float) -> None:
    s = series.clean(points)
    lo, hi = min(a, b), max(a, b)
    mid = (lo + hi) / 2
    whole = series.integral(series.cut(s, lo, hi))
    parts = series.integral(series.cut(s, lo, mid)) + series.integral(series.cut(s, mid, hi))
    assert whole == pytest.approx(parts, rel=1e-9, abs=1e-3)
    c = series.cut(s, lo, hi)
    assert c[0][0] == lo and c[-1][0] == hi
