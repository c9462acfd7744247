"""Seeded bootstrap confidence intervals for benchmark throughput and speedup.

Method (documented in docs/operations.md, "How the numbers are computed"):

- One load point of one config has R repeats. Repeat r has an observed output throughput T_r (tok/s)
  and, when per-request rows were kept, the output tokens of its n_r successful requests and its
  measured window D_r (so T_r = sum(tokens) / D_r).
- One bootstrap replicate draws R repeats with replacement (between-repeat noise); for each drawn
  repeat with request rows it also draws n_r requests with replacement and rescales that repeat's
  throughput by the drawn token total: T_r x sum(drawn tokens) / sum(tokens) (= sum(drawn) / D_r when
  the rows and the summary agree; the rescaling keeps the replicate centred on the reported T_r even
  if they do not); without request rows it uses T_r.
  The replicate's value is the mean of the R repeat throughputs.
- A repeat with many requests draws its token total from the total's normal limit (same mean and
  variance as drawing every request) when the Cornish-Fisher bound on that limit's percentile error is
  below 5% of a standard deviation, smaller than the Monte-Carlo error of the percentiles themselves
  (:func:`normal_is_exact_enough`); so the cost of an interval does not grow with the requests, and
  small repeats (every pinned example) are drawn request by request exactly as before.
- B replicates (default 2000) give a distribution; the 95% interval is its 2.5th and 97.5th
  percentiles (percentile bootstrap, numpy's linear interpolation).
- Speedup = mean(T config) / mean(T baseline); its interval comes from the ratio of independent
  replicates of the two (same B, separate random streams).
- A single repeat without request rows has no interval (NaN): one number carries no noise estimate.
- A per-repeat figure without request rows behind it (energy per token) gets the interval of its mean
  over repeats by drawing repeats only (:func:`mean_of_repeats`); one repeat has none.
- Random streams are ``numpy.random.default_rng([seed, crc32(label)])``: the same inputs, seed and
  label always give the same interval, and different table cells do not share draws.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_BOOT = 2000
MIN_BOOT = 100  # fewer replicates give no usable 2.5/97.5 percentiles
MAX_BOOT = 100_000  # memory is about 8 bytes x replicates x repeats per cell; more adds no precision
DEFAULT_SEED = 0
CI_LEVEL = 0.95
DRAWS_AT_ONCE = 2_000_000  # bounds the memory of one block of draws (~16 MB)
NORMAL_MIN_REQUESTS = 200  # fewer requests per repeat are always drawn one by one
NORMAL_MAX_SHIFT = 0.05  # largest percentile error of the normal limit allowed, in standard deviations
CF_FACTOR = (1.959964**2 - 1) / 6  # Cornish-Fisher skewness term at the 2.5th/97.5th percentiles


@dataclass(frozen=True, eq=False)
class RepeatSample:
    """One repeat of one load point."""

    throughput: float
    duration_s: float | None = None
    tokens: Sequence[float] | np.ndarray | None = None  # output tokens of each successful request

    @property
    def resamplable(self) -> bool:
        return self.tokens is not None and len(self.tokens) > 0 and float(np.sum(self.tokens)) > 0


def rng_for(seed: int, label: str) -> np.random.Generator:
    """The random stream of one table cell (stable across runs and Python versions)."""
    return np.random.default_rng([seed, zlib.crc32(label.encode())])


def normal_is_exact_enough(tokens: np.ndarray) -> bool:
    """Whether the drawn token total of these requests may come from its normal limit.

    The total of n requests drawn with replacement has mean n x mean(tokens) and variance n x var(tokens)
    (the empirical distribution's), and skewness g / sqrt(n) for the tokens' skewness g. By the
    Cornish-Fisher expansion, the normal's 2.5th/97.5th percentiles are off by about
    g / sqrt(n) x (z^2 - 1) / 6 standard deviations (z = 1.96): the rule allows at most
    :data:`NORMAL_MAX_SHIFT` of one standard deviation, below the Monte-Carlo error of the percentile
    itself at the default 2000 replicates (about 0.06), and never fewer than :data:`NORMAL_MIN_REQUESTS`
    requests (kurtosis and the discreteness of few requests)."""
    n = len(tokens)
    if n < NORMAL_MIN_REQUESTS:
        return False
    sd = float(tokens.std())
    if sd == 0.0:
        return True
    skew = float(np.mean(((tokens - tokens.mean()) / sd) ** 3))
    return abs(skew) / math.sqrt(n) * CF_FACTOR <= NORMAL_MAX_SHIFT


def token_sums(tokens: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` totals of ``len(tokens)`` requests drawn with replacement.

    Few requests: every request is drawn (``rng.integers``, at most :data:`DRAWS_AT_ONCE` numbers at
    once). Many (:func:`normal_is_exact_enough`): the total comes from its normal limit, with the
    resampled total's exact mean and variance, in time and memory independent of the requests."""
    n = len(tokens)
    if normal_is_exact_enough(tokens):
        return rng.normal(n * float(tokens.mean()), math.sqrt(n) * float(tokens.std()), size=n_boot)
    sums = np.empty(n_boot)
    step = max(1, DRAWS_AT_ONCE // n)
    for lo in range(0, n_boot, step):
        hi = min(n_boot, lo + step)
        draws = rng.integers(0, n, size=(hi - lo, n))
        sums[lo:hi] = tokens[draws].sum(axis=1)
    return sums


def replicates(samples: Sequence[RepeatSample], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean throughput over repeats (see the module docstring)."""
    if not samples:
        raise ValueError("no repeats to bootstrap")
    r = len(samples)
    per_repeat = np.empty((r, n_boot))
    for i, s in enumerate(samples):
        if s.resamplable:
            tokens = np.asarray(s.tokens, dtype=float)
            per_repeat[i] = s.throughput * token_sums(tokens, n_boot, rng) / float(tokens.sum())
        else:
            per_repeat[i] = s.throughput
    pick = rng.integers(0, r, size=(n_boot, r))
    return per_repeat[pick, np.arange(n_boot)[:, None]].mean(axis=1)


def has_noise_estimate(samples: Sequence[RepeatSample]) -> bool:
    return len(samples) > 1 or any(s.resamplable for s in samples)


def interval(values: np.ndarray, level: float = CI_LEVEL) -> tuple[float, float]:
    lo, hi = np.percentile(values, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float


def mean_throughput(
    samples: Sequence[RepeatSample], *, seed: int = DEFAULT_SEED, label: str = "", n_boot: int = DEFAULT_BOOT
) -> Estimate:
    """Mean throughput over repeats with its bootstrap interval (NaN bounds without a noise estimate)."""
    value = float(np.mean([s.throughput for s in samples]))
    if not has_noise_estimate(samples):
        return Estimate(value, float("nan"), float("nan"))
    lo, hi = interval(replicates(samples, n_boot, rng_for(seed, label)))
    return Estimate(value, lo, hi)


def ratio(
    num: Sequence[RepeatSample],
    den: Sequence[RepeatSample],
    *,
    seed: int = DEFAULT_SEED,
    label: str = "",
    n_boot: int = DEFAULT_BOOT,
) -> Estimate:
    """mean(num) / mean(den) with the percentile interval of the ratio of independent replicates."""
    den_mean = float(np.mean([s.throughput for s in den]))
    num_mean = float(np.mean([s.throughput for s in num]))
    value = num_mean / den_mean if den_mean > 0 else float("nan")
    if den_mean <= 0 or not (has_noise_estimate(num) or has_noise_estimate(den)):
        return Estimate(value, float("nan"), float("nan"))
    a = replicates(num, n_boot, rng_for(seed, label + "|num"))
    b = replicates(den, n_boot, rng_for(seed, label + "|den"))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = a / b
    q = q[np.isfinite(q)]
    if not len(q):
        return Estimate(value, float("nan"), float("nan"))
    lo, hi = interval(q)
    return Estimate(value, lo, hi)


def mean_of_repeats(
    values: Sequence[float], *, seed: int = DEFAULT_SEED, label: str = "", n_boot: int = DEFAULT_BOOT
) -> Estimate:
    """Mean of one figure over repeats (non-finite values left out) with the percentile interval of
    resampled repeats; NaN bounds with fewer than two repeats, NaN everything with none."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(float(x))], dtype=float)
    if not len(v):
        return Estimate(float("nan"), float("nan"), float("nan"))
    value = float(np.mean(v))
    if len(v) < 2:
        return Estimate(value, float("nan"), float("nan"))
    rng = rng_for(seed, label)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    lo, hi = interval(means)
    return Estimate(value, lo, hi)
