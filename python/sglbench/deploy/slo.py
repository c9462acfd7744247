"""The SLOs a benchmark declared, judged at one measured level.

The SLOs are the benchmark's ``slo`` setting (``sglbench_bench.slo`` in the inventory, recorded in the
benchmark summary's ``meta.slo``). Two kinds of key are judged:

- ``ttft_ms``, ``tpot_ms``, ``e2e_ms``: the load generator's per-request goodput limits. Met at a level
  when that metric's p99 (mean over repeats) is within the limit: at least 99% of requests meet it.
- ``<metric>_<stat>`` for a metric and statistic of ``hostlib/result_schema.METRICS`` (``ttft_ms_p99``,
  ``itl_ms_p50``, ``tpot_ms_p99``, ...): met when that statistic (mean over repeats) is within the limit.

Figures are at real-world time (the stand-in's time scale undone), the numbers every table shows. A key
of neither kind is listed as not judged, never dropped silently; a level where a judged metric was not
measured is neither met nor failed (None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sglbench.deploy import schema
from sglbench.deploy.levels import Level, Series
from sglbench.hostlib import result_schema

PER_REQUEST_STAT = "p99"
PER_REQUEST_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def column_for(key: str) -> str | None:
    """The latency column an SLO key is judged on, or None when this reader cannot judge it."""
    if key in PER_REQUEST_KEYS:
        return f"{key}_{PER_REQUEST_STAT}"
    columns = set(result_schema.point_metric_columns())
    return key if key in columns else None


def declared(series: Series) -> dict[str, float]:
    """The SLO limits of the series' benchmark (its prompt set's ``meta.slo``), as numbers."""
    for bench in series.record.benchmarks:
        if bench.prompt_set != series.key.prompt_set:
            continue
        raw = bench.meta.get("slo")
        if isinstance(raw, Mapping):
            return {str(k): float(v) for k, v in raw.items() if _number(v)}
    return {}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Judgement:
    checks: list[schema.SloCheck]
    unjudged: list[str]

    @property
    def met(self) -> bool | None:
        """True when every judged limit is met, False when one is missed, None when none could be judged."""
        known = [c.met for c in self.checks if c.met is not None]
        if not known:
            return None
        return all(known)


def judge(limits: Mapping[str, float], level: Level) -> Judgement:
    checks, unjudged = [], []
    for key, limit in sorted(limits.items()):
        column = column_for(key)
        if column is None:
            unjudged.append(key)
            continue
        value = level.metric(column)
        met = None if value is None else value <= limit
        checks.append(schema.SloCheck(level.point, key, column, limit, value, met))
    return Judgement(checks, unjudged)


def meets_at(series: Series, level: float) -> bool | None:
    """Whether the series meets its declared SLOs at ``level``: None when it declares none, did not
    measure that level, or nothing could be judged there."""
    limits = declared(series)
    lv = series.at(level)
    if not limits or lv is None:
        return None
    return judge(limits, lv).met
