"""Why each config's highest load is where it is: one label per series, with the evidence.

Method (also in ``docs/deploy.md``). The label is about the *examined level*: the first level that
misses a declared SLO (``deploy/slo.py``) or that the SLO-bounded search left untrusted (not judged: too
few points the client self-check found valid, even after measuring it again), else the highest measured
level. In this order:

- **slot-bound**: requests in flight at that level (the concurrency; in open loop the arrival rate x
  mean end-to-end latency, Little's law) reached the server's max running requests (the probe's
  ``effective_max_running_requests``, else the capacity plan's), and that bound is not above the KV
  bound: further requests wait in the queue.
- **kv-bound**: requests in flight reached the KV bound, the token pool (the probe's
  ``max_total_num_tokens``, else the plan's) divided by the tokens one request holds (mean prompt plus
  mean completion tokens of the attempt's successful requests; unknown without request rows).
- **compute-bound**: neither bound reached, but each request's decode rate (1000 / TPOT p50) fell by
  more than ``COMPUTE_DROP`` from the lowest level: the batch makes every step slower.
- **slo-bound**: an SLO fails at the examined level and none of the three above holds there.
- **not reached**: none of them by the highest measured level (or the untrusted level); the levels
  stopped first.

``limit_level`` is the highest level that holds: below the first SLO failure or untrusted level, else the
highest measured;
``next_level`` is the measured level after it (where it stopped holding). The server's own counters
during a point (queue length, KV usage, retractions from ``/metrics`` and the load endpoint) are not
sampled yet: ``server_counters`` is null until they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from sglbench.deploy import schema, slo
from sglbench.deploy.levels import TTFT_P50, Level, Series, level_text
from sglbench.results import Results

METHOD = (__doc__ or "").split("Method (also in ``docs/deploy.md``).", 1)[-1].strip()
SLOT, KV, COMPUTE, SLO, NOT_REACHED = "slot-bound", "kv-bound", "compute-bound", "slo-bound", "not reached"
LABELS = (SLOT, KV, COMPUTE, SLO, NOT_REACHED)
COMPUTE_DROP = 0.10
ROW_COLUMNS = ["run_id", "host", "instance", "prompt_set", "ok", "prompt_tokens", "completion_tokens"]


def request_sizes(res: Results) -> dict[tuple[str, str, str, str], float]:
    """Mean prompt + mean completion tokens of the successful requests per (run, host, instance,
    prompt set): what one request holds in the KV pool when it finishes."""
    if not res.has_requests:
        return {}
    rows = res.request_columns(ROW_COLUMNS)
    if not len(rows):
        return {}
    rows = rows[rows["ok"].astype(bool)]
    out = {}
    for key, grp in rows.groupby(["run_id", "host", "instance", "prompt_set"], sort=False):
        p = pd.to_numeric(grp["prompt_tokens"], errors="coerce").mean()
        c = pd.to_numeric(grp["completion_tokens"], errors="coerce").mean()
        if not (pd.isna(p) or pd.isna(c)):
            out[tuple(str(k) for k in key)] = float(p) + float(c)
    return out


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def bounds(series: Series, sizes: Mapping[tuple[str, str, str, str], float]) -> schema.Bounds:
    att = series.attempt
    mrr, mrr_src = _int(att.get("max_running_requests_observed")), "observed"
    if mrr is None:
        mrr, mrr_src = _int(att.get("max_running_requests_predicted")), "plan"
    kv, kv_src = _int(att.get("kv_tokens_observed")), "observed"
    if kv is None:
        kv, kv_src = _int(att.get("kv_tokens_predicted")), "plan"
    k = series.key
    tpr = sizes.get((k.run_id, k.host, str(att["instance"]), k.prompt_set))
    kv_req = int(kv // tpr) if kv is not None and tpr else None
    return schema.Bounds(
        max_running_requests=mrr,
        max_running_requests_source=mrr_src if mrr is not None else None,
        kv_tokens=kv,
        kv_tokens_source=kv_src if kv is not None else None,
        tokens_per_request=round(tpr, 1) if tpr else None,
        tokens_per_request_source="request rows" if tpr else None,
        kv_requests=kv_req,
    )


def _slo_verdict(series: Series) -> tuple[schema.SloVerdict, int | None]:
    """The SLO walk up the levels, and where it stopped: the first level that misses an SLO or that the
    search left untrusted (not judged: the walk cannot vouch for it or anything above it)."""
    limits = slo.declared(series)
    failures: list[schema.SloCheck] = []
    stop: int | None = None
    unjudged: list[str] = []
    for i, lv in enumerate(series.levels):
        if not limits:
            break
        searched = slo.searched_level(series, lv.point)
        if slo.untrusted(searched):
            stop = i
            break
        j = slo.judge(limits, lv, searched)
        unjudged = j.unjudged
        if j.met is False:
            stop = i
            failures = [c for c in j.checks if c.met is False]
            break
    met_up_to = None
    if limits and stop is None:
        met_up_to = series.levels[-1].level
    elif stop:
        met_up_to = series.levels[stop - 1].level
    untrusted, remeasured = slo.trust(series)
    verdict = schema.SloVerdict(
        declared=limits,
        unjudged=unjudged,
        met_up_to=met_up_to,
        first_failing=series.levels[stop].point if stop is not None and failures else None,
        failures=failures,
        untrusted=untrusted,
        remeasured=remeasured,
    )
    return verdict, stop


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _slot_evidence(lv: Level, n: float, b: schema.Bounds, lowest: Level) -> list[str]:
    mrr = b.max_running_requests
    assert mrr is not None
    if lv.concurrency is not None and lv.load == "concurrency":
        if n > mrr:
            head = f"concurrency {n:g} > max running requests {mrr} ({b.max_running_requests_source}): "
            head += f"{n - mrr:g} requests wait in the queue"
        else:
            head = f"concurrency {n:g} = max running requests {mrr} ({b.max_running_requests_source}): "
            head += "every request slot is busy, one more request would wait"
    else:
        head = f"{n:.1f} requests in flight (rate x mean E2E) >= max running requests {mrr}: requests queue"
    out = [head]
    t0, t1 = lowest.metric(TTFT_P50), lv.metric(TTFT_P50)
    if t0 is not None and t1 is not None and lv is not lowest:
        out.append(f"TTFT p50 {t0:.0f} ms at {lowest.point} -> {t1:.0f} ms at {lv.point}")
    return out


def label_series(series: Series, sizes: Mapping[tuple[str, str, str, str], float]) -> schema.Limit:
    levels = series.levels
    lowest, highest = levels[0], levels[-1]
    verdict, first_fail = _slo_verdict(series)
    examined = levels[first_fail] if first_fail is not None else highest
    b = bounds(series, sizes)
    n = examined.in_flight
    pu0, pu1 = lowest.per_user_tok_s, examined.per_user_tok_s
    slot_hit = n is not None and b.max_running_requests is not None and n >= b.max_running_requests
    kv_hit = n is not None and b.kv_requests is not None and n >= b.kv_requests
    slot_first = b.kv_requests is None or (
        b.max_running_requests is not None and b.max_running_requests <= b.kv_requests
    )
    dropped = (
        examined is not lowest and pu0 is not None and pu1 is not None and pu1 < (1 - COMPUTE_DROP) * pu0
    )
    evidence: list[str] = []
    if slot_hit and (slot_first or not kv_hit):
        label = SLOT
        evidence += _slot_evidence(examined, n or 0.0, b, lowest)
    elif kv_hit:
        label = KV
        evidence.append(
            f"{n:g} requests in flight >= KV bound {b.kv_requests} ({b.kv_tokens:,} tokens "
            f"({b.kv_tokens_source}) / {b.tokens_per_request:g} tokens per request)"
        )
    elif dropped:
        label = COMPUTE
        evidence.append(
            f"per-request decode rate {pu0:.1f} tok/s at {lowest.point} -> {pu1:.1f} tok/s at "
            f"{examined.point} (-{(1 - pu1 / pu0) * 100:.0f}%, more than {COMPUTE_DROP:.0%}) while below "
            "the slot and KV bounds"
        )
    elif verdict.failures:
        label = SLO
    else:
        label = NOT_REACHED
        if first_fail is not None:  # the walk stopped at a level the search left untrusted
            evidence.append(f"no bound reached by {examined.point}, the first level not judged")
        else:
            evidence.append(f"no bound reached by the highest measured level ({highest.point})")
    for c in verdict.failures:
        evidence.append(f"SLO {c.key} <= {c.limit:g} fails at {c.point}: {c.column} = {_fmt(c.value)}")
    if verdict.untrusted:
        evidence.append(
            f"not judged (too few valid points after re-measuring; the SLO holds up to the level below the "
            f"first): {', '.join(verdict.untrusted)}"
        )
    if verdict.remeasured:
        evidence.append(f"re-measured (invalid points replaced): {', '.join(verdict.remeasured)}")
    if label not in (SLOT, KV):
        evidence.append(_bounds_line(n, b))
    limit_level = verdict.met_up_to if verdict.declared else highest.level
    after = [lv.level for lv in levels if limit_level is not None and lv.level > limit_level]
    if limit_level is None:  # the SLO fails at the lowest level already
        after = [lowest.level]
    k = series.key
    return schema.Limit(
        host=k.host,
        tp=k.tp,
        config=k.config,
        algorithm=k.algorithm,
        model_path=k.model_path,
        prompt_set=k.prompt_set,
        load=k.load,
        highest_point=highest.point,
        highest_level=highest.level,
        examined_point=examined.point,
        label=label,
        limit_level=limit_level,
        next_level=after[0] if after else None,
        in_flight=schema.finite(n),
        per_user_tok_s_lowest=schema.finite(pu0),
        per_user_tok_s_examined=schema.finite(pu1),
        bounds=b,
        slo=verdict,
        evidence=evidence,
        server_counters=None,
    )


def _bounds_line(n: float | None, b: schema.Bounds) -> str:
    slot = "unknown" if b.max_running_requests is None else str(b.max_running_requests)
    kv = "unknown (no request rows)" if b.kv_requests is None else f"{b.kv_requests} requests"
    return f"in flight {_fmt(n, 'g')}; bounds: slots {slot}, KV {kv}"


def limit_text(limit: schema.Limit) -> str:
    """``slot-bound at concurrency 4`` for tables."""
    where = level_text(limit.load, limit.highest_level if not limit.slo.declared else limit.limit_level)
    if limit.slo.declared and limit.limit_level is None:
        return f"{limit.label}: the SLO fails at the lowest level ({limit.examined_point})"
    return f"{limit.label} at {where}"


def holds_at(limit: schema.Limit, level: float) -> bool:
    """Whether ``level`` lies in the limit's interval: from its level up to (not including) the next
    measured level, unbounded above when nothing higher was measured."""
    lo = limit.limit_level if limit.limit_level is not None else 0.0
    hi = limit.next_level if limit.next_level is not None else math.inf
    return lo <= level < hi
