"""The measured load levels the deployment answer reads, one series per config curve.

A *series* is one config's curve: run, host, TP size, config, algorithm, model, prompt set and load
mode, with its levels sorted by load. The load mode is ``concurrency`` (closed loop: the level is the
number of concurrent requests) or ``rate`` (open loop, Poisson arrivals: the level is requests/s at
real-world time, the stand-in's time scale undone as every table does; an unbounded ``rinf`` point has
no level and is left out). Two points of one series at the same level (rate points with different caps)
keep the first by label. Each level carries what the summary table says of it (mean tok/s and its
interval, ``sglbench.summarize``), its repeat samples for the bootstrap, and the mean over repeats of
every latency column of ``hostlib/result_schema.METRICS`` (real-world milliseconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sglbench import bootstrap
from sglbench.hostlib import result_schema
from sglbench.records import AttemptRecord
from sglbench.results import Results
from sglbench.summarize import CELL_KEYS

LOAD_CONCURRENCY = "concurrency"
LOAD_RATE = "rate"
LOADS = (LOAD_CONCURRENCY, LOAD_RATE)
TPOT_P50 = next(m for m in result_schema.METRICS if m.key == "tpot_ms").column("p50")
E2E_P50 = next(m for m in result_schema.METRICS if m.key == "e2e_ms").column("p50")
E2E_MEAN = next(m for m in result_schema.METRICS if m.key == "e2e_ms").column("mean")
TTFT_P50 = next(m for m in result_schema.METRICS if m.key == "ttft_ms").column("p50")


@dataclass(frozen=True)
class GroupKey:
    """The configs compared with each other: same run, host, TP size, model, prompt set and load mode."""

    run_id: str
    host: str
    tp: int
    model_path: str | None
    prompt_set: str
    load: str


@dataclass(frozen=True)
class SeriesKey:
    run_id: str
    host: str
    tp: int
    config: str
    algorithm: str
    model_path: str | None
    prompt_set: str
    load: str

    @property
    def group(self) -> GroupKey:
        return GroupKey(self.run_id, self.host, self.tp, self.model_path, self.prompt_set, self.load)

    @property
    def is_baseline(self) -> bool:
        return str(self.algorithm).lower() in ("none", "")


@dataclass(frozen=True, eq=False)
class Level:
    """One load level of one series."""

    point: str
    level: float
    concurrency: int | None
    load: str
    cell: tuple[Any, ...]  # the summary table's cell key (summarize.CELL_KEYS)
    samples: tuple[bootstrap.RepeatSample, ...]
    tok_s: float
    tok_s_ci_low: float | None
    tok_s_ci_high: float | None
    metrics: dict[str, float]  # latency column -> mean over repeats
    request_throughput: float | None
    valid: bool

    def metric(self, column: str) -> float | None:
        v = self.metrics.get(column)
        return v if v is not None and math.isfinite(v) else None

    @property
    def per_user_tok_s(self) -> float | None:
        """Each request's own decode rate: 1000 / TPOT p50 (ms), mean over repeats."""
        tpot = self.metric(TPOT_P50)
        return 1000.0 / tpot if tpot and tpot > 0 else None

    @property
    def in_flight(self) -> float | None:
        """Requests in the server at once: the concurrency (closed loop), or arrival rate x mean latency
        (Little's law, open loop), at most the point's concurrency cap."""
        if self.load == LOAD_CONCURRENCY:
            return float(self.concurrency) if self.concurrency is not None else None
        e2e = self.metric(E2E_MEAN)
        if self.request_throughput is None or e2e is None:
            return None
        n = self.request_throughput * e2e / 1000.0
        return min(n, float(self.concurrency)) if self.concurrency else n

    @property
    def has_noise(self) -> bool:
        return bootstrap.has_noise_estimate(self.samples)


@dataclass(frozen=True, eq=False)
class Series:
    key: SeriesKey
    levels: tuple[Level, ...]
    attempt: dict[str, Any]  # the attempts frame's row (capacity predicted and observed)
    record: AttemptRecord

    def at(self, level: float) -> Level | None:
        return next((lv for lv in self.levels if lv.level == level), None)


def load_mode(request_rate: Any) -> str:
    return LOAD_CONCURRENCY if request_rate is None or pd.isna(request_rate) else LOAD_RATE


def _level_value(first: Any) -> float | None:
    if load_mode(first.request_rate) == LOAD_CONCURRENCY:
        return float(first.concurrency) if not pd.isna(first.concurrency) else None
    rate = float(first.request_rate)
    scale = first.sim_time_scale
    if scale is not None and not pd.isna(scale):
        rate *= float(scale)
    return rate if math.isfinite(rate) and rate > 0 else None


def _opt(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _level(
    key: tuple[Any, ...], grp: pd.DataFrame, row: dict[str, Any], samples: list[bootstrap.RepeatSample]
) -> Level | None:
    first = grp.iloc[0]
    value = _level_value(first)
    if value is None or not samples:
        return None
    cols = result_schema.point_metric_columns()
    metrics = {c: float(grp[c].astype(float).mean()) for c in cols if grp[c].notna().any()}
    conc = first.concurrency
    return Level(
        point=str(first.point),
        level=value,
        concurrency=None if conc is None or pd.isna(conc) else int(conc),
        load=load_mode(first.request_rate),
        cell=key,
        samples=tuple(samples),
        tok_s=float(row["tok_s"]),
        tok_s_ci_low=_opt(row["tok_s_ci_low"]),
        tok_s_ci_high=_opt(row["tok_s_ci_high"]),
        metrics=metrics,
        request_throughput=_opt(grp["request_throughput"].astype(float).mean()),
        valid=bool(grp["valid"].astype(bool).all()),
    )


def measured_series(
    res: Results,
    table: pd.DataFrame,
    samples: dict[tuple[Any, ...], list[bootstrap.RepeatSample]],
) -> list[Series]:
    """Every config curve with at least one level, in a stable order (run, host, TP, model, prompt set,
    load, baseline first, config). ``table`` is ``summarize.summary_table(res)`` and ``samples`` the
    repeat samples it was computed from (``summarize.repeat_samples``)."""
    pts = res.points
    if not len(pts):
        return []
    pts = pts[pts["output_throughput_tok_s"].notna()]
    rows = {
        tuple(r[k] for k in CELL_KEYS): r
        for r in table[table["point"].notna()].to_dict("records")
        if not pd.isna(r["tok_s"])
    }
    records = {(r.run_id, r.host, r.instance): r for r in res.records}
    attempts = {(a["run_id"], a["host"], a["instance"]): a for a in res.attempts.to_dict("records")}
    levels: dict[SeriesKey, list[Level]] = {}
    owner: dict[SeriesKey, tuple[str, str, str]] = {}
    for key, grp in pts.groupby(CELL_KEYS, dropna=False, sort=False):
        key = tuple(key)
        row = rows.get(key)
        if row is None:
            continue
        lv = _level(key, grp, row, samples.get(key, []))
        if lv is None:
            continue
        d = dict(zip(CELL_KEYS, key, strict=True))
        sk = SeriesKey(
            run_id=str(d["run_id"]),
            host=str(d["host"]),
            tp=int(d["tp"]),
            config=str(d["config"]),
            algorithm=str(d["algorithm"]),
            model_path=None if d["model_path"] is None or pd.isna(d["model_path"]) else str(d["model_path"]),
            prompt_set=str(d["prompt_set"]),
            load=lv.load,
        )
        levels.setdefault(sk, []).append(lv)
        owner.setdefault(sk, (sk.run_id, sk.host, str(grp.iloc[0]["instance"])))
    out = []
    for sk in sorted(levels, key=_series_order):
        lvs = sorted(levels[sk], key=lambda lv: (lv.level, lv.point))
        unique = [lv for i, lv in enumerate(lvs) if i == 0 or lv.level != lvs[i - 1].level]
        own = owner[sk]
        out.append(Series(sk, tuple(unique), attempts[own], records[own]))
    return out


def _series_order(k: SeriesKey) -> tuple[Any, ...]:
    return (k.run_id, k.host, k.tp, str(k.model_path), k.prompt_set, k.load, not k.is_baseline, k.config)


def groups(series: Iterable[Series]) -> dict[GroupKey, list[Series]]:
    out: dict[GroupKey, list[Series]] = {}
    for s in series:
        out.setdefault(s.key.group, []).append(s)
    return out


def log_levels(values: Iterable[float]) -> np.ndarray:
    return np.log(np.asarray(list(values), dtype=float))


def level_text(load: str, level: float | None) -> str:
    """``concurrency 4`` / ``2.5 req/s``: a level as the tables say it."""
    if level is None:
        return "-"
    if load == LOAD_CONCURRENCY:
        return f"concurrency {level:g}"
    return f"{level:g} req/s"


def short_level(load: str, level: float | None, digits: int = 3) -> str:
    """``4`` / ``2.5/s``: a level in a table cell whose header names the load."""
    if level is None:
        return "-"
    text = f"{level:.{digits}g}"
    return text if load == LOAD_CONCURRENCY else f"{text}/s"
