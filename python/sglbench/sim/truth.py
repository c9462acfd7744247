"""The stand-in's own answer, for tests only: what its model gives, free of measurement noise.

The stand-in serves with a timing model (:mod:`sglbench.sim.timing`) and a scheduler
(:mod:`sglbench.sim.engine`). This module runs the same scheduler rules (the same :func:`engine.admit`,
the same prefill and decode step durations, the same accept-length sampler) in virtual time, with a
client that never lags, and measures the result with the load generator's own metric definitions
(:func:`sglbench.hostlib.metrics.summarize_point`). What it returns is the model's answer at real-world
speed (time scale 1): the true value of a metric at a load level, the true SLO limit of a config and the
true crossover of a speculative config against its baseline. Tests compare what a campaign measured on
the sim host (through HTTP, a real client and a loaded machine) with it.

Closed loop at concurrency ``c``: ``c`` clients send at time 0 and each sends its next request the moment
the previous one ends, until ``duration_s``. Open loop at rate ``r``: the load generator's own Poisson
schedule (:func:`sglbench.hostlib.loadgen.poisson_schedule`), optionally capped in flight. The SLO limit
scans levels upward and stops at the first one that misses an objective (the search's rule: the first
failure from below), or at what the server holds (slots, or KV tokens / tokens per request).

Nothing here runs on a GPU host or in a campaign; it is not imported by the stand-in itself.
"""

from __future__ import annotations

import heapq
import io
import math
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglbench.hostlib import loadgen, metrics, result_schema, sglang_args
from sglbench.sim import engine, server, settings, textgen
from sglbench.sim.timing import TimingModel


@dataclass(frozen=True)
class ServerModel:
    """What one launch serves with: its timing, request slots, KV pool and (speculative) accept length."""

    timing: TimingModel
    max_running: int
    max_total_tokens: int
    accept_length: float | None = None  # mean tokens per verify step; None = autoregressive
    num_draft_tokens: int = 1
    seed: int = 0

    def concurrency_bound(self, tokens_per_request: float) -> int:
        """Most requests it holds at once: its slots, or its KV pool over the tokens of one request."""
        return max(1, min(self.max_running, int(self.max_total_tokens // max(1.0, tokens_per_request))))


def server_model(argv: Sequence[str], env: Mapping[str, str] | None = None) -> ServerModel:
    """The model of ``python -m sglang.launch_server <argv>`` on the stand-in with ``SGLBENCH_SIM_*`` from
    ``env`` (the time scale is ignored: everything here is at real-world speed). Raises
    :class:`server.StartupFailure` when that launch would not start, ``SystemExit`` on a bad flag."""
    with tempfile.TemporaryDirectory(prefix="sglbench-truth-") as state:
        sim_settings = settings.load_settings({**(env or {}), "SGLBENCH_SIM_STATE_DIR": state})
        args = sglang_args.parse_launch_args_or_raise(list(argv), release=sim_settings.sglang_release)
        srv = server.SimServer(server._stand_in_view(args), sim_settings, server.Log(1, io.StringIO()))
        plan, timing, accept = srv.serving_model()
    return ServerModel(
        timing=timing,
        max_running=max(1, plan.max_running_requests),
        max_total_tokens=max(1, plan.max_total_num_tokens),
        accept_length=accept,
        num_draft_tokens=max(1, plan.num_draft_tokens),
        seed=sim_settings.seed,
    )


@dataclass(frozen=True)
class Workload:
    """What the load generator sends: prompt lengths (cycled in order), output length, window, seed."""

    prompt_lengths: tuple[int, ...]
    max_new_tokens: int
    duration_s: float  # real-world seconds of sending (a campaign's duration_s / the stand-in's time scale)
    seed: int = 0

    @property
    def tokens_per_request(self) -> float:
        return sum(self.prompt_lengths) / len(self.prompt_lengths) + self.max_new_tokens


@dataclass
class _Req:
    idx: int
    prompt: int
    max_new: int
    scheduled: float
    sampler: textgen.AcceptSampler | None
    sent: float | None = None
    out: int = 0
    verify: int = 0
    chunk_t: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    end: float | None = None
    cancelled: bool = False

    @property
    def reserved_tokens(self) -> int:
        return self.prompt + self.max_new

    def emit(self, count: int, t: float) -> None:
        n = max(0, min(count, self.max_new - self.out))
        if n:
            self.out += n
            self.chunk_t.append(t)
            self.chunk_tokens.append(self.out)
        if self.out >= self.max_new:
            self.end = t

    def record(self) -> dict[str, Any]:
        return {
            "idx": self.idx,
            "scheduled_s": self.scheduled,
            "ready_s": self.sent,
            "sent_s": self.sent,
            "end_s": self.end,
            "chunk_t": self.chunk_t,
            "chunk_tokens": self.chunk_tokens,
            "prompt_tokens": self.prompt,
            "completion_tokens": self.out,
            "spec_verify_ct": self.verify or None,
            "error": None,
        }


class _Clients:
    """The load generator: closed loop (``concurrency`` clients, each sending its next request when the
    previous one ends) or Poisson (``rate``; ``concurrency`` then caps the requests in flight, the others
    wait on the client side)."""

    def __init__(
        self, model: ServerModel, load: Workload, concurrency: int | None, rate: float | None
    ) -> None:
        self.model, self.load = model, load
        self.concurrency, self.rate = concurrency, rate
        self.scheduled: list[tuple[float, int, _Req]] = []  # heap: (time the client sends it, idx, request)
        self.made: list[_Req] = []
        self.backlog: deque[_Req] = deque()  # rate mode: due, waiting for an in-flight slot
        self.ready: list[_Req] = []  # sent from the backlog as a slot freed, not yet at the server
        self.in_flight = 0
        if rate is None:
            for _ in range(int(concurrency or 1)):
                self._schedule(self._new(0.0))
        else:
            n = max(1, math.ceil(rate * load.duration_s) + 1)
            for t in loadgen.poisson_schedule(rate, n, load.seed, load.duration_s):
                self._schedule(self._new(t))

    def _new(self, t: float) -> _Req:
        i = len(self.made)
        sampler = None
        if self.model.accept_length is not None:
            d, mean = self.model.num_draft_tokens, self.model.accept_length
            sampler = textgen.AcceptSampler(self.model.seed, f"truth-{i}", d, mean)
        lengths = self.load.prompt_lengths
        req = _Req(i, lengths[i % len(lengths)], self.load.max_new_tokens, t, sampler)
        self.made.append(req)
        return req

    def _schedule(self, req: _Req) -> None:
        heapq.heappush(self.scheduled, (req.scheduled, req.idx, req))

    def due(self, t: float) -> list[_Req]:
        """The requests that reach the server by ``t``, in send order."""
        out, self.ready = self.ready, []
        while self.scheduled and self.scheduled[0][0] <= t:
            req = heapq.heappop(self.scheduled)[2]
            if self.rate is not None and self.concurrency is not None and self.in_flight >= self.concurrency:
                self.backlog.append(req)
                continue
            req.sent = req.scheduled
            self.in_flight += 1
            out.append(req)
        return out

    def finished(self, req: _Req, t: float) -> None:
        self.in_flight -= 1
        if self.rate is None:
            if t < self.load.duration_s:
                self._schedule(self._new(t))
        elif self.backlog:  # its send time has passed: it goes out as this slot frees
            nxt = self.backlog.popleft()
            nxt.sent = t
            self.in_flight += 1
            self.ready.append(nxt)

    def next_arrival(self) -> float | None:
        return self.scheduled[0][0] if self.scheduled else None


def simulate(
    model: ServerModel, load: Workload, *, concurrency: int | None = None, rate: float | None = None
) -> list[dict[str, Any]]:
    """The request records of one load point, as the load generator would write them (times in s)."""
    if rate is None and not concurrency:
        raise ValueError("simulate needs a concurrency (closed loop) or a rate (open loop)")
    clients = _Clients(model, load, concurrency, rate)
    timing = model.timing
    waiting: deque[_Req] = deque()
    running: list[_Req] = []
    t = 0.0
    while True:
        waiting.extend(clients.due(t))
        if not running and not waiting:
            nxt = clients.next_arrival()
            if nxt is None:
                break
            t = max(t, nxt)
            continue
        admitted = engine.admit(waiting, running, model.max_running, model.max_total_tokens)
        if admitted:
            t += timing.prefill(sum(r.prompt for r in admitted))
            running.extend(admitted)
            for req in admitted:
                req.emit(1, t)
        else:
            t += timing.decode_step(len(running), sum(r.prompt + r.out for r in running))
            for req in running:
                if req.sampler is not None:
                    req.verify += 1
                    req.emit(req.sampler.draw(), t)
                else:
                    req.emit(1, t)
        still = []
        for req in running:
            if req.end is not None:
                clients.finished(req, t)
            else:
                still.append(req)
        running = still
    return [r.record() for r in clients.made if r.sent is not None]


def point(
    model: ServerModel,
    load: Workload,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    slo: metrics.Slo | None = None,
) -> dict[str, Any]:
    """The point summary (the load generator's :func:`metrics.summarize_point`) of one load level."""
    records = simulate(model, load, concurrency=concurrency, rate=rate)
    return metrics.summarize_point(records, slo=slo)


def objective_value(summary: Mapping[str, Any], name: str) -> float | None:
    """``ttft_ms_p99`` (result_schema's metric column name) or ``goodput`` (attainment) of a summary."""
    if name == "goodput":
        return (summary.get("goodput") or {}).get("attainment")
    for m in result_schema.METRICS:
        if name.startswith(m.key + "_p"):
            return (summary.get(m.key) or {}).get(name[len(m.key) + 1 :])
    raise ValueError(f"{name} is not an objective: <metric>_p<q> of result_schema.METRICS, or goodput")


def meets(summary: Mapping[str, Any], objectives: Mapping[str, float]) -> bool:
    """Every objective met by the summary's own values (ceilings; goodput a floor)."""
    for name, limit in objectives.items():
        value = objective_value(summary, name)
        if value is None or (value < limit if name == "goodput" else value > limit):
            return False
    return True


def slo_limit(
    model: ServerModel,
    load: Workload,
    objectives: Mapping[str, float],
    *,
    slo: metrics.Slo | None = None,
    levels: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The true closed-loop SLO limit: the highest concurrency below the first one that misses an objective,
    within what the server holds. ``verdict`` as the search's: limit_found, plan_limited or never_met;
    ``values``: every level's objective values."""
    bound = model.concurrency_bound(load.tokens_per_request)
    scan = [c for c in (levels or range(1, bound + 1)) if c <= bound]
    values: dict[int, dict[str, float | None]] = {}
    limit = None
    for c in scan:
        summary = point(model, load, concurrency=c, slo=slo)
        values[c] = {name: objective_value(summary, name) for name in objectives}
        if not meets(summary, objectives):
            return {
                "verdict": "limit_found" if limit else "never_met",
                "limit": limit,
                "next_above": c,
                "bound": bound,
                "values": values,
            }
        limit = c
    return {"verdict": "plan_limited", "limit": limit, "next_above": None, "bound": bound, "values": values}


def crossover(
    spec: ServerModel, base: ServerModel, load: Workload, *, levels: Sequence[int] | None = None
) -> dict[str, Any]:
    """The true closed-loop crossover of a speculative config against its baseline: the output throughput
    ratio (spec / base) at each concurrency both hold, and the first one where it is below 1 (None when
    the speculative config is faster at every level it holds: then it wins up to ``spec_bound``)."""
    spec_bound = spec.concurrency_bound(load.tokens_per_request)
    base_bound = base.concurrency_bound(load.tokens_per_request)
    scan = [
        c for c in (levels or range(1, min(spec_bound, base_bound) + 1)) if c <= min(spec_bound, base_bound)
    ]
    speedup: dict[int, float] = {}
    first_below = None
    for c in scan:
        s = point(spec, load, concurrency=c)["output_throughput_tok_s"]
        b = point(base, load, concurrency=c)["output_throughput_tok_s"]
        speedup[c] = s / b if s and b else float("nan")
        if first_below is None and speedup[c] < 1.0:
            first_below = c
    return {"crossover": first_below, "spec_bound": spec_bound, "base_bound": base_bound, "speedup": speedup}
