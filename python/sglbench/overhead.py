"""A campaign's own overhead per config attempt: the time that is neither the server's start or stop nor load.

From one record's timings (``record.json``, docs/records.md) the attempt's wall time is split at the
cycle's phase-entry timestamps (controller clock, ``python/sglbench/cycle.py``):

    started_at -> stop_started_at -> start_started_at -> moved_on_at -> bench_started_at
       plan+resume       stop          start+health          probe
    bench_started_at -> done_at (or failure_reported_at) -> record_started_at -> ended_at
          bench                    journal+stop                   record

The server's own time is taken out of three of them: ``time_to_ready_s`` (unit start to ready) from
start+health, ``server_stop_s`` (the final stop's ``systemctl stop``: SGLang drains and checks for its
exit every 5 s; absent in older records, then counted as overhead) from journal+stop, and the load from
bench: each point's ``load_s`` (the load generator's whole run for it on
the host: cache flushes, warm-up requests, the measured window and the counter reads: the load the
benchmark settings ask for), or its measured window ``duration_s`` where a point has no ``load_s`` (older
records). What remains in each is the campaign's overhead in that phase (Ansible round trips, controller
work). journal+stop is the final
stop, which reads the journal of the start it ends first; it runs before the record is written.

What follows the record (the report, then the next attempt's begin) is in no record: it is the gap from
one attempt's ``ended_at`` to the ``started_at`` of the next attempt on the same host, counted only
between attempts of one ``sglbench run`` session (``since``) so that a resumed run's pause is not taken
for overhead. The last attempt of a host has none, and neither has any attempt of a host with records of
an earlier session: an attempt this session reused writes no record, so a gap could hold its whole time.
A record without ``done_at`` and ``record_started_at`` comes from a cycle that stopped after writing
the record: there this gap holds the final stop, and bench, journal+stop and record are unknown.

A phase whose timestamps the record lacks (an older record, a failed start, a skipped attempt) is
None, and so is one that would come out negative or not finite: nothing is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sglbench.hostlib.result_schema import AttemptRecord, Timings

# Phase -> (label, start keys, end key) in ``record.timings``; the first start key the record has counts.
PHASES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "plan": ("plan+resume", ("started_at",), "stop_started_at"),
    "stop": ("stop", ("stop_started_at",), "start_started_at"),
    "start": ("start+health", ("start_started_at",), "moved_on_at"),
    "probe": ("probe", ("moved_on_at",), "bench_started_at"),
    "bench": ("bench", ("bench_started_at",), "done_at"),
    "end": ("journal+stop", ("done_at", "failure_reported_at"), "record_started_at"),
    "record": ("record", ("record_started_at",), "ended_at"),
}
# The gap after the record (the report, then the next attempt's begin): from two records, not one.
FINAL = "final"
LABELS = {**{k: label for k, (label, _s, _e) in PHASES.items()}, FINAL: "after record"}
# A failure in one of these phases came before any server start.
NO_SERVER_PHASES = ("plan", "stop")


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _nonneg(value: float | None) -> float | None:
    value = _finite(value)
    return value if value is not None and value >= 0 else None


def _span(t: Timings, starts: tuple[str, ...], end: str) -> float | None:
    known = [v for v in (_finite(getattr(t, k)) for k in starts) if v is not None]
    b = _finite(getattr(t, end))
    return b - known[0] if known and b is not None else None


@dataclass(frozen=True)
class Overhead:
    """One attempt's overhead: the total and its split by phase (seconds, None when unknown)."""

    instance: str
    host: str
    total_s: float | None
    phases: dict[str, float | None]


def attempt_overhead(
    timings: Timings,
    load_s: float | None,
    server_started: bool,
    final_s: float | None = None,
    instance: str = "",
    host: str = "",
) -> Overhead:
    """Overhead of one attempt from its timings and the seconds its load points ran (``load_s``).

    ``total_s`` = attempt wall time - server start to ready - server stop - load. An attempt that started
    no server (``server_started`` false: skipped by the plan, failed in plan or stop) has nothing to
    subtract; one
    that started a server but gives no time to ready (a failed start) has an unknown total. ``final_s``
    (the gap after the record, see the module docstring) is added to the total when known."""
    ready = _nonneg(timings.time_to_ready_s)
    stop = _nonneg(timings.server_stop_s) or 0.0  # unknown (older records, nothing stopped): overhead
    load = _nonneg(load_s)
    phases: dict[str, float | None] = {}
    for key, (_label, starts, end) in PHASES.items():
        span = _span(timings, starts, end)
        if span is not None and key == "start":
            span = span - ready if ready is not None else None
        elif span is not None and key == "bench":
            span = span - load if load is not None else None
        elif span is not None and key == "end":
            span = span - stop
        phases[key] = _nonneg(span)
    phases[FINAL] = _nonneg(final_s)
    wall = _finite(timings.total_s)
    if wall is None:
        wall = _span(timings, ("started_at",), "ended_at")
    server: float | None = 0.0  # the server's own start and stop
    if server_started:
        server = ready + stop if ready is not None else None
    total = wall - server - load if wall is not None and server is not None and load is not None else None
    total = _nonneg(total)
    if total is not None and phases[FINAL] is not None:
        total += phases[FINAL]
    return Overhead(instance=instance, host=host, total_s=total, phases=phases)


def record_overhead(rec: AttemptRecord, final_s: float | None = None) -> Overhead:
    """:func:`attempt_overhead` of one record, its load the sum of its points' load generator runs."""
    durations = [p.load_s if p.load_s is not None else p.duration_s for b in rec.benchmarks for p in b.points]
    known = [d for d in durations if d is not None and math.isfinite(d)]
    load = math.fsum(known) if len(known) == len(durations) else None
    failed_before_start = rec.failure is not None and rec.failure.phase in NO_SERVER_PHASES
    started = rec.outcome != "skipped" and not failed_before_start
    return attempt_overhead(rec.timings, load, started, final_s, instance=rec.instance, host=rec.host)


def campaign_overhead(records: Iterable[AttemptRecord], since: float | None = None) -> list[Overhead]:
    """:func:`record_overhead` of every record in the order the attempts started. With ``since`` (when
    this ``sglbench run`` session began), only attempts of this session, each with the gap after its
    record up to the host's next attempt (see the module docstring); without it, no such gap is known."""

    def started(rec: AttemptRecord) -> float:
        at = _finite(rec.timings.started_at)
        return at if at is not None else math.inf

    ordered = sorted(records, key=lambda r: (started(r), r.host, r.instance))
    finals: dict[int, float | None] = {}
    if since is not None:
        earlier = {(r.run_id, r.host) for r in ordered if started(r) < since}
        ordered = [r for r in ordered if started(r) >= since]
        last: dict[tuple[str, str], AttemptRecord] = {}
        for rec in ordered:
            if (rec.run_id, rec.host) in earlier:
                continue
            prev = last.get((rec.run_id, rec.host))
            if prev is not None:
                end, begin = _finite(prev.timings.ended_at), _finite(rec.timings.started_at)
                finals[id(prev)] = begin - end if end is not None and begin is not None else None
            last[(rec.run_id, rec.host)] = rec
    return [record_overhead(r, finals.get(id(r))) for r in ordered]


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _split(phases: dict[str, float | None]) -> str:
    return ", ".join(f"{LABELS[k]} {_s(v)}" for k, v in phases.items())


def overhead_lines(overheads: Sequence[Overhead], earlier: int = 0) -> list[str]:
    """The block ``sglbench run`` prints after its summary: one line per attempt, then the mean per
    config (over attempts whose overhead is known) and the campaign's total. ``earlier``: how many
    records of the run an earlier session wrote (reused or kept, not counted)."""
    if not overheads and earlier:
        return [f"overhead: all {earlier} attempt(s) recorded by an earlier session, none measured"]
    if not overheads:
        return []
    lines = ["overhead per config (s; time outside the server's start and stop and the load):"]
    if earlier:
        lines[0] += f" {earlier} attempt(s) recorded by an earlier session not counted"
    for o in overheads:
        lines.append(f"  {o.host}/{o.instance}: {_s(o.total_s)} ({_split(o.phases)})")
    known = [o.total_s for o in overheads if o.total_s is not None]
    mean = _mean(known)
    if mean is None:
        lines.append("campaign overhead: unknown (no attempt gives its time to ready and timings)")
        return lines
    phases = {k: _mean(o.phases[k] for o in overheads if o.total_s is not None) for k in LABELS}
    lines.append(
        f"campaign overhead: {mean:.1f} s per config on average ({_split(phases)}); "
        f"{math.fsum(known):.1f} s in all over {len(known)} of {len(overheads)} configs"
    )
    return lines
