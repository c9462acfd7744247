"""The break-even map: each speculative config against the ``algorithm: none`` config of its group, per load
level, and the deploy table that follows from it.

Method (also in ``docs/deploy.md``):

- **Group**: same run, host, TP size, model, prompt set and load mode (``deploy/levels.py``); the
  baseline is its alphabetically first ``algorithm: none`` config, as in the summary table.
- **Levels compared**: every level either side measured, inside the range both measured. A level one
  side did not measure takes that side's throughput interpolated linearly in log load between its two
  neighbouring measured levels (``measured`` names the side that was measured there).
- **Speedup and its 95% interval**: mean tok/s of the config / of the baseline, percentile bootstrap
  (``sglbench.bootstrap``): each measured level of each side has one array of replicates, drawn from the
  random stream the summary table's speedup uses for that cell (label ``speedup|<config's cell>``,
  ``|num`` for the config, ``|den`` for the baseline), so at a level both measured the interval is the
  summary's, to the digit. An interpolated side interpolates its replicates the same way.
- **Verdict per level**: ``faster`` when the interval lies above 1, ``slower`` below 1, else ``within
  noise``; ``no CI`` without a noise estimate (one repeat, no request rows).
- **Faster range**: the levels judged faster; ``faster_up_to`` ends the run of them from the lowest level.
- **Crossover**: the load where the speedup falls to 1, interpolated linearly in log load between the
  last level of the leading run of levels whose speedup is above 1 and the next level (the first not
  above). Its interval applies the same rule to every bootstrap replicate of the whole curve (level by
  level replicate b of the config over replicate b of the baseline) and takes the 2.5th and 97.5th
  percentiles of the replicates' crossovers; a replicate still above 1 at the highest level counts as
  above the range, one not above 1 at the lowest as below it, so a bound in such a tail is given only
  as beyond the range (``ci_low_beyond``/``ci_high_beyond``).
- **Deploy table**: at each level the config to run is the speculative config with the highest speedup
  among those judged faster there (and meeting the declared SLO where it was measured), else the
  baseline (no evidence of a gain: run the simpler server), else none when the baseline misses the
  SLO there; consecutive levels with the same answer make one segment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sglbench import bootstrap
from sglbench.deploy import schema, slo
from sglbench.deploy.levels import GroupKey, Level, Series, level_text

METHOD = (__doc__ or "").split("Method (also in ``docs/deploy.md``):", 1)[-1].strip()
FASTER, SLOWER, NOISE, NO_CI = "faster", "slower", "within noise", "no CI"
CROSSES = "crosses"
FASTER_THROUGHOUT = "faster throughout"
NOT_FASTER_AT_LOWEST = "not faster at the lowest level"
NO_COMMON = "no common levels"


@dataclass(frozen=True, eq=False)
class SideValue:
    """One side's throughput at one compared level: measured there, or interpolated between two."""

    value: float
    replicates: np.ndarray
    measured: bool
    noise: bool


class Replicates:
    """Bootstrap replicates of one side's measured levels, drawn once per level and stream."""

    def __init__(self, seed: int, n_boot: int) -> None:
        self.seed, self.n_boot = seed, n_boot
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def of(self, level: Level, label: str, side: str) -> np.ndarray:
        key = (label, side)
        if key not in self._cache:
            rng = bootstrap.rng_for(self.seed, f"{label}|{side}")
            self._cache[key] = bootstrap.replicates(level.samples, self.n_boot, rng)
        return self._cache[key]


def speedup_label(config_level_cell: tuple[object, ...], point: str) -> str:
    """The summary table's stream label for the config's cell at ``point`` (``summarize._add_speedups``)."""
    return "speedup|" + "|".join(map(str, (*config_level_cell[:-1], point)))


def _side_at(
    series: Series,
    x: float,
    label_of: Callable[[Level], str],
    side: str,
    reps: Replicates,
) -> SideValue | None:
    """``series``' throughput at level ``x``: measured, or interpolated in log load; None out of range."""
    lvs = series.levels
    exact = series.at(x)
    if exact is not None:
        return SideValue(exact.tok_s, reps.of(exact, label_of(exact), side), True, exact.has_noise)
    below = [lv for lv in lvs if lv.level < x]
    above = [lv for lv in lvs if lv.level > x]
    if not below or not above:
        return None
    a, b = below[-1], above[0]
    w = (math.log(x) - math.log(a.level)) / (math.log(b.level) - math.log(a.level))
    ra, rb = reps.of(a, label_of(a), side), reps.of(b, label_of(b), side)
    return SideValue(
        (1 - w) * a.tok_s + w * b.tok_s, (1 - w) * ra + w * rb, False, a.has_noise or b.has_noise
    )


@dataclass(frozen=True, eq=False)
class PairCurve:
    """A config against its baseline: the compared levels and the replicate matrix (levels x replicates)."""

    config: Series
    baseline: Series
    levels: list[schema.SpeedupLevel]
    replicates: np.ndarray
    noise: bool


def compare_levels(config: Series, baseline: Series, reps: Replicates) -> PairCurve:
    """The speedup at every level either side measured inside the range both measured."""
    lo = max(config.levels[0].level, baseline.levels[0].level)
    hi = min(config.levels[-1].level, baseline.levels[-1].level)
    xs = sorted({lv.level for s in (config, baseline) for lv in s.levels if lo <= lv.level <= hi})
    cell = config.levels[0].cell

    def label_of(lv: Level) -> str:
        return speedup_label(cell, lv.point)

    out: list[schema.SpeedupLevel] = []
    rows: list[np.ndarray] = []
    any_noise = False
    for x in xs:
        num = _side_at(config, x, label_of, "num", reps)
        den = _side_at(baseline, x, label_of, "den", reps)
        if num is None or den is None or den.value <= 0:
            continue
        measured_at = config.at(x) or baseline.at(x)
        assert measured_at is not None
        noise = num.noise or den.noise
        any_noise = any_noise or noise
        with np.errstate(divide="ignore", invalid="ignore"):
            q = num.replicates / den.replicates
        finite = q[np.isfinite(q)]
        lo_ci, hi_ci = bootstrap.interval(finite) if noise and len(finite) else (math.nan, math.nan)
        value = num.value / den.value
        valid = all(lv.valid for lv in (config.at(x), baseline.at(x)) if lv is not None)
        out.append(
            schema.SpeedupLevel(
                point=measured_at.point,
                level=x,
                measured="both"
                if num.measured and den.measured
                else "config"
                if num.measured
                else "baseline",
                speedup=schema.finite(value),
                ci_low=schema.finite(lo_ci),
                ci_high=schema.finite(hi_ci),
                verdict=verdict(lo_ci, hi_ci),
                valid=valid,
            )
        )
        rows.append(q)
    matrix = np.vstack(rows) if rows else np.empty((0, reps.n_boot))
    return PairCurve(config, baseline, out, matrix, any_noise)


def verdict(ci_low: float, ci_high: float) -> str:
    if math.isnan(ci_low) or math.isnan(ci_high):
        return NO_CI
    if ci_low > 1:
        return FASTER
    if ci_high < 1:
        return SLOWER
    return NOISE


def crossing_log(u: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Log-load crossover of each speedup curve (columns of ``s``, levels as rows, ``u`` = log levels):
    interpolated between the last level of the leading run above 1 and the next; -inf when the curve is
    not above 1 at the lowest level, +inf when it stays above 1 at every level (NaN counts as not above)."""
    above = np.nan_to_num(s, nan=0.0) > 1.0
    out = np.full(s.shape[1], np.inf)
    out[~above[0]] = -np.inf
    open_ = above[0].copy()
    for i in range(len(u) - 1):
        ends = open_ & ~above[i + 1]
        if ends.any():
            si, sj = s[i, ends], s[i + 1, ends]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(np.isfinite(sj), (si - 1.0) / (si - sj), 1.0)
            out[ends] = u[i] + np.clip(t, 0.0, 1.0) * (u[i + 1] - u[i])
        open_ &= above[i + 1]
    return out


def crossover(curve: PairCurve) -> schema.Crossover:
    lvs = [lv for lv in curve.levels if lv.speedup is not None]
    if not lvs:
        return schema.Crossover(NO_COMMON, schema.Interval(None))
    idx = [curve.levels.index(lv) for lv in lvs]
    u = np.log([lv.level for lv in lvs])
    s = np.array([lv.speedup for lv in lvs], dtype=float)
    signs = np.sign(s - 1.0)
    crossings = int(np.sum(signs[1:] != signs[:-1]))
    est = float(crossing_log(u, s[:, None])[0])
    reps = crossing_log(u, curve.replicates[idx]) if curve.noise and len(curve.replicates) else None
    interval = _crossover_interval(est, reps, u)
    extra = {
        "crossings": crossings,
        "replicates_crossing": None if reps is None else float(np.isfinite(reps).mean()),
        "range_low": lvs[0].level,
        "range_high": lvs[-1].level,
    }
    if math.isinf(est):
        status = FASTER_THROUGHOUT if est > 0 else NOT_FASTER_AT_LOWEST
        return schema.Crossover(status, interval, **extra)  # type: ignore[arg-type]
    i = int(np.searchsorted(u, est, side="left")) - 1
    i = min(max(i, 0), len(lvs) - 2)
    between = [lvs[i].point, lvs[i + 1].point]
    return schema.Crossover(CROSSES, interval, between=between, **extra)  # type: ignore[arg-type]


def _crossover_interval(est: float, reps: np.ndarray | None, u: np.ndarray) -> schema.Interval:
    """The estimate and the percentile interval of the replicates' crossovers, in load units; a bound
    among replicates that left the measured range is null, with the side it left by."""
    value = None if math.isinf(est) else math.exp(est)
    if reps is None:
        return schema.Interval(value)
    span = float(u[-1] - u[0]) + 1.0
    shifted = np.where(
        np.isneginf(reps), u[0] - 1e3 * span, np.where(np.isposinf(reps), u[-1] + 1e3 * span, reps)
    )
    bounds = bootstrap.interval(shifted)
    sides = ["below" if b < u[0] - 1e-12 else "above" if b > u[-1] + 1e-12 else "" for b in bounds]
    lo, hi = (None if side else math.exp(b) for b, side in zip(bounds, sides, strict=True))
    return schema.Interval(value, lo, hi, ci_low_beyond=sides[0], ci_high_beyond=sides[1])


def pair(curve: PairCurve) -> schema.Pair:
    c, b = curve.config.key, curve.baseline.key
    faster = [lv.level for lv in curve.levels if lv.verdict == FASTER]
    up_to = None
    for lv in curve.levels:
        if lv.verdict != FASTER:
            break
        up_to = lv.level
    return schema.Pair(
        host=c.host,
        tp=c.tp,
        model_path=c.model_path,
        prompt_set=c.prompt_set,
        load=c.load,
        config=c.config,
        algorithm=c.algorithm,
        baseline=b.config,
        levels=curve.levels,
        faster_levels=faster,
        faster_up_to=up_to,
        crossover=crossover(curve),
    )


# -- the deploy table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    config: str | None
    algorithm: str | None
    point: str
    level: float
    speedup: float | None
    reason: str


def _choice_at(
    x: float,
    baseline: Series,
    pairs: Sequence[schema.Pair],
    meets: Callable[[Series, float], bool | None],
    series_of: dict[str, Series],
) -> Choice:
    best: tuple[float, schema.Pair, schema.SpeedupLevel] | None = None
    for p in pairs:
        lv = next((lv for lv in p.levels if lv.level == x), None)
        if lv is None or lv.verdict != FASTER or lv.speedup is None:
            continue
        if meets(series_of[p.config], x) is False:
            continue
        if best is None or lv.speedup > best[0]:
            best = (lv.speedup, p, lv)
    measured = baseline.at(x)
    point = measured.point if measured is not None else best[2].point if best else f"{x:g}"
    if best is not None:
        return Choice(
            best[1].config, best[1].algorithm, point, x, best[0], "faster than the baseline beyond noise"
        )
    if meets(baseline, x) is False:
        return Choice(None, None, point, x, None, "no config meets the SLO here")
    return Choice(
        baseline.key.config,
        baseline.key.algorithm,
        point,
        x,
        None,
        "no speculative config faster beyond noise",
    )


def _segments(choices: list[Choice]) -> list[schema.Segment]:
    segs: list[schema.Segment] = []
    run: list[Choice] = []
    for ch in [*choices, None]:
        if run and (ch is None or ch.config != run[0].config):
            ups = [c.speedup for c in run if c.speedup is not None]
            segs.append(
                schema.Segment(
                    config=run[0].config,
                    algorithm=run[0].algorithm,
                    from_point=run[0].point,
                    to_point=run[-1].point,
                    from_level=run[0].level,
                    to_level=run[-1].level,
                    speedup_min=min(ups) if ups else None,
                    speedup_max=max(ups) if ups else None,
                    reason=run[0].reason,
                )
            )
            run = []
        if ch is not None:
            run.append(ch)
    return segs


def deploy_text(load: str, segments: Sequence[schema.Segment]) -> str:
    """``X up to concurrency 4, then Y (measured to concurrency 16)``."""
    if not segments:
        return "no measured level"

    def name(s: schema.Segment) -> str:
        return s.config or "no config meets the SLO"

    if len(segments) == 1:
        s = segments[0]
        span = level_text(load, s.from_level) + (f" to {s.to_level:g}" if s.to_level != s.from_level else "")
        return f"{name(s)} at every measured level ({span})"
    parts = [f"{name(segments[0])} up to {level_text(load, segments[0].to_level)}"]
    for s in segments[1:-1]:
        parts.append(f"then {name(s)} up to {level_text(load, s.to_level)}")
    last = segments[-1]
    parts.append(f"then {name(last)} (measured to {level_text(load, last.to_level)})")
    return ", ".join(parts)


def deploy_row(group: GroupKey, members: Sequence[Series], pairs: Sequence[schema.Pair]) -> schema.DeployRow:
    """The deploy table's row of one group (``pairs``: its speculative configs against its baseline)."""
    baselines = [s for s in members if s.key.is_baseline]
    common = {"host": group.host, "tp": group.tp, "model_path": group.model_path}
    common.update(prompt_set=group.prompt_set, load=group.load)
    if not baselines:
        names = ", ".join(s.key.config for s in members)
        note = f"no algorithm-none config to compare {names} with: no break-even"
        return schema.DeployRow(**common, baseline=None, segments=[], text="no baseline", notes=[note])
    baseline = baselines[0]
    series_of = {s.key.config: s for s in members}
    grid = sorted({lv.level for lv in baseline.levels} | {lv.level for p in pairs for lv in p.levels})
    choices = [_choice_at(x, baseline, pairs, slo.meets_at, series_of) for x in grid]
    segments = _segments(choices)
    first_spec = next((s.config for s in segments if s.config and s.config != baseline.key.config), None)
    quoted = first_spec or (max(pairs, key=_reach).config if pairs else None)
    cross = next((p.crossover for p in pairs if p.config == quoted), None)
    notes = []
    if any(not lv.valid for s in members for lv in s.levels):
        notes.append("some levels have invalid repeats (see the summary tables)")
    if not pairs:
        notes.append("no speculative config in this group")
    return schema.DeployRow(
        **common,
        baseline=baseline.key.config,
        segments=segments,
        text=deploy_text(group.load, segments),
        breakeven=quoted,
        crossover=cross,
        notes=notes,
    )


def _reach(p: schema.Pair) -> float:
    """How far a config pays: its crossover, else its faster range (for quoting one crossover per row)."""
    est = p.crossover.estimate.value
    return est if est is not None else (p.faster_up_to or 0.0)
