"""Benchmark metrics from raw request records: pure functions, stdlib only.

Ships as ``ansible.module_utils.sglbench_hostlib.metrics``. Input records are dicts (or objects with the same
attributes) as produced by ``loadgen_api.RequestRecord.to_dict()``; times in seconds relative to the
start of the load point.

Definitions (SGLang ``bench_serving`` compatible where it has one, see docs in each function):

- TTFT: first token-bearing chunk − sent.
- E2E: end of stream − sent.
- TPOT: (E2E − TTFT) / (output_tokens − 1), per request (needs ≥ 2 output tokens).
- ITL (per token): a chunk that adds k tokens after a gap g contributes k values g/k — SGLang's native
  definition, correct under speculative decoding (k > 1 per step).
- ICL (inter-chunk latency): the raw gaps between token-bearing chunks, one value per chunk.
- Decode tok/s per request: tokens after the first chunk / (last chunk − first chunk).
- Queue: ready − scheduled (time waiting for a concurrency slot in rate mode).
- Send lateness: sent − ready (the client's own delay; the self-check uses it).
- Acceptance length per request: completion_tokens / spec_verify_ct (server counts); the server's own
  ``spec_accept_length`` is kept and compared.
- Throughput: totals over the measured window (first send → last end of measured requests).
- Percentiles: linear interpolation between closest ranks (numpy's default), so numbers line up with
  tools that use ``np.percentile``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)

# Client self-check thresholds (a point is marked invalid when any is exceeded). Documented in
# `sglbench bench --help` and in the summary's ``client.thresholds``.
MAX_SEND_LATENESS_P99_MS = 5.0  # p99 of (sent − ready): the client sent late
MAX_LOOP_LAG_P99_MS = 10.0  # p99 event-loop lag sampled every 10 ms: the loop was too busy to serve I/O
MAX_CLIENT_CPU_FRACTION = 0.90  # process CPU time / wall time: one event-loop core saturated
MIN_ACHIEVED_RATE_FRACTION = 0.97  # rate mode: requests sent / (rate × send window)
MAX_RUNQUEUE_WAIT_FRACTION = 0.10  # time runnable but waiting for a CPU / wall: other processes starved it
# Error-rate rule (not a client self-check: it judges what the server answered). A point is invalid when more
# than this fraction of its measured requests failed; the default 0 is strict: any failed request (a server
# that died or restarted mid-point, a timeout, an HTTP error) invalidates the point. BenchSpec.max_error_rate,
# `sglbench bench --max-error-rate`, playbook `sglbench_bench.max_error_rate`.
DEFAULT_MAX_ERROR_RATE = 0.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) of already-sorted values, linear interpolation (numpy 'linear')."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of an empty sequence")
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def distribution(values: Iterable[float], scale: float = 1.0) -> dict[str, float | int | None]:
    """{p50, p90, p95, p99, mean, min, max, n} of ``values × scale``; all None (n=0) when empty."""
    vals = sorted(v * scale for v in values)
    if not vals:
        out: dict[str, float | int | None] = {f"p{q}": None for q in PERCENTILES}
        out.update(mean=None, min=None, max=None, n=0)
        return out
    out = {f"p{q}": percentile(vals, q) for q in PERCENTILES}
    out.update(mean=math.fsum(vals) / len(vals), min=vals[0], max=vals[-1], n=len(vals))
    return out


def _get(rec: Any, key: str, default: Any = None) -> Any:
    if isinstance(rec, Mapping):
        return rec.get(key, default)
    return getattr(rec, key, default)


def is_ok(rec: Any) -> bool:
    return _get(rec, "error") is None and _get(rec, "end_s") is not None


@dataclass
class RequestMetrics:
    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    decode_tok_s: float | None = None
    output_tokens: int = 0
    itl_s: list[float] = field(default_factory=list)  # per token
    icl_s: list[float] = field(default_factory=list)  # per chunk
    queue_s: float | None = None
    lateness_s: float | None = None
    accept_length: float | None = None  # completion_tokens / spec_verify_ct
    server_accept_length: float | None = None


def token_chunks(chunk_t: Sequence[float], chunk_tokens: Sequence[int]) -> list[tuple[float, int]]:
    """(arrival, tokens added) for every event that added tokens; events adding none are dropped, so a
    gap runs from one token-bearing chunk to the next."""
    out: list[tuple[float, int]] = []
    prev = 0
    for t, cum in zip(chunk_t, chunk_tokens, strict=False):
        k = cum - prev
        if k > 0:
            out.append((t, k))
            prev = cum
    return out


def request_metrics(rec: Any) -> RequestMetrics:
    """Per-request metrics (see the module docstring for definitions)."""
    m = RequestMetrics()
    scheduled, ready, sent, end = (_get(rec, k) for k in ("scheduled_s", "ready_s", "sent_s", "end_s"))
    if ready is not None and scheduled is not None:
        m.queue_s = ready - scheduled
    if sent is not None and ready is not None:
        m.lateness_s = sent - ready
    chunks = token_chunks(_get(rec, "chunk_t") or (), _get(rec, "chunk_tokens") or ())
    completion = _get(rec, "completion_tokens")
    m.output_tokens = int(completion) if completion is not None else sum(k for _, k in chunks)
    if sent is not None and end is not None:
        m.e2e_s = end - sent
    if chunks and sent is not None:
        t_first, _k_first = chunks[0]
        m.ttft_s = t_first - sent
        prev_t = t_first
        for t, k in chunks[1:]:
            gap = t - prev_t
            m.icl_s.append(gap)
            m.itl_s.extend([gap / k] * k)
            prev_t = t
        if m.e2e_s is not None and m.output_tokens > 1:
            m.tpot_s = (m.e2e_s - m.ttft_s) / (m.output_tokens - 1)
        span = chunks[-1][0] - t_first
        after_first = sum(k for _, k in chunks[1:])
        if span > 0 and after_first > 0:
            m.decode_tok_s = after_first / span
    verify = _get(rec, "spec_verify_ct")
    if verify and completion:
        m.accept_length = completion / verify
    sal = _get(rec, "spec_accept_length")
    m.server_accept_length = float(sal) if sal is not None else None
    return m


@dataclass(frozen=True)
class Slo:
    """Per-request service-level objectives for goodput (None = not constrained)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def active(self) -> dict[str, float]:
        return {
            k: v
            for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms))
            if v is not None
        }


def goodput(
    records: Sequence[Any], metrics: Sequence[RequestMetrics], duration_s: float, slo: Slo
) -> dict[str, Any] | None:
    """Requests meeting every active SLO: req/s, tok/s, attainment (failed requests count as misses)."""
    active = slo.active()
    if not active:
        return None
    n_total = len(records)
    per_metric = dict.fromkeys(active, 0)
    good = 0
    good_tokens = 0
    for rec, m in zip(records, metrics, strict=False):
        if not is_ok(rec):
            continue
        values = {"ttft_ms": m.ttft_s, "tpot_ms": m.tpot_s, "e2e_ms": m.e2e_s}
        all_ok = True
        for key, limit in active.items():
            v = values[key]
            # A request with a single output token has no TPOT; it does not violate a TPOT SLO.
            met = (v is None and key == "tpot_ms") or (v is not None and v * 1000.0 <= limit)
            per_metric[key] += met
            all_ok = all_ok and met
        if all_ok:
            good += 1
            good_tokens += m.output_tokens
    return {
        "slo": active,
        "good_requests": good,
        "goodput_req_s": good / duration_s if duration_s > 0 else None,
        "goodput_tok_s": good_tokens / duration_s if duration_s > 0 else None,
        "attainment": good / n_total if n_total else None,
        "attainment_per_metric": {k: v / n_total for k, v in per_metric.items()} if n_total else {},
    }


@dataclass
class ClientStats:
    """What the load generator measured about itself during a point."""

    cpu_s: float = 0.0  # process CPU time (user+sys) over the point
    runqueue_wait_s: float | None = None  # Linux schedstat: runnable but not running (CPU taken by others)
    wall_s: float = 0.0
    loop_lag_s: list[float] = field(default_factory=list)
    target_rate: float | None = None  # rate mode only
    send_window_s: float | None = None  # first → last scheduled send (rate mode)
    n_sent: int = 0
    # Several client processes (BenchSpec.procs > 1): one dict per process with its own ``proc`` (index),
    # ``cpu_s``, ``wall_s``, ``runqueue_wait_s``, ``n_requests``, ``n_sent``, ``loop_lag_ms_p99``. Then
    # ``cpu_s`` and ``runqueue_wait_s`` above are sums, ``wall_s`` the longest, ``loop_lag_s`` every
    # process's samples.
    procs: list[dict[str, Any]] = field(default_factory=list)


def _per_process(stats: ClientStats, n_requests: int, lag_p99_ms: float | int | None) -> list[dict[str, Any]]:
    """Per client process: its figures plus CPU and CPU-wait fractions of its own wall time."""
    procs = stats.procs or [
        {
            "proc": 0,
            "cpu_s": stats.cpu_s,
            "wall_s": stats.wall_s,
            "runqueue_wait_s": stats.runqueue_wait_s,
            "n_requests": n_requests,
            "n_sent": stats.n_sent,
            "loop_lag_ms_p99": lag_p99_ms,
        }
    ]
    out = []
    for p in procs:
        wall, wait = p.get("wall_s") or 0.0, p.get("runqueue_wait_s")
        out.append(
            {
                **p,
                "cpu_fraction": p.get("cpu_s", 0.0) / wall if wall > 0 else None,
                "runqueue_wait_fraction": wait / wall if wait is not None and wall > 0 else None,
            }
        )
    return out


def _worst(per: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    known = [p for p in per if p.get(key) is not None]
    return max(known, key=lambda p: p[key]) if known else None


def client_health(
    records: Sequence[Any], metrics: Sequence[RequestMetrics], stats: ClientStats
) -> dict[str, Any]:
    """Self-check: lateness, loop lag, CPU, achieved rate → ``valid`` and reasons when not.

    With several client processes (``stats.procs``), lateness and loop lag are judged over every request
    and every process's samples, CPU and CPU wait per process: ``cpu_fraction`` and
    ``runqueue_wait_fraction`` are the largest of the per-process fractions, and a reason names the process.
    """
    lateness = [m.lateness_s for m in metrics if m.lateness_s is not None]
    lat = distribution(lateness, 1000.0)
    lag = distribution(stats.loop_lag_s, 1000.0)
    per = _per_process(stats, len(records), lag["p99"])
    who = (lambda p: f"client process {p['proc']} (of {len(per)})") if len(per) > 1 else (lambda p: "client")
    worst_cpu = _worst(per, "cpu_fraction")
    cpu_frac = worst_cpu["cpu_fraction"] if worst_cpu else None
    reasons: list[str] = []
    if lat["p99"] is not None and lat["p99"] > MAX_SEND_LATENESS_P99_MS:
        reasons.append(f"send lateness p99 {lat['p99']:.2f} ms > {MAX_SEND_LATENESS_P99_MS} ms")
    if lag["p99"] is not None and lag["p99"] > MAX_LOOP_LAG_P99_MS:
        reasons.append(f"event-loop lag p99 {lag['p99']:.2f} ms > {MAX_LOOP_LAG_P99_MS} ms")
    if worst_cpu is not None and cpu_frac > MAX_CLIENT_CPU_FRACTION:
        reasons.append(f"{who(worst_cpu)} CPU {cpu_frac:.0%} of one core > {MAX_CLIENT_CPU_FRACTION:.0%}")
    worst_wait = _worst(per, "runqueue_wait_fraction")
    wait_frac = worst_wait["runqueue_wait_fraction"] if worst_wait else None
    if worst_wait is not None and wait_frac > MAX_RUNQUEUE_WAIT_FRACTION:
        reasons.append(
            f"{who(worst_wait)} waited {wait_frac:.0%} of the time for a CPU "
            f"(> {MAX_RUNQUEUE_WAIT_FRACTION:.0%}): other processes on this machine starved it"
        )
    achieved = None
    if stats.target_rate and not math.isinf(stats.target_rate) and stats.send_window_s:
        # The sends the schedule made: a session's later turns follow its answers, not the schedule.
        scheduled = [r for r in records if not _get(r, "turn")]
        sent_times = sorted(_get(r, "sent_s") for r in scheduled if _get(r, "sent_s") is not None)
        if len(sent_times) > 1:
            achieved = (
                (len(sent_times) - 1) / (sent_times[-1] - sent_times[0])
                if sent_times[-1] > sent_times[0]
                else None
            )
            if achieved is not None and achieved < MIN_ACHIEVED_RATE_FRACTION * stats.target_rate:
                reasons.append(
                    f"achieved send rate {achieved:.2f} req/s < {MIN_ACHIEVED_RATE_FRACTION:.0%} of target "
                    f"{stats.target_rate:g} req/s"
                )
    return {
        "valid": not reasons,
        "reasons": reasons,
        "send_lateness_ms": lat,
        "loop_lag_ms": lag,
        "cpu_s": stats.cpu_s,
        "wall_s": stats.wall_s,
        "cpu_fraction": cpu_frac,
        "runqueue_wait_fraction": wait_frac,
        "procs": len(per),
        "per_process": per,
        "achieved_rate": achieved,
        "target_rate": "inf"
        if stats.target_rate is not None and math.isinf(stats.target_rate)
        else stats.target_rate,
        "thresholds": {
            "send_lateness_p99_ms": MAX_SEND_LATENESS_P99_MS,
            "loop_lag_p99_ms": MAX_LOOP_LAG_P99_MS,
            "cpu_fraction": MAX_CLIENT_CPU_FRACTION,
            "achieved_rate_fraction": MIN_ACHIEVED_RATE_FRACTION,
            "runqueue_wait_fraction": MAX_RUNQUEUE_WAIT_FRACTION,
        },
    }


def check_max_error_rate(value: Any) -> float:
    """``value`` as a fraction in [0, 1]; ValueError (naming the rule) for anything else (NaN included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"max_error_rate is the largest fraction of failed requests a valid point may have: a number "
            f"from 0 (any failed request invalidates the point) to 1, got {value!r}"
        )
    return float(value)


def error_rate_reason(
    n_requests: int, n_err: int, errors: Mapping[str, int], max_error_rate: float
) -> str | None:
    """Why the point is invalid under the error-rate rule (None when it passes): how many requests failed,
    the allowed fraction and the most frequent error."""
    if n_err <= 0 or n_requests <= 0 or n_err <= max_error_rate * n_requests:
        return None
    rate = n_err / n_requests
    allowed = (
        "max_error_rate 0: any failed request invalidates a point"
        if max_error_rate == 0
        else f"{rate:.2%} > max_error_rate {max_error_rate:g}"
    )
    text = f"{n_err} of {n_requests} requests failed ({allowed})"
    if errors:
        example = max(errors.items(), key=lambda kv: kv[1])[0]
        # "; " separates reasons in tables (summarize.reason_digest): keep it out of the example.
        example = " ".join(example.replace("; ", ", ").split())
        if len(example) > 120:
            example = example[:119].rsplit(" ", 1)[0] + "…"
        text += f", e.g. {example}"
    return text


def _counts(ok_pairs: Sequence[tuple[Any, RequestMetrics]], recs: Sequence[Any]) -> dict[str, dict[str, int]]:
    """How the point's tokens were counted, how requests finished, and which errors occurred (x times)."""
    sources: dict[str, int] = {}
    chunk_sources: dict[str, int] = {}
    finish: dict[str, int] = {}
    for r, _ in ok_pairs:
        s = _get(r, "token_source") or "none"
        sources[s] = sources.get(s, 0) + 1
        cs = _get(r, "chunk_token_source") or "server"
        chunk_sources[cs] = chunk_sources.get(cs, 0) + 1
        f = _get(r, "finish_reason") or "unknown"
        finish[f] = finish.get(f, 0) + 1
    errors: dict[str, int] = {}
    for r in recs:
        e = _get(r, "error")
        if e is not None:
            errors[e[:160]] = errors.get(e[:160], 0) + 1
    return {
        "token_source": sources,
        "chunk_token_source": chunk_sources,
        "finish_reasons": finish,
        "errors": errors,
    }


def _throughput(
    recs: Sequence[Any], ok_pairs: Sequence[tuple[Any, RequestMetrics]]
) -> tuple[float, dict[str, Any]]:
    """The measured window (first send -> last end) and the totals and rates over it."""
    sends = [_get(r, "sent_s") for r in recs if _get(r, "sent_s") is not None]
    ends = [_get(r, "end_s") for r in recs if _get(r, "end_s") is not None]
    duration = (max(ends) - min(sends)) if sends and ends else 0.0
    out_tokens = sum(m.output_tokens for r, m in ok_pairs)
    n_chunks = sum(len(m.icl_s) + 1 for _, m in ok_pairs if m.ttft_s is not None)
    in_tokens = sum(_get(r, "prompt_tokens") or 0 for r, _ in ok_pairs)
    e2e_sum = math.fsum(m.e2e_s for _, m in ok_pairs if m.e2e_s is not None)

    def per_s(total: float) -> float | None:
        return total / duration if duration > 0 else None

    return duration, {
        "duration_s": duration,
        "total_output_tokens": out_tokens,
        "total_input_tokens": in_tokens,
        "output_throughput_tok_s": per_s(out_tokens),
        "input_throughput_tok_s": per_s(in_tokens),
        "request_throughput": per_s(len(ok_pairs)),
        "total_chunks": n_chunks,
        "chunk_throughput": per_s(n_chunks),
        "mean_concurrency": per_s(e2e_sum),
    }


def _latencies(
    metrics: Sequence[RequestMetrics], ok_pairs: Sequence[tuple[Any, RequestMetrics]]
) -> dict[str, Any]:
    """The latency and per-request distributions of the point (ms, tok/s, tokens)."""
    itl: list[float] = []
    icl: list[float] = []
    for _, m in ok_pairs:
        itl.extend(m.itl_s)
        icl.extend(m.icl_s)
    return {
        "ttft_ms": distribution((m.ttft_s for _, m in ok_pairs if m.ttft_s is not None), 1000.0),
        "tpot_ms": distribution((m.tpot_s for _, m in ok_pairs if m.tpot_s is not None), 1000.0),
        "itl_ms": distribution(itl, 1000.0),
        "icl_ms": distribution(icl, 1000.0),
        "e2e_ms": distribution((m.e2e_s for _, m in ok_pairs if m.e2e_s is not None), 1000.0),
        "queue_ms": distribution((m.queue_s for m in metrics if m.queue_s is not None), 1000.0),
        "decode_tok_s": distribution(m.decode_tok_s for _, m in ok_pairs if m.decode_tok_s is not None),
        "output_tokens": distribution(float(m.output_tokens) for _, m in ok_pairs),
    }


def _acceptance(
    ok_pairs: Sequence[tuple[Any, RequestMetrics]], server_accept_length: float | None
) -> dict[str, Any]:
    """Speculative acceptance: per request, token-weighted, and against the server's own counters."""
    acc = [m.accept_length for _, m in ok_pairs if m.accept_length is not None]
    verify_total = sum(_get(r, "spec_verify_ct") or 0 for r, _ in ok_pairs)
    spec_tokens = sum(m.output_tokens for r, m in ok_pairs if _get(r, "spec_verify_ct"))
    srv = [
        (m.accept_length, m.server_accept_length)
        for _, m in ok_pairs
        if m.accept_length is not None and m.server_accept_length is not None
    ]
    token_weighted = spec_tokens / verify_total if verify_total else None
    return {
        "accept_length_mean": math.fsum(acc) / len(acc) if acc else None,
        "accept_length_token_weighted": token_weighted,
        "accept_length": distribution(acc),
        "accept_length_server_mismatch_max": max((abs(a - b) for a, b in srv), default=None),
        "server_avg_spec_accept_length": server_accept_length,
        "accept_length_vs_server_counter": (
            token_weighted - server_accept_length
            if token_weighted is not None and server_accept_length is not None
            else None
        ),
    }


def summarize_point(
    records: Sequence[Any],
    *,
    slo: Slo | None = None,
    client: ClientStats | None = None,
    server_accept_length: float | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> dict[str, Any]:
    """Aggregate one load point (warmup records are ignored).

    ``valid`` is false when the client self-check failed (``client``), when no request succeeded, or when
    more than ``max_error_rate`` of the measured requests failed (default 0: any failure); each reason is
    one entry of ``invalid_reasons``."""
    max_error_rate = check_max_error_rate(max_error_rate)
    recs = [r for r in records if not _get(r, "warmup", False)]
    metrics = [request_metrics(r) for r in recs]
    ok_pairs = [(r, m) for r, m in zip(recs, metrics, strict=False) if is_ok(r)]
    duration, throughput = _throughput(recs, ok_pairs)
    counts = _counts(ok_pairs, recs)
    n_err = len(recs) - len(ok_pairs)
    summary: dict[str, Any] = {
        "n_requests": len(recs),
        "n_ok": len(ok_pairs),
        "n_err": n_err,
        "error_rate": n_err / len(recs) if recs else None,
        "max_error_rate": max_error_rate,
        **throughput,
        **_latencies(metrics, ok_pairs),
        **_acceptance(ok_pairs, server_accept_length),
        **counts,
        "goodput": goodput(recs, metrics, duration, slo) if slo is not None else None,
        "peak_output_tok_s": peak_output_tok_s([r for r, _ in ok_pairs]),
        "by_category": by_category(ok_pairs),
    }
    health = client_health(recs, metrics, client) if client is not None else None
    reasons = list(health["reasons"]) if health else []
    if not ok_pairs:
        reasons.append("no request succeeded")
    err_reason = error_rate_reason(len(recs), n_err, counts["errors"], max_error_rate)
    if err_reason is not None:
        reasons.append(err_reason)
    summary["client"] = health
    summary["valid"] = not reasons
    summary["invalid_reasons"] = reasons
    return summary


def peak_output_tok_s(records: Sequence[Any], bucket_s: float = 1.0) -> float | None:
    """Most output tokens that arrived within one ``bucket_s`` window (fixed buckets from time 0), per
    second. Counted from token deltas, not chunks, so multi-token (speculative) chunks count fully."""
    buckets: dict[int, int] = {}
    for rec in records:
        for t, k in token_chunks(_get(rec, "chunk_t") or (), _get(rec, "chunk_tokens") or ()):
            b = math.floor(t / bucket_s)
            buckets[b] = buckets.get(b, 0) + k
    return max(buckets.values()) / bucket_s if buckets else None


def by_category(ok_pairs: Sequence[tuple[Any, RequestMetrics]]) -> dict[str, dict[str, Any]]:
    """Per prompt category: counts, latency medians and acceptance (acceptance depends on content)."""
    groups: dict[str, list[tuple[Any, RequestMetrics]]] = {}
    for rec, m in ok_pairs:
        groups.setdefault(str(_get(rec, "category") or "unknown"), []).append((rec, m))
    out: dict[str, dict[str, Any]] = {}
    for cat, pairs in sorted(groups.items()):
        acc = [m.accept_length for _, m in pairs if m.accept_length is not None]
        verify = sum(_get(r, "spec_verify_ct") or 0 for r, _ in pairs)
        spec_tokens = sum(m.output_tokens for r, m in pairs if _get(r, "spec_verify_ct"))
        itl: list[float] = []
        for _, m in pairs:
            itl.extend(m.itl_s)
        out[cat] = {
            "n_ok": len(pairs),
            "output_tokens": sum(m.output_tokens for _, m in pairs),
            "ttft_ms_p50": distribution((m.ttft_s for _, m in pairs if m.ttft_s is not None), 1000.0)["p50"],
            "tpot_ms_p50": distribution((m.tpot_s for _, m in pairs if m.tpot_s is not None), 1000.0)["p50"],
            "itl_ms_p50": distribution(itl, 1000.0)["p50"],
            "accept_length_mean": math.fsum(acc) / len(acc) if acc else None,
            "accept_length_token_weighted": spec_tokens / verify if verify else None,
        }
    return out


def aggregate_repeats(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Across repeats of one load point: mean, stdev and a 95% t-interval of the headline numbers."""
    keys = {
        "output_throughput_tok_s": lambda p: p.get("output_throughput_tok_s"),
        "request_throughput": lambda p: p.get("request_throughput"),
        "ttft_ms_p50": lambda p: (p.get("ttft_ms") or {}).get("p50"),
        "ttft_ms_p99": lambda p: (p.get("ttft_ms") or {}).get("p99"),
        "tpot_ms_p50": lambda p: (p.get("tpot_ms") or {}).get("p50"),
        "itl_ms_p50": lambda p: (p.get("itl_ms") or {}).get("p50"),
        "e2e_ms_p50": lambda p: (p.get("e2e_ms") or {}).get("p50"),
        "accept_length_mean": lambda p: p.get("accept_length_mean"),
    }
    out: dict[str, Any] = {"n_repeats": len(points), "all_valid": all(p.get("valid") for p in points)}
    for name, get in keys.items():
        vals = [float(v) for v in (get(p) for p in points) if v is not None]
        out[name] = mean_ci(vals)
    return out


# Two-sided 95% Student t quantiles for small samples (df = n-1); normal beyond the table.
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def _t95(df: int) -> float:
    if df in _T95:
        return _T95[df]
    smaller = [d for d in _T95 if d <= df]
    return _T95[max(smaller)] if df <= 30 else 1.96


def mean_ci(values: Sequence[float]) -> dict[str, float | int | None]:
    n = len(values)
    if n == 0:
        return {"mean": None, "stdev": None, "ci95_low": None, "ci95_high": None, "n": 0}
    mean = math.fsum(values) / n
    if n == 1:
        return {"mean": mean, "stdev": None, "ci95_low": None, "ci95_high": None, "n": 1}
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    sd = math.sqrt(var)
    half = _t95(n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "stdev": sd, "ci95_low": mean - half, "ci95_high": mean + half, "n": n}
