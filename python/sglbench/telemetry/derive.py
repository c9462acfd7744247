"""One point's telemetry figures from the raw document the host returned (``docs/records.md``,
"Telemetry"): what the point JSON keeps under ``telemetry`` and
:class:`~sglbench.hostlib.result_schema.PointTelemetry` reads.

Everything is computed over exactly the measured window (``window.start .. window.end``, host clock):
each series is cut there with its edge values interpolated (:mod:`sglbench.telemetry.series`).

- **Energy**: per GPU the trapezoid integral of board power over the window; the point's energy is
  their sum, and None when a GPU of the point has no power sample in the window (a sum without it would
  look fine and be wrong). Steps longer than ``GAP_FACTOR`` sampling intervals are gaps: bridged, listed
  and flagged. J/token = energy / output tokens; tokens/J per GPU = output tokens / that GPU's energy.
- **Power**: mean of the summed board power (energy / window), peak of any one GPU's samples.
- **Throttling**: share of the window during which any of the point's GPUs reported a power or thermal
  clock-event reason (:mod:`sglbench.telemetry.throttle`); any such share flags the point.
- **Server**: mean KV usage (``token_usage``), peak queue (``num_queue_reqs``, else the load endpoint's
  ``num_waiting_reqs``), mean running requests, mean speculative accept length, mean generation
  throughput and the retractions counter's increase over the window.
- **Steady state**: MSER-5 (:mod:`sglbench.telemetry.steady`) on running requests (else generation
  throughput); over the steady window the same power, energy and server means, and J/token as steady
  power / steady generation throughput (when the server reports it).
- **Cost**: ``gpu_hour_usd`` x GPUs x window hours, and per million output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from sglbench.hostlib import result_schema
from sglbench.telemetry import clock as clockmod
from sglbench.telemetry import series as ser
from sglbench.telemetry import steady as steadymod
from sglbench.telemetry import throttle as thr

SCHEMA = 1  # the raw document's ``schema`` this reader understands
GPU_COLUMNS = ("t", "gpu", "power_w", "sm_util_pct", "mem_util_pct", "mem_used_mib", "sm_clock_mhz", "temp_c")
# Server series: figure -> (source, name) candidates, the first one present wins.
RUNNING = (("metrics", "num_running_reqs"), ("load", "num_running_reqs"))
QUEUED = (("metrics", "num_queue_reqs"), ("load", "num_waiting_reqs"))
KV_USAGE = (("metrics", "token_usage"),)
GEN_THROUGHPUT = (("metrics", "gen_throughput"),)
ACCEPT_LENGTH = (("metrics", "spec_accept_length"),)
CACHE_HIT = (("metrics", "cache_hit_rate"),)
RETRACTIONS = (("metrics", "num_retracted_requests_total"), ("metrics", "num_retracted_reqs_total"))
STEADY_ON = (*RUNNING, *GEN_THROUGHPUT)
FLAGS = result_schema.TELEMETRY_FLAGS
MAX_ERRORS = 20  # host sampling errors kept in the point JSON (the raw file keeps all)


class TelemetryError(ValueError):
    """A raw document this reader cannot use at all (not a dict, no window)."""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _table(block: Any) -> tuple[list[str], list[Sequence[Any]]]:
    if not isinstance(block, Mapping):
        return [], []
    cols = [str(c) for c in block.get("columns") or []]
    rows = [r for r in block.get("rows") or [] if isinstance(r, (list, tuple)) and len(r) == len(cols)]
    return cols, rows


def gpu_columns(raw: Mapping[str, Any], columns: Sequence[str]) -> dict[str, dict[int, ser.Series]]:
    """Several GPU columns in one pass over the rows: column -> GPU index -> clean series (a GPU with no
    usable sample of a column is absent from it; a column the document lacks maps to ``{}``)."""
    cols, rows = _table(raw.get("gpu"))
    if "t" not in cols or "gpu" not in cols:
        return {c: {} for c in columns}
    it, ig = cols.index("t"), cols.index("gpu")
    wanted = [(c, cols.index(c)) for c in columns if c in cols]
    samples: dict[str, dict[int, list[tuple[Any, Any]]]] = {c: {} for c, _ in wanted}
    for r in rows:
        g = r[ig]
        if isinstance(g, float) and g.is_integer():
            g = int(g)
        if not isinstance(g, int) or isinstance(g, bool):
            continue
        t = r[it]
        for c, i in wanted:
            samples[c].setdefault(g, []).append((t, r[i]))
    out: dict[str, dict[int, ser.Series]] = {c: {} for c in columns}
    for c, by_gpu in samples.items():
        out[c] = {g: s for g, s in ((g, ser.clean(v)) for g, v in by_gpu.items()) if s}
    return out


def gpu_series(raw: Mapping[str, Any], column: str) -> dict[int, ser.Series]:
    """One GPU column as a clean series per GPU index (GPUs with no usable sample are absent)."""
    return gpu_columns(raw, [column])[column]


def throttle_series(raw: Mapping[str, Any]) -> dict[int, ser.Series]:
    """Each GPU's clock-event mask over time (the mask as a number; unreadable masks dropped)."""
    cols, rows = _table(raw.get("gpu"))
    if "t" not in cols or "gpu" not in cols or "throttle_mask" not in cols:
        return {}
    it, ig, im = cols.index("t"), cols.index("gpu"), cols.index("throttle_mask")
    by_gpu: dict[int, list[tuple[Any, Any]]] = {}
    for r in rows:
        g, m = _num(r[ig]), thr.mask(r[im])
        if g is not None and g.is_integer() and m is not None:
            by_gpu.setdefault(int(g), []).append((r[it], float(m)))
    return {g: s for g, s in ((g, ser.clean(v)) for g, v in by_gpu.items()) if s}


def server_series(raw: Mapping[str, Any]) -> dict[tuple[str, str], ser.Series]:
    """Every server series by (source, name)."""
    cols, rows = _table(raw.get("server"))
    need = ("t", "source", "name", "value")
    if not all(c in cols for c in need):
        return {}
    it, isrc, iname, iv = (cols.index(c) for c in need)
    by_key: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    for r in rows:
        by_key.setdefault((str(r[isrc]), str(r[iname])), []).append((r[it], r[iv]))
    return {k: s for k, s in ((k, ser.clean(v)) for k, v in by_key.items()) if s}


def pick(
    found: Mapping[tuple[str, str], ser.Series], candidates: Sequence[tuple[str, str]]
) -> tuple[str | None, ser.Series]:
    """The first of ``candidates`` (source, name) that has a series: its ``source:name`` and the series."""
    for key in candidates:
        if found.get(key):
            return f"{key[0]}:{key[1]}", found[key]
    return None, []


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _window(raw: Mapping[str, Any]) -> tuple[float, float]:
    w = raw.get("window")
    start = _num(w.get("start")) if isinstance(w, Mapping) else None
    end = _num(w.get("end")) if isinstance(w, Mapping) else None
    if start is None or end is None or end < start:
        raise TelemetryError(f"telemetry window is not a window: {w!r}")
    return start, end


def _server_figures(found: Mapping[tuple[str, str], ser.Series], start: float, end: float) -> dict[str, Any]:
    def mean_of(cands: Sequence[tuple[str, str]]) -> float | None:
        return _round(ser.time_mean(ser.cut(pick(found, cands)[1], start, end)))

    queued = ser.cut(pick(found, QUEUED)[1], start, end)
    retract = ser.cut(pick(found, RETRACTIONS)[1], start, end)
    return {
        "kv_usage_mean": mean_of(KV_USAGE),
        "queue_peak": _round(ser.peak(queued)),
        "running_mean": mean_of(RUNNING),
        "gen_throughput_mean": mean_of(GEN_THROUGHPUT),
        "spec_accept_length_mean": mean_of(ACCEPT_LENGTH),
        "cache_hit_rate_mean": mean_of(CACHE_HIT),
        # A counter's increase; a restart inside the window (a drop) makes it unknowable.
        "retractions": (
            _round(retract[-1][1] - retract[0][1])
            if len(retract) >= 2 and all(b[1] >= a[1] for a, b in pairwise(retract))
            else None
        ),
    }


def _power(
    power: Mapping[int, ser.Series], gpus: Sequence[int], start: float, end: float
) -> tuple[float | None, dict[int, float]]:
    """The window's energy per GPU with samples, and the total (None when a GPU has none)."""
    per = {g: ser.integral(ser.cut(power[g], start, end)) for g in gpus if power.get(g)}
    total = sum(per.values()) if per and len(per) == len(gpus) else None
    return total, per


def cost(gpu_hour_usd: Any, n_gpus: int, seconds: float, output_tokens: int | None) -> dict[str, Any] | None:
    """What the window cost at ``gpu_hour_usd`` per GPU-hour, in total and per million output tokens;
    None without a (non-negative, finite) price or GPUs."""
    price = _num(gpu_hour_usd)
    if price is None or price < 0 or n_gpus <= 0 or not seconds >= 0:
        return None
    usd = price * n_gpus * seconds / 3600.0
    return {
        "gpu_hour_usd": price,
        "usd": _round(usd, 9),
        "usd_per_mtok": _round(usd / output_tokens * 1e6) if output_tokens else None,
    }


def derive(
    raw: Mapping[str, Any],
    *,
    clock: clockmod.ClockOffset | None = None,
    output_tokens: int | None = None,
    gpu_hour_usd: float | None = None,
    gap_factor: float = ser.GAP_FACTOR,
    steady_after: float | None = None,
) -> dict[str, Any]:
    """The figures of one point (a JSON-ready dict, the ``PointTelemetry`` document). ``steady_after``
    (host clock): when the window's first request completed; before it the requests in flight can only
    have grown, so no steady window begins earlier, whatever MSER-5 makes of noise."""
    if not isinstance(raw, Mapping):
        raise TelemetryError(f"telemetry must be a mapping, got {type(raw).__name__}")
    start, end = _window(raw)
    seconds = end - start
    sampling = raw.get("sampling") if isinstance(raw.get("sampling"), Mapping) else {}
    assert isinstance(sampling, Mapping)
    table = gpu_columns(raw, ("power_w", "sm_util_pct", "sm_clock_mhz", "mem_used_mib", "temp_c"))
    power = table["power_w"]
    listed = [int(g) for g in sampling.get("gpus") or [] if _num(g) is not None]
    gpus = sorted(set(listed) or set(power))
    gpu_interval = (_num(sampling.get("gpu_interval_ms")) or 200.0) / 1000.0
    server_interval = (_num(sampling.get("server_interval_ms")) or 1000.0) / 1000.0
    off = clock if clock is not None else clockmod.unknown("not measured")
    tokens = int(output_tokens) if isinstance(output_tokens, (int, float)) and output_tokens > 0 else None

    # Energy and gaps over the whole window.
    energy, per_gpu = _power(power, gpus, start, end)
    missing = [g for g in gpus if g not in per_gpu]
    gap_list = []
    for g in gpus:
        for gap in ser.gaps(power.get(g, []), start, end, gpu_interval, gap_factor):
            gap_list.append({"gpu": g, "start": gap.start, "end": gap.end, "seconds": _round(gap.seconds)})
    found = server_series(raw)
    server_gaps = []
    if found:
        for key in (RUNNING[0], QUEUED[0], KV_USAGE[0]):
            if found.get(key):
                for gap in ser.gaps(found[key], start, end, server_interval, gap_factor):
                    name = f"{key[0]}:{key[1]}"
                    server_gaps.append(
                        {"series": name, "start": gap.start, "end": gap.end, "seconds": _round(gap.seconds)}
                    )

    peaks = [ser.peak(ser.cut(power[g], start, end)) for g in gpus if power.get(g)]

    def gpu_mean(column: str) -> float | None:
        means = [ser.time_mean(ser.cut(s, start, end)) for s in table[column].values()]
        vals = [m for m in means if m is not None]
        return _round(sum(vals) / len(vals)) if vals else None

    def gpu_peak(column: str) -> float | None:
        vals = [ser.peak(ser.cut(s, start, end)) for s in table[column].values()]
        return _round(max((v for v in vals if v is not None), default=None) if vals else None)

    # Throttling: the union over GPUs, step-wise (a mask holds until the next sample).
    masks = throttle_series(raw)
    throttled = thr.throttled_share(masks, start, end)
    reasons = thr.reasons_in(masks, start, end)

    # Steady state.
    steady_name, steady_on = pick(found, STEADY_ON)
    verdict = steadymod.mser5([p for p in steady_on if start <= p[0] <= end], steady_name)
    steady_doc: dict[str, Any] = {"status": verdict.status, "series": verdict.series}
    s0, s1 = verdict.start, verdict.end
    after = _num(steady_after)
    if verdict.steady and s0 is not None and s1 is not None and after is not None and after > s0:
        s0 = after  # still ramping until the first request completed
        if s1 - s0 < 3 * steadymod.BATCH * server_interval:  # too little left to be a plateau
            verdict = steadymod.SteadyWindow(steadymod.NOT_STEADY, series=steady_name)
            steady_doc["status"] = verdict.status
    if verdict.steady and s0 is not None and s1 is not None and s1 > s0:
        s_energy, _ = _power(power, gpus, s0, s1)
        s_power = s_energy / (s1 - s0) if s_energy is not None else None
        s_server = _server_figures(found, s0, s1)
        thr_s = s_server.get("gen_throughput_mean")
        steady_doc.update(
            start=s0,
            end=s1,
            seconds=_round(s1 - s0),
            energy_j=_round(s_energy),
            power_mean_w=_round(s_power),
            running_mean=s_server["running_mean"],
            kv_usage_mean=s_server["kv_usage_mean"],
            gen_throughput_mean=thr_s,
            j_per_token=_round(s_power / thr_s) if s_power is not None and thr_s else None,
        )

    j_per_token = energy / tokens if energy is not None and tokens else None
    price_doc = cost(gpu_hour_usd, len(gpus), seconds, tokens)
    errors = [str(e) for e in raw.get("errors") or []]
    flags = []
    if throttled:
        flags.append("throttled")
    if verdict.status == steadymod.NOT_STEADY:  # too short or no series: unknown, said by steady.status
        flags.append("not_steady")
    if gap_list or server_gaps:
        flags.append("gaps")
    if missing:
        flags.append("missing_gpu")
    if not off.known:
        flags.append("clock_unknown")
    if errors:
        flags.append("sampling_errors")
    return {
        "schema": raw.get("schema"),
        "window": {
            "start": start,
            "end": end,
            "seconds": _round(seconds),
            "controller_start": off.to_controller(start),
            "controller_end": off.to_controller(end),
        },
        "clock": off.to_dict(),
        "gpus": gpus,
        "output_tokens": tokens,
        "energy_j": _round(energy),
        "j_per_token": _round(j_per_token),
        "tokens_per_j": _round(tokens / energy) if tokens and energy else None,
        "per_gpu": [
            {
                "gpu": g,
                "energy_j": _round(per_gpu.get(g)),
                "tokens_per_j": _round(tokens / per_gpu[g]) if tokens and per_gpu.get(g) else None,
            }
            for g in gpus
        ],
        "power_mean_w": _round(energy / seconds) if energy is not None and seconds > 0 else None,
        "power_peak_w": _round(max((p for p in peaks if p is not None), default=None)),
        "sm_util_mean_pct": gpu_mean("sm_util_pct"),
        "sm_clock_mean_mhz": gpu_mean("sm_clock_mhz"),
        "mem_used_peak_mib": gpu_peak("mem_used_mib"),
        "temp_peak_c": gpu_peak("temp_c"),
        "throttled_share": _round(throttled),
        "throttle_reasons": reasons,
        "server": _server_figures(found, start, end) if found else None,
        "steady": steady_doc,
        "gaps": gap_list + server_gaps,
        "missing_gpus": missing,
        "cost": price_doc,
        "flags": [f for f in FLAGS if f in flags],
        "errors": errors[:MAX_ERRORS],
        "n_errors": len(errors),
    }
