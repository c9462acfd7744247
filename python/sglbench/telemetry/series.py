"""One sampled series (time, value) cut exactly to a window: the edges interpolated, the integral and
the time-weighted mean over exactly ``[start, end]``, and the gaps the samples leave.

A series is a list of ``(t, value)`` pairs sorted by time. :func:`clean` makes one from raw samples:
a sample whose time or value is missing or not finite is dropped (it says nothing), and of several
samples at one time the last one wins.

Between two samples a value moves linearly (a trapezoid); outside the first and last sample it is held
(the nearest sample's value). A step longer than ``gap_factor`` times the sampling interval is a gap:
it is still bridged, so the window's integral is defined, but :func:`gaps` reports it and a caller
flags the figure. A window edge beyond the samples counts as a step from the edge to the nearest
sample.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

Series = list[tuple[float, float]]
GAP_FACTOR = 3.0  # a step longer than this many sampling intervals is a gap


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def clean(samples: Iterable[tuple[Any, Any]]) -> Series:
    """Finite ``(t, value)`` pairs sorted by time; the last sample of a repeated time wins."""
    by_t: dict[float, float] = {}
    for t, v in samples:
        tt, vv = _num(t), _num(v)
        if tt is not None and vv is not None:
            by_t[tt] = vv
    return sorted(by_t.items())


def value_at(series: Series, t: float) -> float | None:
    """The value at ``t``: linear between samples, held beyond them; None for an empty series."""
    if not series:
        return None
    if t <= series[0][0]:
        return series[0][1]
    if t >= series[-1][0]:
        return series[-1][1]
    lo, hi = 0, len(series) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if series[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, v0), (t1, v1) = series[lo], series[hi]
    if t1 == t0:
        return v1
    return v0 + (v1 - v0) * ((t - t0) / (t1 - t0))


def cut(series: Series, start: float, end: float) -> Series:
    """The series restricted to exactly ``[start, end]``: the samples inside plus an interpolated (or
    held) value at each edge. Empty when the series is empty or the window is not a window."""
    if not series or not (end >= start):
        return []
    inside = [(t, v) for t, v in series if start < t < end]
    first = value_at(series, start)
    last = value_at(series, end)
    assert first is not None and last is not None
    if end == start:
        return [(start, first)]
    return [(start, first), *inside, (end, last)]


def integral(series: Series) -> float:
    """Trapezoid integral of a (cut) series over its own span; 0 for fewer than two samples."""
    total = 0.0
    for (t0, v0), (t1, v1) in pairwise(series):
        total += (t1 - t0) * (v0 + v1) / 2.0
    return total


def time_mean(series: Series) -> float | None:
    """The time-weighted mean of a (cut) series; the value itself for a series of one instant."""
    if not series:
        return None
    span = series[-1][0] - series[0][0]
    if span <= 0:
        return sum(v for _, v in series) / len(series)
    return integral(series) / span


def peak(series: Series) -> float | None:
    return max((v for _, v in series), default=None)


@dataclass(frozen=True)
class Gap:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def gaps(
    series: Series, start: float, end: float, interval_s: float, factor: float = GAP_FACTOR
) -> list[Gap]:
    """Steps longer than ``factor * interval_s`` between the window's edges and the samples inside it
    (the whole window is one gap when no sample falls in it)."""
    if not (end > start):
        return []
    limit = factor * interval_s if interval_s > 0 else 0.0
    times = [start, *(t for t, _ in series if start < t < end), end]
    # A sample just outside the window covers its edge as well as one inside would.
    before = [t for t, _ in series if t <= start]
    after = [t for t, _ in series if t >= end]
    if before:
        times[0] = max(before)
    if after:
        times[-1] = min(after)
    found = []
    for a, b in pairwise(times):
        if b - a > limit:
            found.append(Gap(max(a, start), min(b, end)))
    return found


def share_where(series: Series, start: float, end: float, predicate: Any) -> float | None:
    """Share of ``[start, end]`` during which a step-wise series (each sample's value holds until the next
    sample) satisfies ``predicate``; the value before the first sample is the first sample's. None for an
    empty series or window."""
    if not series or not (end > start):
        return None
    inside = 0.0
    # Sample i holds from its own time to the next sample's (the first one from the window's start).
    for i, (t, v) in enumerate(series):
        a = start if i == 0 else max(t, start)
        b = end if i == len(series) - 1 else min(series[i + 1][0], end)
        if b > a and predicate(v):
            inside += b - a
    return inside / (end - start)
