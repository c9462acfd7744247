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
- B replicates (default 2000) give a distribution; the 95% interval is its 2.5th and 97.5th
  percentiles (percentile bootstrap, numpy's linear interpolation).
- Speedup = mean(T config) / mean(T baseline); its interval comes from the ratio of independent
  replicates of the two (same B, separate random streams).
- A single repeat without request rows has no interval (NaN): one number carries no noise estimate.
- Random streams are ``numpy.random.default_rng([seed, crc32(label)])``: the same inputs, seed and
  label always give the same interval, and different table cells do not share draws.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_BOOT = 2000
MIN_BOOT = 100  # fewer replicates give no usable 2.5/97.5 percentiles
MAX_BOOT = 100_000  # memory is about 8 bytes x replicates x repeats per cell; more adds no precision
DEFAULT_SEED = 0
CI_LEVEL = 0.95


@dataclass(frozen=True)
class RepeatSample:
    """One repeat of one load point."""

    throughput: float
    duration_s: float | None = None
    tokens: tuple[float, ...] | None = None  # output tokens of each successful request

    @property
    def resamplable(self) -> bool:
        return bool(self.tokens) and sum(self.tokens or ()) > 0


def rng_for(seed: int, label: str) -> np.random.Generator:
    """The random stream of one table cell (stable across runs and Python versions)."""
    return np.random.default_rng([seed, zlib.crc32(label.encode())])


def replicates(samples: Sequence[RepeatSample], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean throughput over repeats (see the module docstring)."""
    if not samples:
        raise ValueError("no repeats to bootstrap")
    r = len(samples)
    per_repeat = np.empty((r, n_boot))
    for i, s in enumerate(samples):
        if s.resamplable:
            tokens = np.asarray(s.tokens, dtype=float)
            n = len(tokens)
            sums = np.empty(n_boot)
            step = max(1, 2_000_000 // n)  # bound memory: at most ~2M draws at once
            for lo in range(0, n_boot, step):
                hi = min(n_boot, lo + step)
                draws = rng.integers(0, n, size=(hi - lo, n))
                sums[lo:hi] = tokens[draws].sum(axis=1)
            per_repeat[i] = s.throughput * sums / float(tokens.sum())
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
