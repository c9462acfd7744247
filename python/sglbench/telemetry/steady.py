"""Steady state of a point by MSER-5 (White's Marginal Standard Error Rule on batch means of 5).

The series (running requests, or generation throughput) is sampled at a fixed interval; its values are
averaged in consecutive batches of 5 (a partial last batch is dropped) and, for each truncation ``d``,

    MSER(d) = sum_{i>d} (Y_i - mean(Y_{d+1..n}))^2 / (n - d)^2

The truncation that minimises it is where the warm-up (ramp) ends. As is usual for MSER, it is searched
only over the first half (``0 <= d <= n // 2``: late in the series a short tail has a small MSER by
chance). The drain at the end of a point is the same question with time reversed, so the rule is
applied again to the reversed remainder. What is left is the steady window, if it is flat: a series
that never settled (a pure ramp) keeps its trend there, so the kept batch means are fitted with a line
and the point is flagged not steady when the fitted change across the window is both more than
``TREND_REL`` of their mean and more than ``TREND_SIGMAS`` standard errors. A line misses a series that
rose and fell again inside the window (a ramp straight into a drain fits a flat line), so a parabola is
fitted too, and its bend across the window must not exceed ``CURVE_REL`` of the mean and ``CURVE_SIGMAS``
standard errors. The bend's bound is wide on purpose: the running requests of an open-loop point
fluctuate slowly (each request runs for seconds), and batch means that close in time are correlated, so
their standard errors are too small. A series of fewer than
``MIN_BATCHES`` batches is too short to judge; one whose steady part would be shorter than three batches
is not steady.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglbench.telemetry.series import Series

BATCH = 5
MIN_BATCHES = 4
TREND_REL = 0.10  # a fitted change of more than 10 % of the mean across the window ...
TREND_SIGMAS = 3.0  # ... and more than 3 standard errors is a trend, not noise
CURVE_REL = 0.5  # a parabola bending by more than half the mean across the window ...
CURVE_SIGMAS = 3.0  # ... and by more than 3 standard errors rose and fell: no plateau
STEADY, NOT_STEADY, TOO_SHORT, NO_SERIES = "steady", "not_steady", "too_short", "no_series"


@dataclass(frozen=True)
class SteadyWindow:
    """The verdict and, when steady, the steady window (host epoch seconds)."""

    status: str
    start: float | None = None
    end: float | None = None
    series: str | None = None  # the series it was judged on

    @property
    def steady(self) -> bool:
        return self.status == STEADY


def batch_means(values: list[float], size: int = BATCH) -> list[float]:
    n = len(values) // size
    return [sum(values[i * size : (i + 1) * size]) / size for i in range(n)]


def mser_truncation(means: list[float]) -> int:
    """The MSER truncation (in batches) of batch means: the ``d`` in ``0 .. n // 2`` that minimises
    MSER(d); the earliest on ties, 0 for a flat series."""
    n = len(means)
    if n < 3:
        return 0
    lo, hi = min(means), max(means)
    if hi - lo <= 1e-12 * max(1.0, abs(hi), abs(lo)):
        return 0
    mu = sum(means) / n
    ys = [y - mu for y in means]  # centred, so the sums of squares below do not cancel
    # Suffix sums give every tail's sum of squared deviations in one pass.
    mser = [0.0] * n
    s = ss = 0.0
    for d in range(n - 1, -1, -1):
        s += ys[d]
        ss += ys[d] * ys[d]
        k = n - d
        mser[d] = max(0.0, ss - s * s / k) / (k * k)
    best_d = 0
    for d in range(1, n // 2 + 1):
        if mser[d] < mser[best_d] * (1.0 - 1e-9):
            best_d = d
    return best_d


def trend(means: list[float]) -> tuple[float, float]:
    """The least-squares line through the batch means: its change from the first batch to the last and
    that change's standard error (0 for fewer than three batches)."""
    k = len(means)
    if k < 3:
        return 0.0, 0.0
    xm = (k - 1) / 2.0
    ym = sum(means) / k
    sxx = sum((i - xm) ** 2 for i in range(k))
    slope = sum((i - xm) * (y - ym) for i, y in enumerate(means)) / sxx
    resid = sum((y - ym - slope * (i - xm)) ** 2 for i, y in enumerate(means))
    se_slope = (resid / (k - 2) / sxx) ** 0.5
    return slope * (k - 1), se_slope * (k - 1)


def flat(means: list[float]) -> bool:
    change, se = trend(means)
    ym = sum(means) / len(means) if means else 0.0
    return not (abs(change) > TREND_REL * abs(ym) and abs(change) > TREND_SIGMAS * se)


def bend(means: list[float]) -> tuple[float, float]:
    """The least-squares parabola through the batch means: how far its quadratic part moves across the
    window (from the middle to the ends) and that figure's standard error (0 for fewer than four)."""
    k = len(means)
    if k < 4:
        return 0.0, 0.0
    xm = (k - 1) / 2.0
    x = [i - xm for i in range(k)]
    x2m = sum(v * v for v in x) / k
    q = [v * v - x2m for v in x]  # orthogonal to the constant and the line on this grid
    ym = sum(means) / k
    sxx, sqq = sum(v * v for v in x), sum(v * v for v in q)
    slope = sum(a * y for a, y in zip(x, means, strict=True)) / sxx
    curve = sum(a * y for a, y in zip(q, means, strict=True)) / sqq
    resid = sum((y - ym - slope * a - curve * c) ** 2 for y, a, c in zip(means, x, q, strict=True))
    span = max(q) - min(q)
    return curve * span, (resid / (k - 3) / sqq) ** 0.5 * span


def level(means: list[float]) -> bool:
    """Whether the batch means do not rise and fall (or fall and rise) across the window."""
    change, se = bend(means)
    ym = sum(means) / len(means) if means else 0.0
    return not (abs(change) > CURVE_REL * abs(ym) and abs(change) > CURVE_SIGMAS * se)


def mser5(series: Series, name: str | None = None) -> SteadyWindow:
    """The steady window of a series sampled at a fixed interval: warm-up cut by MSER-5, drain cut by
    MSER-5 on the reversed remainder."""
    if not series:
        return SteadyWindow(NO_SERIES, series=name)
    values = [v for _, v in series]
    means = batch_means(values)
    n = len(means)
    if n < MIN_BATCHES:
        return SteadyWindow(TOO_SHORT, series=name)
    d = mser_truncation(means)
    rest = means[d:]
    tail = mser_truncation(rest[::-1])
    kept = rest[: len(rest) - tail]
    first = d * BATCH
    last = (n - tail) * BATCH - 1  # the last sample of the last kept batch
    if len(kept) < 3 or not flat(kept) or not level(kept):  # fewer than 3 batches: no plateau
        return SteadyWindow(NOT_STEADY, series=name)
    return SteadyWindow(STEADY, series[first][0], series[last][0], name)
