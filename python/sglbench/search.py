"""The SLO-bounded load search: which load levels of one config attempt get measured, and its verdict.

Standard library only, because it runs inside ``ansible-playbook``: the action
``plugins/action/sglbench_points.py`` (ops ``plan``, ``next`` and ``assemble``) imports it from the
checkout. Settings, the pass rule and the verdicts: docs/records.md, "The SLO-bounded search".

One search runs per config attempt (config x TP x workload). Its inputs are the bench settings
(``sglbench_bench``: ``search`` for the mode and budgets, ``slo`` for the objectives), the server's
capacity (the probe's, else the plan's ``max_running_requests`` and ``max_total_num_tokens``) and the
points already committed in the attempt directory. Everything it decides is a pure function of those, so
a re-run or a run after a SIGKILL replays the same decisions from the committed points and continues at
the first point that is not yet measured: no point is ever measured twice.

The search, per mode (closed loop: concurrency; open loop: Poisson request rate):

1. **Bracket**: from ``start``, double while every objective passes, up to the capacity bound.
   A pass at the bound ends the search: the plan is the limit (``plan_limited``). A failure at
   ``start`` halves down to ``floor``; a failure there means the objectives are never met
   (``never_met``).
2. **Bisect** between the highest passing and the lowest failing level (integer midpoints; geometric
   midpoints for rates) until they are ``resolution`` apart (``limit_found``).
3. **Budgets**: at most ``max_levels`` levels and ``time_budget_s`` seconds of measurement; when one runs
   out the search stops and says which, with the bracket it reached (``step``).
4. **Trust**: a level is judged on the points the client self-check found valid (``summary.valid``), and
   only once it has ``repeats`` of them. An invalid point is replaced by one more repeat of the same level
   (repeat ``repeats``, ``repeats + 1``, ...; at most ``remeasure`` per level); a level still short of
   valid points after those is *untrusted*: not judged (``trusted: false``, verdict ``inconclusive``),
   treated as not passing (the answer errs low), and a limit whose next level up is untrusted is
   ``unresolved``, never ``limit_found``. Untrusted levels carry no throughput for the crossover.
5. **Crossover** (a speculative config, given its baseline's attempt directory; ``crossover``, default on):
   within the same budgets, the levels that locate where its speedup over the baseline falls to 1 by the
   break-even map's rule: the baseline's levels around it first, then midpoints down to ``resolution``
   (:meth:`_Search.refine`). They never move the SLO limit.

A level passes only when its confidence interval says so: for an objective "metric quantile <= limit"
the **upper** bound of the 95 % interval of that quantile must be at or below the limit; for the goodput
share ">= limit" the **lower** bound must be at or above it. The interval is a seeded hierarchical
bootstrap over the level's repeats, then over the requests of each drawn repeat (the repeat-to-repeat
noise and the request-to-request noise both widen it). A level whose interval straddles a limit does not
pass (``inconclusive``): the search is conservative and treats it as a failure.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglbench import resume
from sglbench.hostlib import metrics, result_schema
from sglbench.hostlib.atomic_file import write_atomic

MODES = ("concurrency", "rate")
STATE_FILE = "search.json"  # the decisions and level judgements of the attempt's search (a cache)
N_BOOT = 200  # bootstrap replicates per objective and level
CI_LEVEL = 0.95
MAX_ITL_PER_REQUEST = 64  # a request's ITL values beyond this are thinned to evenly spaced order statistics
QUANTILES = (50, 90, 95, 99)
# Per-request latencies the objectives can bound: the metric keys of result_schema.METRICS, each with the
# RequestMetrics field that carries one request's value(s) in seconds.
REQUEST_FIELDS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "itl_ms": "itl_s", "e2e_ms": "e2e_s"}
GOODPUT = "goodput"  # objective: share of requests meeting the per-request SLOs (ttft_ms, tpot_ms, e2e_ms)
REQUEST_SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")  # sglbench_bench.slo: per-request thresholds (goodput)
PER_REQUEST_QUANTILE = 99  # without a goodput floor, a per-request SLO holds at this percentile
VERDICTS = ("limit_found", "plan_limited", "never_met", "unresolved")
UNTRUSTED = "untrusted"  # an objective's state at a level short of valid points: not judged
DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "mode": "concurrency",
    "start": 0,  # 0 = 1 (concurrency) or 1.0 req/s (rate)
    "floor": 0,  # 0 = 1 (concurrency) or start / 16 (rate)
    "max": 0,  # 0 = the capacity bound only
    "max_levels": 8,
    "time_budget_s": 0,  # 0 = no time budget
    "resolution": 0,  # 0 = 1 (concurrency) or 0.1, i.e. 10 % (rate)
    "crossover": True,  # a speculative config: locate its crossover against the baseline's levels too
    "remeasure": 2,  # most extra points per level that replace points the client self-check found invalid
}


class SearchError(ValueError):
    """Bad search settings; the message names the field and the fix."""


# -- settings ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Objective:
    """One SLO the search holds every level to: ``ttft_ms_p99 <= 2000`` or ``goodput >= 0.99``."""

    name: str
    limit: float
    metric: str | None = None  # "ttft_ms" (None for goodput)
    quantile: int | None = None  # 99

    @property
    def bound(self) -> str:
        """The CI bound that decides: ``upper`` for a latency ceiling, ``lower`` for the goodput floor."""
        return "lower" if self.metric is None else "upper"

    def state(self, estimate: float | None, ci_low: float | None, ci_high: float | None) -> str:
        """``pass`` (the deciding bound within the limit), ``fail`` (the whole interval beyond it, or nothing
        measured) or ``inconclusive`` (the interval straddles the limit)."""
        if estimate is None or ci_low is None or ci_high is None:
            return "fail"
        if self.metric is None:  # a floor: the lower bound decides
            return "pass" if ci_low >= self.limit else ("fail" if ci_high < self.limit else "inconclusive")
        return "pass" if ci_high <= self.limit else ("fail" if ci_low > self.limit else "inconclusive")


@dataclass(frozen=True)
class SearchSpec:
    """The search of one attempt: mode, levels, budgets, objectives (from ``sglbench_bench``)."""

    mode: str
    start: float
    floor: float
    max: float
    max_levels: int
    time_budget_s: float
    resolution: float
    crossover: bool  # after the SLO search, refine the crossover against a baseline's levels (when given)
    remeasure: int  # most extra points per level, each replacing an invalid one
    repeats: int
    seed: int
    cap: int | None  # rate mode: the in-flight cap (``concurrency: [N]``), else None
    objectives: tuple[Objective, ...]
    request_slo: metrics.Slo
    max_new_tokens: int
    settings: dict[str, Any] = field(default_factory=dict)  # as given, defaults filled (the record keeps it)

    @property
    def rate(self) -> bool:
        return self.mode == "rate"

    @property
    def iterations(self) -> int:
        """Most points the search can ask for: every level of the budget, every repeat and re-measure."""
        return self.max_levels * (self.repeats + self.remeasure)


def _where(key: str) -> str:
    return f"sglbench_bench.search.{key}"


def _number(value: Any, name: str, *, minimum: float = 0.0, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SearchError(f"{name} must be a number, got {value!r}")
    try:
        num = float(value)
    except ValueError:
        raise SearchError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(num) or num < minimum:
        raise SearchError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    if integer and num != int(num):
        raise SearchError(f"{name} must be a whole number, got {value!r}")
    return num


def parse_objectives(slo: Mapping[str, Any]) -> tuple[tuple[Objective, ...], metrics.Slo]:
    """``sglbench_bench.slo`` -> the distribution objectives and the per-request SLO of goodput.

    The one reading of the ``slo`` keys (the deploy answer judges measured levels by the same objectives,
    through :func:`read_objectives`). Keys: ``<metric>_p<q>`` (metric one of ttft_ms, tpot_ms, itl_ms,
    e2e_ms; q one of 50, 90, 95, 99) with a ceiling in real-world milliseconds; ``goodput`` with the least
    share (0..1] of requests meeting every per-request SLO; ``ttft_ms``/``tpot_ms``/``e2e_ms`` are those
    per-request SLOs. Without ``goodput``, each per-request SLO bounds the level through its p99 (at least
    99 % of requests meet it): ``ttft_ms: 2000`` is ``ttft_ms_p99 <= 2000`` (the stricter one when both are
    declared). Raises :class:`SearchError` naming the first bad key.
    """
    objectives, request_slo, unknown = _objectives(slo, strict=True)
    assert not unknown
    return objectives, request_slo


def read_objectives(slo: Any) -> tuple[tuple[Objective, ...], metrics.Slo, list[str]]:
    """:func:`parse_objectives` for a reader of results: never raises; a key that is no SLO (or has a bad
    value) is returned in the third item, for the reader to list as not judged."""
    return _objectives(slo, strict=False)


def _objectives(slo: Any, *, strict: bool) -> tuple[tuple[Objective, ...], metrics.Slo, list[str]]:
    if not isinstance(slo, Mapping):
        if strict:
            raise SearchError(f"sglbench_bench.slo must be a mapping, got {type(slo).__name__}")
        return (), metrics.Slo(), []
    known = {result_schema.Metric(m, "", "", "").column(f"p{q}") for m in REQUEST_FIELDS for q in QUANTILES}
    names = [m.key for m in result_schema.METRICS]
    objectives: dict[str, Objective] = {}
    per_request: dict[str, float] = {}
    unknown: list[str] = []
    for key, value in slo.items():
        where = f"sglbench_bench.slo.{key}"
        if value is None:
            continue
        try:
            if key in REQUEST_SLO_KEYS:
                per_request[key] = _number(value, where, minimum=1e-9)
            elif key == GOODPUT:
                share = _number(value, where)
                if not 0.0 < share <= 1.0:
                    raise SearchError(
                        f"{where} is the least share of good requests: a number in (0, 1], got {value!r}"
                    )
                objectives[GOODPUT] = Objective(GOODPUT, share)
            elif key in known:
                metric, q = key.rsplit("_p", 1)
                if metric not in names:  # result_schema.METRICS owns the metric names
                    raise SearchError(f"{where}: {metric} is not a metric of result_schema.METRICS")
                objectives[key] = Objective(key, _number(value, where, minimum=1e-9), metric, int(q))
            else:
                raise SearchError(
                    f"{where} is not an SLO: use <metric>_p<q> (metric {', '.join(REQUEST_FIELDS)}; q "
                    f"{', '.join(map(str, QUANTILES))}), goodput, or a per-request "
                    f"{', '.join(REQUEST_SLO_KEYS)}"
                )
        except SearchError:
            if strict:
                raise
            unknown.append(str(key))
    request_slo = metrics.Slo(**per_request)
    if GOODPUT in objectives and not request_slo.active():
        if strict:
            raise SearchError(
                "sglbench_bench.slo.goodput needs a per-request SLO to count good requests: set ttft_ms, "
                "tpot_ms or e2e_ms too"
            )
        del objectives[GOODPUT]
        unknown.append(GOODPUT)
    if GOODPUT not in objectives:
        for key, limit in per_request.items():  # no goodput floor: each per-request SLO holds at the p99
            name = f"{key}_p{PER_REQUEST_QUANTILE}"
            if name not in objectives or limit < objectives[name].limit:
                objectives[name] = Objective(name, limit, key, PER_REQUEST_QUANTILE)
    return tuple(sorted(objectives.values(), key=lambda o: o.name)), request_slo, sorted(unknown)


def parse_spec(load: Mapping[str, Any]) -> SearchSpec | None:
    """The search of these bench settings, or None when ``search.enabled`` is false (the fixed ladder)."""
    raw = load.get("search") or {}
    if not isinstance(raw, Mapping):
        raise SearchError(f"sglbench_bench.search must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise SearchError(f"{_where(unknown[0])} is not a search setting: use {', '.join(DEFAULTS)}")
    s = {**DEFAULTS, **{k: v for k, v in raw.items() if v is not None}}
    for flag in ("enabled", "crossover"):
        if not isinstance(s[flag], bool):
            raise SearchError(f"{_where(flag)} must be true or false, got {s[flag]!r}")
    if not s["enabled"]:
        return None
    if s["mode"] not in MODES:
        raise SearchError(f"{_where('mode')} must be one of {', '.join(MODES)}, got {s['mode']!r}")
    rate = s["mode"] == "rate"
    start = _number(s["start"], _where("start"), integer=not rate) or 1.0
    floor = _number(s["floor"], _where("floor"), integer=not rate) or (start / 16 if rate else 1.0)
    if floor > start:
        raise SearchError(f"{_where('floor')} ({floor:g}) must not exceed {_where('start')} ({start:g})")
    if not rate and floor < 1:
        raise SearchError(f"{_where('floor')} must be a concurrency >= 1, got {s['floor']!r}")
    top = _number(s["max"], _where("max"), integer=not rate)
    if top and top < start:
        raise SearchError(f"{_where('max')} ({top:g}) must be 0 (the capacity bound) or >= start ({start:g})")
    max_levels = int(_number(s["max_levels"], _where("max_levels"), minimum=1, integer=True))
    remeasure = int(_number(s["remeasure"], _where("remeasure"), integer=True))
    resolution = _number(s["resolution"], _where("resolution"), integer=not rate) or (0.1 if rate else 1.0)
    objectives, request_slo = parse_objectives(load.get("slo") or {})
    if not objectives:
        raise SearchError(
            "sglbench_bench.slo names no objective for the search: add e.g. ttft_ms_p99: 2000, "
            "itl_ms_p50: 25 or goodput: 0.99"
        )
    conc = [int(c) for c in (load.get("concurrency") or [])]
    if rate and len(conc) > 1:
        raise SearchError("sglbench_bench.concurrency must hold at most one cap in rate search mode")
    if not rate and load.get("request_rate"):
        raise SearchError(
            "sglbench_bench.request_rate must be empty in concurrency search mode (search.mode: rate)"
        )
    repeats = int(load.get("repeats") or 1)
    if repeats < 1:
        raise SearchError(f"sglbench_bench.repeats must be >= 1, got {repeats}")
    return SearchSpec(
        mode=str(s["mode"]),
        start=start,
        floor=floor,
        max=top,
        max_levels=max_levels,
        time_budget_s=_number(s["time_budget_s"], _where("time_budget_s")),
        resolution=resolution,
        crossover=bool(s["crossover"]),
        remeasure=remeasure,
        repeats=repeats,
        seed=int(load.get("seed") or 0),
        cap=(conc[0] if conc else None) if rate else None,
        objectives=objectives,
        request_slo=request_slo,
        max_new_tokens=int(load.get("max_new_tokens") or 0),
        settings={**s, "start": start, "floor": floor, "resolution": resolution, "remeasure": remeasure},
    )


# -- capacity ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Capacity:
    """What the server can hold: its request slots and KV token pool (probe first, else the plan)."""

    max_running_requests: int | None
    max_total_num_tokens: int | None
    source: str = "unknown"  # probe | plan | unknown

    @classmethod
    def from_args(cls, value: Any) -> Capacity:
        d = value if isinstance(value, Mapping) else {}

        def pos(key: str) -> int | None:
            try:
                v = int(d.get(key)) if d.get(key) not in (None, "") else None
            except (TypeError, ValueError):
                return None
            return v if v and v > 0 else None

        return cls(
            pos("max_running_requests"), pos("max_total_num_tokens"), str(d.get("source") or "unknown")
        )

    def concurrency_bound(self, tokens_per_request: float | None) -> tuple[int | None, str | None]:
        """Most requests the server holds at once and what bounds it (slots or KV tokens)."""
        options = []
        if self.max_running_requests:
            options.append((self.max_running_requests, "max_running_requests"))
        if self.max_total_num_tokens and tokens_per_request and tokens_per_request > 0:
            options.append((max(1, int(self.max_total_num_tokens // tokens_per_request)), "kv_tokens"))
        if not options:
            return None, None
        return min(options)


# -- one level's data and judgement -------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One measured request of a level, in real-world units (the stand-in's time scale undone)."""

    ok: bool
    values: dict[str, Any]  # metric key -> ms (itl_ms: a list of ms)
    good: bool  # met every per-request SLO (goodput)
    tokens: int  # prompt + output tokens (the KV the request held)


def _thin(values: list[float], cap: int) -> list[float]:
    if len(values) <= cap:
        return values
    s = sorted(values)
    return [s[round(i * (len(s) - 1) / (cap - 1))] for i in range(cap)]


def request_from_row(row: Mapping[str, Any], scale: float, slo: metrics.Slo) -> Request:
    """One row of ``points/<key>.requests.jsonl`` as the search judges it."""
    ok = metrics.is_ok(row)
    m = metrics.request_metrics(row)
    values: dict[str, Any] = {}
    for key, attr in REQUEST_FIELDS.items():
        v = getattr(m, attr)
        if isinstance(v, list):
            values[key] = _thin([x * 1000.0 / scale for x in v], MAX_ITL_PER_REQUEST)
        else:
            values[key] = v * 1000.0 / scale if v is not None else None
    good = ok
    for key, limit in slo.active().items():
        v = values.get(key)
        met = (v is None and key == "tpot_ms") or (v is not None and v <= limit)
        good = good and met
    prompt = row.get("prompt_tokens") or 0
    return Request(ok, values, good, int(prompt) + int(m.output_tokens))


def _quantile_of(requests: Iterable[Request], metric: str, q: int) -> float | None:
    vals: list[float] = []
    for r in requests:
        if not r.ok:
            continue
        v = r.values.get(metric)
        if isinstance(v, list):
            vals.extend(v)
        elif v is not None:
            vals.append(v)
    if not vals:
        return None
    vals.sort()
    return metrics.percentile(vals, q)


def _good_share(requests: Sequence[Request]) -> float | None:
    return sum(r.good for r in requests) / len(requests) if requests else None


def _statistic(obj: Objective) -> Callable[[Sequence[Request]], float | None]:
    if obj.metric is None:
        return _good_share
    metric, q = obj.metric, int(obj.quantile or 50)
    return lambda reqs: _quantile_of(reqs, metric, q)


def bootstrap_ci(
    repeats: Sequence[Sequence[Request]],
    stat: Callable[[Sequence[Request]], float | None],
    rng: random.Random,
    n_boot: int = N_BOOT,
) -> tuple[float | None, float | None, float | None]:
    """(estimate over every request, CI low, CI high): repeats drawn with replacement, then requests within
    each drawn repeat; the interval is the replicates' 2.5th and 97.5th percentiles."""
    reps = [list(r) for r in repeats if r]
    if not reps:
        return None, None, None
    estimate = stat([q for r in reps for q in r])
    draws: list[float] = []
    for _ in range(n_boot):
        sample: list[Request] = []
        for _ in reps:
            rep = reps[rng.randrange(len(reps))]
            n = len(rep)
            sample.extend(rep[rng.randrange(n)] for _ in range(n))
        v = stat(sample)
        if v is not None:
            draws.append(v)
    if not draws:
        return estimate, None, None
    draws.sort()
    tail = (1.0 - CI_LEVEL) / 2 * 100
    return estimate, metrics.percentile(draws, tail), metrics.percentile(draws, 100 - tail)


def judge_level(
    spec: SearchSpec, label: str, repeats: Sequence[Sequence[Request]], invalid: Sequence[str] = ()
) -> dict[str, Any]:
    """Every objective at one level: estimate, CI, the bound that decides, pass; and the level's verdict
    (``pass``, ``fail``: a bound beyond its limit on the wrong side entirely, ``inconclusive``: straddles)."""
    out: dict[str, Any] = {}
    states = []
    for obj in spec.objectives:
        rng = random.Random(f"{spec.seed}:{label}:{obj.name}")
        est, low, high = bootstrap_ci(repeats, _statistic(obj), rng)
        state = obj.state(est, low, high)
        states.append(state)
        out[obj.name] = {
            "limit": obj.limit,
            "estimate": est,
            "ci_low": low,
            "ci_high": high,
            "bound": obj.bound,
            "state": state,
        }
    verdict = "fail" if "fail" in states else ("inconclusive" if "inconclusive" in states else "pass")
    tokens = [r.tokens for rep in repeats for r in rep if r.ok and r.tokens > 0]
    e2e = _quantile_of((r for rep in repeats for r in rep), "e2e_ms", 50)
    return {
        "verdict": verdict,
        "pass": verdict == "pass",
        "trusted": True,
        "objectives": out,
        "invalid": list(invalid),
        "requests": sum(len(rep) for rep in repeats),
        "tokens_per_request": sum(tokens) / len(tokens) if tokens else None,
        "e2e_ms_p50": e2e,
    }


def untrusted_level(
    spec: SearchSpec, repeats: Sequence[Sequence[Request]], invalid: Sequence[str]
) -> dict[str, Any]:
    """A level short of valid points: no objective judged (state ``untrusted``, no estimate), verdict
    ``inconclusive``, never a pass. Only its request sizes (the server's token counts, whatever the client's
    timing) are kept, for the capacity bound."""
    tokens = [r.tokens for rep in repeats for r in rep if r.ok and r.tokens > 0]
    return {
        "verdict": "inconclusive",
        "pass": False,
        "trusted": False,
        "objectives": {
            o.name: {
                "limit": o.limit,
                "estimate": None,
                "ci_low": None,
                "ci_high": None,
                "bound": o.bound,
                "state": UNTRUSTED,
            }
            for o in spec.objectives
        },
        "invalid": list(invalid),
        "requests": 0,
        "tokens_per_request": sum(tokens) / len(tokens) if tokens else None,
        "e2e_ms_p50": None,
    }


def _repeat(doc: Mapping[str, Any]) -> int:
    point = doc.get("point") if isinstance(doc.get("point"), Mapping) else {}
    try:
        return int(point.get("repeat") or 0)
    except (TypeError, ValueError):
        return 0


def point_valid(doc: Mapping[str, Any]) -> bool:
    """Whether the client self-check trusted this committed point (its summary's ``valid``)."""
    summary = doc.get("summary") if isinstance(doc.get("summary"), Mapping) else {}
    return summary.get("valid") is not False


# -- the attempt's committed points --------------------------------------------------------------------
def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _rows(attempt_dir: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rel = doc.get("requests_file")
    if not rel:
        return []
    out = []
    try:
        with open(os.path.join(attempt_dir, str(rel)), encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    row = json.loads(line)
                    if isinstance(row, dict) and not row.get("warmup"):
                        out.append(row)
    except (OSError, ValueError):
        return []
    return out


def _time_scale(doc: Mapping[str, Any]) -> float:
    meta = doc.get("meta") if isinstance(doc.get("meta"), Mapping) else {}
    return result_schema.stand_in_time_scale(meta.get("server_info")) or 1.0


def _fingerprint(docs: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [[d.get("key"), d.get("hash"), d.get("committed_at")] for d in docs]


class Attempt:
    """The committed points of one attempt directory, read once, with the judgement cache."""

    def __init__(self, attempt_dir: str, spec: SearchSpec) -> None:
        self.dir = attempt_dir
        self.spec = spec
        state = _read_json(os.path.join(attempt_dir, STATE_FILE))
        cache = state.get("cache") if isinstance(state, Mapping) else None
        self.key = resume.sha256_of(
            {
                "objectives": [[o.name, o.limit] for o in spec.objectives],
                "slo": spec.request_slo.active(),
                "seed": spec.seed,
                "n_boot": N_BOOT,
                "judged_on": "valid points",
                "repeats": spec.repeats,
            }
        )
        self.cache: dict[str, Any] = (
            dict(cache.get("levels") or {})
            if isinstance(cache, Mapping) and (cache.get("key") == self.key)
            else {}
        )
        self.used: dict[str, Any] = {}

    def done_doc(self, point: Mapping[str, Any]) -> dict[str, Any] | None:
        path = os.path.join(self.dir, resume.POINTS_DIR, f"{point['key']}.json")
        doc = _read_json(path)
        pf = result_schema.PointFile.from_dict(doc)
        return doc if pf is not None and pf.is_done(point.get("hash")) else None

    def judge(self, label: str, docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        fp = _fingerprint(docs)
        hit = self.cache.get(label)
        if isinstance(hit, Mapping) and hit.get("fingerprint") == fp:
            self.used[label] = hit
            return dict(hit["result"])
        valid, other, invalid, wall = [], [], [], 0.0
        for d in docs:
            scale = _time_scale(d)
            rows = [request_from_row(r, scale, self.spec.request_slo) for r in _rows(self.dir, d)]
            summary = d.get("summary") if isinstance(d.get("summary"), Mapping) else {}
            if point_valid(d):
                valid.append(rows)
            else:
                other.append(rows)
                invalid.extend(f"{d.get('key')}: {r}" for r in summary.get("invalid_reasons") or ["invalid"])
            client = summary.get("client") if isinstance(summary.get("client"), Mapping) else {}
            wall += float(client.get("wall_s") or summary.get("duration_s") or 0.0)
        if len(valid) >= self.spec.repeats:  # judged on the valid points only
            result = judge_level(self.spec, label, valid, invalid)
        else:
            result = untrusted_level(self.spec, valid + other, invalid)
        result["points"] = [str(d.get("key")) for d in docs if point_valid(d)] if result["trusted"] else []
        result["remeasured"] = [str(d.get("key")) for d in docs if _repeat(d) >= self.spec.repeats]
        result["wall_s"] = wall
        result["time_scale"] = _time_scale(docs[0]) if docs else 1.0
        self.used[label] = {"fingerprint": fp, "result": result}
        return dict(result)

    def save(self, progress: Mapping[str, Any] | None = None) -> None:
        """Keep the judgements this replay used (so the next call does not bootstrap them again), and where
        the search stands (``progress``)."""
        doc = {"progress": dict(progress or {}), "cache": {"key": self.key, "levels": self.used}}
        write_atomic(os.path.join(self.dir, STATE_FILE), json.dumps(doc, indent=1, default=str) + "\n")


def _level_of(doc: Mapping[str, Any], spec: SearchSpec) -> float | None:
    """The load level of a committed point file in this search's mode (None: another mode or cap)."""
    point = doc.get("point") if isinstance(doc.get("point"), Mapping) else {}
    try:
        conc = int(point["concurrency"]) if point.get("concurrency") is not None else None
        rate = float(point["request_rate"]) if point.get("request_rate") is not None else None
    except (TypeError, ValueError):
        return None
    if spec.rate:
        return rate if rate is not None and conc == spec.cap and rate > 0 else None
    return float(conc) if rate is None and conc is not None and conc > 0 else None


def tok_s_of(docs: Iterable[Mapping[str, Any]]) -> float | None:
    """Mean output tok/s over the points of one level at real-world speed (the stand-in's time scale
    undone), as the summary table's throughput column; None when no point says."""
    vals = []
    for d in docs:
        summary = d.get("summary") if isinstance(d.get("summary"), Mapping) else {}
        v = summary.get("output_throughput_tok_s")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            vals.append(float(v) * _time_scale(d))
    return sum(vals) / len(vals) if vals else None


@dataclass(frozen=True)
class Baseline:
    """The levels the baseline config (``algorithm: none``, same host, TP, model and workload) measured in
    this run, with their mean output tok/s: what a speculative config's search compares itself with to
    locate its crossover. Read from the baseline's attempt directory once its attempt has ended ``ok``."""

    name: str
    tok_s: dict[float, float]  # level -> mean output tok/s (real-world)

    @classmethod
    def from_attempt(cls, attempt_dir: str | None, spec: SearchSpec) -> Baseline | None:
        """None when there is no such directory, its record is missing or not ``ok``, or no level is done."""
        if not attempt_dir:
            return None
        record = _read_json(os.path.join(attempt_dir, "record.json"))
        if not isinstance(record, Mapping) or record.get("outcome") != "ok":
            return None
        pdir = os.path.join(attempt_dir, resume.POINTS_DIR)
        per: dict[float, list[Mapping[str, Any]]] = {}
        for name in sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []:
            if not name.endswith(".json") or name.startswith("."):
                continue
            doc = _read_json(os.path.join(pdir, name))
            if not isinstance(doc, Mapping) or doc.get("outcome") != "ok" or not point_valid(doc):
                continue
            level = _level_of(doc, spec)
            if level is not None:
                per.setdefault(level, []).append(doc)
        tok_s = {lv: v for lv, docs in per.items() if (v := tok_s_of(docs)) is not None}
        if not tok_s:
            return None
        return cls(os.path.basename(os.path.normpath(attempt_dir)), dict(sorted(tok_s.items())))


def log_interpolate(curve: Mapping[float, float], x: float) -> float | None:
    """``curve`` at ``x``: its value there, else linear in log load between its two neighbouring levels
    (the break-even map's rule, ``sglbench.deploy.breakeven``); None outside its range."""
    if x in curve:
        return curve[x]
    below = [k for k in curve if k < x]
    above = [k for k in curve if k > x]
    if not below or not above:
        return None
    a, b = max(below), min(above)
    w = (math.log(x) - math.log(a)) / (math.log(b) - math.log(a))
    return (1 - w) * curve[a] + w * curve[b]


def crossover_bracket(
    own: Mapping[float, float], base: Mapping[float, float]
) -> tuple[str, float | None, float | None, dict[float, float]]:
    """Where the speedup (own / base tok/s) falls to 1, by the break-even map's rule: over every level either
    side measured inside the range both measured (the other side interpolated in log load), the last level
    of the leading run above 1 and the next one. Returns (status, low, high, speedup per level); status is
    ``crosses``, ``faster throughout``, ``not faster at the lowest level`` or ``no common levels``."""
    if not own or not base:
        return "no common levels", None, None, {}
    lo_r, hi_r = max(min(own), min(base)), min(max(own), max(base))
    speedup: dict[float, float] = {}
    for x in sorted({*own, *base}):
        if lo_r <= x <= hi_r:
            n, d = log_interpolate(own, x), log_interpolate(base, x)
            if n is not None and d:
                speedup[x] = n / d
    if not speedup:
        return "no common levels", None, None, {}
    prev = None
    for x, s in speedup.items():
        if not s > 1.0:
            if prev is None:
                return "not faster at the lowest level", None, x, speedup
            return "crosses", prev, x, speedup
        prev = x
    return "faster throughout", prev, None, speedup


# -- the search itself ----------------------------------------------------------------------------------
def _round_rate(x: float) -> float:
    """A rate with three significant digits (tidy point labels: r2.5, r12.3)."""
    if x <= 0:
        return x
    digits = 2 - math.floor(math.log10(x))
    return round(x, digits)


@dataclass
class Decision:
    """What the search wants next (``point``; None when ``done``) and its document so far."""

    done: bool
    point: dict[str, Any] | None
    expected: list[dict[str, Any]]  # every point of every level visited, in order (the record lists these)
    doc: dict[str, Any]
    # where the search stands: phase (slo, crossover, done), the next point and whether it replaces an
    # invalid one, the points committed per phase (``search.json``'s ``progress``)
    progress: dict[str, Any] = field(default_factory=dict)


class _Search:
    def __init__(
        self, spec: SearchSpec, capacity: Capacity, identity_hash: str, baseline: Baseline | None = None
    ) -> None:
        self.spec = spec
        self.baseline = baseline if spec.crossover else None
        self.crossover: dict[str, Any] | None = None
        self.capacity = capacity
        self.identity = identity_hash
        self.levels: list[dict[str, Any]] = []
        self.expected: list[dict[str, Any]] = []
        self.lo: float | None = None
        self.hi: float | None = None
        self.bound: float | None = None
        self.bound_by: str | None = None
        self.tokens_per_request: float | None = None
        self.time_spent = 0.0
        self.untrusted: list[float] = []  # levels short of valid points after every re-measure
        self.committed = {"slo": 0, "crossover": 0}  # points committed per phase
        self._set_bound(None, None)

    # levels ---------------------------------------------------------------------------------------
    def points(self, level: float, n: int | None = None) -> list[dict[str, Any]]:
        """The level's first ``n`` points (default: its ``repeats``; beyond them, its re-measures)."""
        spec = self.spec
        n = spec.repeats if n is None else n
        if spec.rate:
            return resume.level_points(self.identity, spec.cap, float(level), n, spec.seed)
        return resume.level_points(self.identity, int(level), None, n, spec.seed)

    def visit(
        self, attempt: Attempt, level: float, phase: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
        """The level's points so far: (the next one to measure or None, its committed point files, the
        points visited). Its ``repeats`` points first; then, while fewer than ``repeats`` of them are valid,
        one more repeat per invalid point, at most ``remeasure``."""
        spec = self.spec
        every = self.points(level, spec.repeats + spec.remeasure)
        base, extra = every[: spec.repeats], every[spec.repeats :]
        docs = [attempt.done_doc(p) for p in base]
        done = [d for d in docs if d is not None]
        self.committed[phase] += len(done)
        if len(done) < len(base):
            return next(p for p, d in zip(base, docs, strict=True) if d is None), done, list(base)
        visited = list(base)
        valid = sum(point_valid(d) for d in done)
        for p in extra:
            if valid >= spec.repeats:
                break
            visited.append(p)
            d = attempt.done_doc(p)
            if d is None:
                return p, done, visited
            done.append(d)
            self.committed[phase] += 1
            valid += point_valid(d)
        return None, done, visited

    def progress(self, phase: str, todo: Mapping[str, Any] | None) -> dict[str, Any]:
        return {
            "phase": phase,
            "next_point": todo["key"] if todo else None,
            "remeasure": bool(todo) and int(todo["repeat"]) >= self.spec.repeats,
            "committed": dict(self.committed),
        }

    def judged(
        self, attempt: Attempt, level: float, role: str, label: str, done: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The level judged on its committed points (``Attempt.judge``), entered in ``levels``."""
        result = attempt.judge(label, done)
        trusted = bool(result.get("trusted"))
        if not trusted:
            self.untrusted.append(level)
        entry = {"level": self._num(level), "point": label, "role": role, **result}
        entry["tok_s"] = tok_s_of(d for d in done if point_valid(d)) if trusted else None
        self.levels.append(entry)
        self.time_spent += float(result.get("wall_s") or 0.0)
        return result

    def _set_bound(self, tokens_per_request: float | None, e2e_ms: float | None) -> None:
        """The highest level the server can hold: slots or KV tokens / tokens per request (closed loop); that
        many requests over the unloaded E2E latency (open loop, Little's law); ``search.max`` if lower."""
        spec = self.spec
        hold, by = self.capacity.concurrency_bound(tokens_per_request)
        bound: float | None = None
        if spec.rate:
            if hold is not None and e2e_ms:
                time_scale = self.levels[0]["time_scale"] if self.levels else 1.0
                bound, by = (
                    _round_rate(hold / (e2e_ms * time_scale / 1000.0)),
                    f"{by} / unloaded e2e (Little's law)",
                )
        else:
            bound = hold
        if spec.max and (bound is None or spec.max < bound):
            bound, by = spec.max, "search.max"
        self.bound, self.bound_by = bound, by

    def clip(self, level: float) -> float:
        if self.bound is not None and level > self.bound:
            level = self.bound
        return _round_rate(level) if self.spec.rate else float(int(level))

    def converged(self, lo: float, hi: float) -> bool:
        if self.spec.rate:
            return hi <= lo * (1.0 + self.spec.resolution)
        return hi - lo <= self.spec.resolution

    def mid(self, lo: float, hi: float) -> float:
        if self.spec.rate:
            m = _round_rate(math.sqrt(lo * hi))
            return m if lo < m < hi else _round_rate((lo + hi) / 2)
        return float((int(lo) + int(hi)) // 2)

    def step_after(self, level: float) -> tuple[float | None, str | None]:
        """The next level, or (None, verdict)."""
        spec = self.spec
        if self.hi is None:  # every level so far passed: keep doubling up to the bound
            if self.bound is not None and level >= self.bound:
                return None, "plan_limited"
            return self.clip(level * 2), None
        if self.lo is None:  # every level so far failed: halve down to the floor
            if level <= spec.floor:
                return None, "never_met"
            down = max(spec.floor, level / 2)
            return (_round_rate(down) if spec.rate else float(int(down))), None
        if self.converged(self.lo, self.hi):
            return None, "limit_found"
        return self.mid(self.lo, self.hi), None

    def budget_left(self) -> str | None:
        if len(self.levels) >= self.spec.max_levels:
            return "max_levels"
        if self.spec.time_budget_s and self.time_spent >= self.spec.time_budget_s:
            return "time_budget_s"
        return None

    # the replay -----------------------------------------------------------------------------------
    def run(self, attempt: Attempt) -> Decision:
        spec = self.spec
        level: float | None = self.clip(spec.start)
        verdict: str | None = None
        exhausted: str | None = None
        while level is not None:
            todo, done, visited = self.visit(attempt, level, "slo")
            if todo is not None:
                if not done:
                    exhausted = self.budget_left()
                    if exhausted:
                        break
                self.expected.extend(visited)
                return Decision(
                    False,
                    todo,
                    list(self.expected),
                    self.document(None, None, level),
                    self.progress("slo", todo),
                )
            self.expected.extend(visited)
            result = self.judged(attempt, level, "slo", str(visited[0]["point"]), done)
            if self.tokens_per_request is None and result.get("trusted"):  # the first level judged
                self.tokens_per_request = result.get("tokens_per_request")
                self._set_bound(self.tokens_per_request, result.get("e2e_ms_p50"))
            if result["pass"]:
                self.lo = level if self.lo is None else max(self.lo, level)
            else:
                self.hi = level if self.hi is None else min(self.hi, level)
            level, verdict = self.step_after(level)
        if verdict is None:
            verdict = self._final_verdict()
        if verdict in ("limit_found", "never_met") and self.hi in self.untrusted:
            verdict = "unresolved"  # the level above the limit was never judged: the limit is a lower bound
        if self.baseline is not None:
            want = self.refine(attempt)
            if want is not None:
                return Decision(
                    False,
                    want[0],
                    list(self.expected),
                    self.document(None, exhausted, want[1]),
                    self.progress("crossover", want[0]),
                )
        return Decision(
            True,
            None,
            list(self.expected),
            self.document(verdict, exhausted, None),
            self.progress("done", None),
        )

    # the crossover ------------------------------------------------------------------------------------
    def refine(self, attempt: Attempt) -> tuple[dict[str, Any], float] | None:
        """After the SLO search, the levels that locate the crossover against the baseline: the baseline's
        own levels first (compared where both measured), then midpoints (the baseline interpolated), until
        the levels around the crossover are ``resolution`` apart or the budget of levels is spent. Sets
        ``self.crossover``; returns the next point to measure and its level, or None when done. These levels
        never move the SLO limit: they are judged and listed (``role: crossover``), not bisected on."""
        assert self.baseline is not None
        refined: list[float | int] = []
        while True:
            own = {float(lv["level"]): lv["tok_s"] for lv in self.levels if lv.get("tok_s")}
            tried = {float(lv["level"]) for lv in self.levels}
            status, lo, hi, speedup = crossover_bracket(own, self.baseline.tok_s)
            level = self._refine_next(status, lo, hi, own, tried)
            stop = self._refine_stop(status, lo, hi) if level is None else self.budget_left()
            self.crossover = {
                "baseline": self.baseline.name,
                "status": status,
                "between": [self._num(lo), self._num(hi)],
                "step": self._num(hi - lo) if lo is not None and hi is not None else None,
                "speedup": {f"{self._num(x)}": round(v, 4) for x, v in speedup.items()},
                "levels": list(refined),
                "stopped": stop,
            }
            if level is None or stop:
                return None
            todo, done, visited = self.visit(attempt, level, "crossover")
            self.expected.extend(visited)
            if todo is not None:
                self.crossover["stopped"] = None
                return todo, level
            self.judged(attempt, level, "crossover", str(visited[0]["point"]), done)
            refined.append(self._num(level))

    def _refine_next(
        self,
        status: str,
        lo: float | None,
        hi: float | None,
        own: Mapping[float, float],
        tried: set[float],
    ) -> float | None:
        """The next level to measure for the crossover, or None. ``own``: the trusted levels' tok/s;
        ``tried``: every level measured (an untrusted one is not measured again)."""
        assert self.baseline is not None
        base = self.baseline.tok_s

        def holds(x: float) -> bool:
            return self.bound is None or x <= self.bound

        if status == "faster throughout":  # can it go where the baseline went, within what it holds?
            beyond = [x for x in base if x > max(own) and holds(x) and x not in tried]
            return max(beyond) if beyond else None
        if status != "crosses" or lo is None or hi is None:
            return None
        # the baseline's levels inside the bracket (its ends included) first: compared where both measured
        inside = [x for x in base if lo <= x <= hi and x not in tried and holds(x)]
        if inside:
            mid = math.sqrt(lo * hi)
            return min(inside, key=lambda x: (abs(math.log(x / mid)), x))
        if self.converged(lo, hi):
            return None
        m = self.mid(lo, hi)
        return m if lo < m < hi and m not in tried else None

    def _refine_stop(self, status: str, lo: float | None, hi: float | None) -> str:
        if status != "crosses":
            return status
        if lo is not None and hi is not None and self.converged(lo, hi):
            return "resolved"
        return "no level between"

    def _num(self, x: float | None) -> float | int | None:
        if x is None:
            return None
        return x if self.spec.rate else int(x)

    def _final_verdict(self) -> str:
        """The verdict when a budget stopped the search before its own end."""
        if self.lo is not None and self.hi is not None:
            return "limit_found"
        if self.lo is not None and self.bound is not None and self.lo >= self.bound:
            return "plan_limited"
        if self.hi is not None and self.hi <= self.spec.floor:
            return "never_met"
        return "unresolved"

    def document(
        self, verdict: str | None, exhausted: str | None, next_level: float | None
    ) -> dict[str, Any]:
        spec = self.spec

        def num(x: float | None) -> float | int | None:
            if x is None:
                return None
            return x if spec.rate else int(x)

        limit = self.lo if verdict in ("limit_found", "plan_limited", "unresolved") else None
        step = (self.hi - self.lo) if self.lo is not None and self.hi is not None else None
        limit_point = next(
            (lv["point"] for lv in self.levels if limit is not None and lv["level"] == num(limit)), None
        )
        return {
            "mode": spec.mode,
            "verdict": verdict,
            "limit": num(limit),
            "limit_point": limit_point,
            "next_above": num(self.hi),
            "step": num(step) if step is not None else None,
            "next_level": num(next_level),
            "bound": num(self.bound),
            "bound_by": self.bound_by,
            "capacity": {
                "max_running_requests": self.capacity.max_running_requests,
                "max_total_num_tokens": self.capacity.max_total_num_tokens,
                "source": self.capacity.source,
                "tokens_per_request": self.tokens_per_request,
            },
            "objectives": {o.name: {"limit": o.limit, "bound": o.bound} for o in spec.objectives},
            "request_slo": spec.request_slo.active(),
            "ci": {
                "method": "bootstrap: repeats, then requests within each drawn repeat (seeded)",
                "level": CI_LEVEL,
                "replicates": N_BOOT,
            },
            "budget": {
                "max_levels": spec.max_levels,
                "levels_measured": len(self.levels),
                "time_budget_s": spec.time_budget_s,
                "time_spent_s": self.time_spent,
                "exhausted": exhausted,
            },
            "settings": dict(spec.settings),
            "trust": {
                "remeasure": spec.remeasure,
                "remeasured": [lv["level"] for lv in self.levels if lv.get("remeasured")],
                "untrusted": [lv["level"] for lv in self.levels if lv.get("trusted") is False],
            },
            "crossover": self.crossover,
            "levels": self.levels,
        }


def decide(
    attempt_dir: str,
    spec: SearchSpec,
    capacity: Capacity,
    identity_hash: str,
    baseline_dir: str | None = None,
) -> Decision:
    """Replay the search over the committed points of ``attempt_dir``: the next point to measure, or done.
    ``baseline_dir``: the attempt directory of this config's baseline in the run (a speculative config;
    see :class:`Baseline`), whose levels the search then also locates the crossover against."""
    attempt = Attempt(attempt_dir, spec)
    baseline = Baseline.from_attempt(baseline_dir, spec) if spec.crossover else None
    decision = _Search(spec, capacity, identity_hash, baseline).run(attempt)
    if attempt.used:
        attempt.save(decision.progress)
    return decision


def committed_points(attempt_dir: str, identity_hash: str, spec: SearchSpec) -> list[dict[str, Any]]:
    """The expected form (key, point fields, the hash this identity gives it: rebuilt, never read) of every
    committed point file that is a level of this search; ``plan`` keeps those whose file carries that hash
    and moves the others aside (``stale``), with every file that is no level of it (``unexpected``)."""
    pdir = os.path.join(attempt_dir, resume.POINTS_DIR)
    out = []
    for name in sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []:
        if not name.endswith(".json") or name.startswith("."):
            continue
        doc = _read_json(os.path.join(pdir, name))
        point = doc.get("point") if isinstance(doc, Mapping) else None
        if not isinstance(point, Mapping):
            continue
        try:
            conc = int(point["concurrency"]) if point.get("concurrency") is not None else None
            rate = float(point["request_rate"]) if point.get("request_rate") is not None else None
            repeat = int(point["repeat"])
        except (KeyError, TypeError, ValueError):
            continue
        if (
            spec.rate != (rate is not None)
            or (spec.rate and conc != spec.cap)
            or not 0 <= repeat < spec.repeats + spec.remeasure
        ):
            continue
        level = rate if spec.rate else conc
        if level is None or not math.isfinite(level) or level <= 0:
            continue
        for p in resume.level_points(identity_hash, conc, rate, spec.repeats + spec.remeasure, spec.seed):
            if p["key"] == name[: -len(".json")] and p["repeat"] == repeat:
                out.append(p)
    return out
