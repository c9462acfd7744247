"""The SLOs a benchmark declared, judged at one measured level.

The SLOs are the benchmark's ``slo`` setting (``sglbench_bench.slo`` in the inventory, recorded in the
benchmark summary's ``meta.slo``). What each key means is the search's reading
(:func:`sglbench.search.read_objectives`, the one owner): ``<metric>_p<q>`` is a ceiling on that
percentile; ``goodput`` a floor on the share of requests meeting the per-request SLOs ``ttft_ms``,
``tpot_ms``, ``e2e_ms``; without ``goodput`` each per-request SLO is a ceiling on its p99.

How a level is judged: where the SLO-bounded search judged it (the record's ``benchmark.search`` lists
the level), by the search's own verdict per objective, its 95 % bootstrap bound (an inconclusive level
counts as missed, as in the search); a level the search left *untrusted* (too few points the client
self-check found valid, even after measuring it again) is judged neither way (``met`` None), and the SLO
walk of ``deploy/limits.py`` stops there; otherwise (a fixed ladder) by the statistic's mean over repeats.
``goodput`` has no column in the point tables, so outside a search it is not judged. Figures are at
real-world time (the stand-in's time scale undone), the numbers every table shows. A key that is no SLO
is listed as not judged, never dropped silently; a level where a judged metric was not measured is
neither met nor failed (None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sglbench import search
from sglbench.deploy import schema
from sglbench.deploy.levels import Level, Series


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


def searched_level(series: Series, point: str) -> Mapping[str, Any] | None:
    """The search's judgement of the series' level ``point`` (its entry in ``benchmark.search.levels``),
    None when no search judged it."""
    for bench in series.record.benchmarks:
        if bench.prompt_set != series.key.prompt_set or not bench.search:
            continue
        for entry in bench.search.get("levels") or []:
            if isinstance(entry, Mapping) and entry.get("point") == point and entry.get("objectives"):
                return entry
    return None


def untrusted(searched: Mapping[str, Any] | None) -> bool:
    """Whether the search left this level unjudged: short of valid points after re-measuring."""
    return searched is not None and searched.get("trusted") is False


def trust(series: Series) -> tuple[list[str], list[str]]:
    """The series' searched levels the search left untrusted, and those it judged on re-measured points
    (point labels, in level order)."""
    out: tuple[list[str], list[str]] = ([], [])
    for lv in series.levels:
        searched = searched_level(series, lv.point)
        if untrusted(searched):
            out[0].append(lv.point)
        elif searched is not None and searched.get("remeasured"):
            out[1].append(lv.point)
    return out


def judge(limits: Mapping[str, float], level: Level, searched: Mapping[str, Any] | None = None) -> Judgement:
    """Every declared SLO at ``level``: by the search's verdict where ``searched`` (its entry for this
    level) judged it, else by the level's mean statistic."""
    objectives, _request_slo, unjudged = search.read_objectives(limits)
    by_search = (searched or {}).get("objectives") or {}
    checks = []
    for obj in objectives:
        judged = by_search.get(obj.name)
        if isinstance(judged, Mapping):
            state = judged.get("state")
            value = judged.get("estimate")
            met = None if state in (None, search.UNTRUSTED) else state == "pass"
        elif obj.metric is None:  # goodput: judged by a search only
            unjudged.append(obj.name)
            continue
        else:
            value = level.metric(obj.name)
            met = None if value is None else value <= obj.limit
        checks.append(schema.SloCheck(level.point, obj.name, obj.name, obj.limit, value, met))
    return Judgement(checks, sorted(unjudged))


def meets_at(series: Series, level: float) -> bool | None:
    """Whether the series meets its declared SLOs at ``level``: None when it declares none, did not
    measure that level, or nothing could be judged there."""
    limits = declared(series)
    lv = series.at(level)
    if not limits or lv is None:
        return None
    return judge(limits, lv, searched_level(series, lv.point)).met
