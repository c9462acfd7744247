"""Load generator: drives an SGLang server (or the null server) and records raw per-request facts.

Stdlib asyncio only; ships to the GPU host as ``ansible.module_utils.sglbench_hostlib.loadgen`` (siblings:
``sglbench_loadgen_http``, ``sglbench_loadgen_api``, ``sglbench_metrics``, ``sglbench_prompts``).

Load shapes, per point of a campaign:

- closed loop at fixed concurrency C: C workers, each sends its next request the moment its previous
  one ended (``ready`` = arrival of the previous response's last byte);
- open loop at a Poisson request rate (seeded exponential gaps, precomputed as absolute times), with
  an optional concurrency cap (time waiting for a slot is recorded as ``queue``, not hidden);
- a trace (prompts with send times, ``trace_replay``): a rate point sends them in trace order at the
  trace's own instants, scaled to the point's rate, instead of Poisson times;
- bounded by a request count and/or a duration (no new sends after the deadline; in-flight requests
  finish and count).
- multi-turn sessions (prompts with ``session`` and ``turn``): either shape plays whole sessions, each turn
  sent with the session's history once the previous answer arrived (:mod:`.sessions`).

Per (point, repeat): ``POST /flush_cache`` → warmup requests (same concurrency, marked ``warmup``,
excluded from metrics) → ``/flush_cache`` again (resets SGLang's acceptance counters) → measured run
→ ``GET /server_info`` for the server's acceptance counter. Repeats use seeds ``seed + r``, so repeat
r sends the same prompts in the same order at every point and for every server config.

The client measures itself (send lateness, event-loop lag, CPU) and metrics.summarize_point turns
that into ``valid`` / ``invalid_reasons``.

One process parses on the order of 100k streamed chunks/s (benchmarks/client_ceiling.md). When one core
is not enough, ``BenchSpec.procs = P > 1`` shards every point over P forked client processes (Linux
``os.fork``; ``procs == 1`` never forks): the parent flushes the cache, each child opens its own connections
and runs its share of the warmup, the parent flushes again and hands every child the same start time t0
(``time.perf_counter`` is CLOCK_MONOTONIC, one clock for the whole machine), so every record's times are
relative to one t0 and merge as they are. Closed loop: the concurrency is split as evenly as possible and
child k sends requests k, k+P, k+2P, … of the same prompt sequence (the same requests as one process, for
count-bounded points). Open loop: the parent computes the one Poisson schedule and child k sends requests
k, k+P, … at their scheduled times (the superposition is the same schedule); an in-flight cap is split
over the children. Children return their records and their own CPU, CPU-wait and loop-lag figures; the
self-check judges CPU per process. A child that fails or overruns its time bound fails the point with an
error that names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import pickle
import random
import signal
import struct
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import forked, load_points, long_context, result_schema, server_api, trace_replay
from . import loadgen_api as api_mod
from . import loadgen_http as http_mod
from . import metrics as metrics_mod
from . import prompts as prompts_mod
from . import sessions as sessions_mod
from . import sglang_facts as facts

Prompt = prompts_mod.Prompt
RequestRecord = api_mod.RequestRecord
SamplingSpec = api_mod.SamplingSpec
HttpClient = http_mod.HttpClient
HttpError = http_mod.HttpError
Endpoint = http_mod.Endpoint

_perf = time.perf_counter

SUMMARY_SCHEMA = facts.BENCH_SCHEMA
DEFAULT_MAX_CONCURRENCY = load_points.DEFAULT_LADDER_CAP  # when neither the user nor the server gives one
LOOP_LAG_INTERVAL_S = 0.01
FLUSH_RETRIES = 5
MAX_PROCS = 64  # client processes per point (BenchSpec.procs)
CHILD_SLACK_S = 30.0  # on top of a child's derived time bound: fork, connections, result transfer
START_LEAD_S = 0.05  # the common start t0 lies this far after the parent's go, so every child is waiting
# Bounds that keep a typo from allocating gigabytes or running forever (each far above any real load).
MAX_CONCURRENCY = 100_000  # in-flight requests of one point (each is a connection and a coroutine)
MAX_WARMUP = 100_000  # warmup requests per point
MAX_SCHEDULED_REQUESTS = 10_000_000  # precomputed Poisson send times of one rate point
MAX_SECONDS = 30 * 86400.0  # duration and request timeout
SIM_MARKERS = ("simulated", "sglbench_simulated", "sglbench_sim", "sglbench_null_server")


class LoadgenError(Exception):
    """A campaign cannot run (server unreachable, bad spec); the message says what to change."""


@dataclass(frozen=True)
class LoadPoint:
    """One load level: closed loop at ``concurrency``, or Poisson ``request_rate`` (optionally capped)."""

    concurrency: int | None = None
    request_rate: float | None = None

    @property
    def rate_json(self) -> float | str | None:
        """The rate as JSON can hold it: ``"inf"`` for an all-at-once burst."""
        rr = self.request_rate
        return "inf" if rr is not None and math.isinf(rr) else rr

    def label(self) -> str:
        return load_points.point_label(self.concurrency, self.request_rate)


@dataclass
class BenchSpec:
    url: str
    prompts: list[Prompt]
    points: list[LoadPoint]
    api: str = "native"
    model: str | None = None
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    num_prompts: int = 200  # per point and repeat (upper bound when duration_s is set)
    duration_s: float | None = None
    warmup: int | None = None  # None = one per concurrency slot (capped at 64); 0 = none
    repeats: int = 3
    first_repeat: int = 0  # index of the first repeat: a caller running one repeat per call sets it
    seed: int = 0
    flush_cache: bool = True
    api_key: str | None = None
    request_timeout_s: float = 600.0
    slo: metrics_mod.Slo = field(default_factory=metrics_mod.Slo)
    simulated: bool | None = None  # None = ask the server
    procs: int = 1  # client processes per point (> 1: forked shards, see the module docstring)
    # Largest fraction of failed measured requests a valid point may have (0 = strict: any failure
    # invalidates the point; metrics.summarize_point, the error-rate rule).
    max_error_rate: float = metrics_mod.DEFAULT_MAX_ERROR_RATE

    def validate(self) -> None:
        if self.api not in api_mod.APIS:
            raise LoadgenError(f"api must be one of {', '.join(api_mod.APIS)}, got {self.api!r}")
        if not self.points:
            raise LoadgenError("no load points: give --concurrency and/or --request-rate")
        if self.num_prompts < 1:
            raise LoadgenError(f"num_prompts must be >= 1, got {self.num_prompts}")
        if self.duration_s is not None and not 0 < self.duration_s <= MAX_SECONDS:
            raise LoadgenError(
                f"duration must be a number of seconds > 0 and <= {MAX_SECONDS:.0f}, got {self.duration_s}"
            )
        for p in self.points:
            self._validate_point(p)
        if self.repeats < 1:
            raise LoadgenError(f"repeats must be >= 1, got {self.repeats}")
        if self.first_repeat < 0:
            raise LoadgenError(f"first_repeat must be >= 0, got {self.first_repeat}")
        if self.warmup is not None and not 0 <= self.warmup <= MAX_WARMUP:
            raise LoadgenError(f"warmup must be from 0 to {MAX_WARMUP} requests, got {self.warmup}")
        if not 0 < self.request_timeout_s <= MAX_SECONDS:
            raise LoadgenError(
                f"request timeout must be a number of seconds > 0 and <= {MAX_SECONDS:.0f}, "
                f"got {self.request_timeout_s}"
            )
        if self.sampling.max_new_tokens < 1:
            raise LoadgenError(f"max_new_tokens must be >= 1, got {self.sampling.max_new_tokens}")
        if not 0 <= self.sampling.temperature < math.inf:
            raise LoadgenError(f"temperature must be a finite number >= 0, got {self.sampling.temperature}")
        for name, limit in self.slo.active().items():
            if not 0 < limit < math.inf:
                raise LoadgenError(f"SLO {name} must be a finite number of ms > 0, got {limit}")
        try:
            self.max_error_rate = metrics_mod.check_max_error_rate(self.max_error_rate)
        except ValueError as exc:
            raise LoadgenError(str(exc)) from None
        try:
            trace_replay.timed(self.prompts)
        except ValueError as exc:
            raise LoadgenError(str(exc)) from None
        if self.api == "openai-chat" and any(p.kind == "input_ids" for p in self.prompts):
            raise LoadgenError(
                "token-id prompts (synthetic:N, trace:, long-context:) cannot go to /v1/chat/completions; "
                "use --api native"
            )
        try:
            Endpoint.from_url(self.url)
        except ValueError as exc:
            raise LoadgenError(str(exc)) from None
        self._validate_procs()
        try:
            sessions_mod.check_prompts(self.prompts, self.procs)
        except prompts_mod.PromptError as exc:
            raise LoadgenError(str(exc)) from None

    def _validate_point(self, p: LoadPoint) -> None:
        if p.concurrency is None and p.request_rate is None:
            raise LoadgenError("a load point needs a concurrency or a request rate")
        if p.concurrency is not None and not 1 <= p.concurrency <= MAX_CONCURRENCY:
            raise LoadgenError(f"concurrency must be from 1 to {MAX_CONCURRENCY}, got {p.concurrency}")
        rate = p.request_rate
        if rate is None:
            return
        if not rate > 0:  # NaN included
            raise LoadgenError(f"request rate must be > 0 req/s, got {rate}")
        if math.isinf(rate) and self.num_prompts > 10**6:
            raise LoadgenError("an infinite request rate (all requests at once) needs a request count")
        n_sched = self.num_prompts
        if self.duration_s is not None and not math.isinf(rate):
            n_sched = min(n_sched, math.ceil(rate * self.duration_s) + 1)
        if n_sched > MAX_SCHEDULED_REQUESTS:
            raise LoadgenError(
                f"request rate {rate:g} req/s would schedule {n_sched} requests per point, more than "
                f"{MAX_SCHEDULED_REQUESTS}; give a smaller request count or duration"
            )

    def _validate_procs(self) -> None:
        procs = self.procs
        if isinstance(procs, bool) or not isinstance(procs, int) or not 1 <= procs <= MAX_PROCS:
            raise LoadgenError(
                f"procs (client processes per point, --procs) must be an integer from 1 to {MAX_PROCS}, "
                f"got {procs!r}"
            )
        if procs == 1:
            return
        if not hasattr(os, "fork"):
            raise LoadgenError("procs > 1 forks client processes (Linux); use procs = 1 on this platform")
        for p in self.points:
            if p.concurrency is not None and p.concurrency < procs:
                what = "concurrency" if p.request_rate is None else "in-flight cap (concurrency)"
                raise LoadgenError(
                    f"procs = {procs} is more than the {what} {p.concurrency} of point {p.label()}: every "
                    f"client process needs at least one request slot; lower procs to {p.concurrency} or "
                    f"use concurrency levels >= {procs}"
                )


@dataclass
class PointResult:
    point: LoadPoint
    repeat: int
    seed: int
    t0_wall: float
    records: list[RequestRecord]
    summary: dict[str, Any]


@dataclass
class CampaignResult:
    meta: dict[str, Any]
    points: list[PointResult]


def concurrency_ladder(max_concurrency: int) -> list[int]:
    """1, 2, 4, … up to ``max_concurrency`` (which is included even when not a power of two)."""
    try:
        return load_points.concurrency_ladder(max_concurrency)
    except ValueError:
        raise LoadgenError(f"max concurrency must be >= 1, got {max_concurrency}") from None


effective_max_running_requests = server_api.effective_max_running_requests
server_accept_length = server_api.server_accept_length


def is_simulated(server_info: dict[str, Any] | None, model_info: dict[str, Any] | None = None) -> bool:
    """True when the server says it is the stand-in (sim) or the null server."""
    for info in (server_info, model_info):
        if isinstance(info, dict) and any(bool(info.get(k)) for k in SIM_MARKERS):
            return True
    return False


def poisson_schedule(rate: float, n: int, seed: int, duration_s: float | None = None) -> list[float]:
    """Absolute send times (s from point start): first at 0, then exponential gaps of mean 1/rate.

    Precomputed from a seeded RNG so a rerun sends at the same instants; bounded by ``n`` and, when
    given, by ``duration_s``.
    """
    if math.isinf(rate):  # bench_serving's "inf": everything at t=0
        return [0.0] * n
    rng = random.Random(seed)
    out: list[float] = []
    t = 0.0
    while len(out) < n and (duration_s is None or t < duration_s):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as possible, larger shares first: (10, 4) → [3, 3, 2, 2]."""
    q, r = divmod(total, parts)
    return [q + (1 if k < r else 0) for k in range(parts)]


def runqueue_wait_s() -> float | None:
    """Seconds this (single-threaded) client has spent runnable but waiting for a CPU (Linux schedstat).

    Separates "the client is too slow" from "other processes took the CPU": both delay timestamps.
    """
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class _LagMonitor:
    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t = _perf()
            await asyncio.sleep(LOOP_LAG_INTERVAL_S)
            self.samples.append(max(0.0, _perf() - t - LOOP_LAG_INTERVAL_S))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class _Shard:
    """What client process ``k`` of ``procs`` sends at one point (built in the parent, used after fork)."""

    k: int
    procs: int
    warm_prompts: list[Prompt]
    warm_concurrency: int
    prompts: Iterable[Prompt]  # its measured prompts: requests k, k+P, … of the point's sequence
    n: int  # how many (closed loop; an upper bound with a duration)
    concurrency: int | None  # closed loop: its workers; open loop: its in-flight cap (None = no cap)
    schedule: list[float] | None  # open loop: its send times (requests k, k+P, …), relative to t0

    def time_bound_s(self, spec: BenchSpec, connect_timeout_s: float) -> tuple[float, float]:
        """Upper bounds (s) on its warmup and on its measured run from t0; a healthy child is far below.

        Each request ends within connect + request timeout (one reconnect allowed); a closed-loop worker
        sends its requests one after another; a duration bound stops new sends at the deadline.
        """
        per_request = spec.request_timeout_s + 2 * connect_timeout_s
        warm = (
            math.ceil(len(self.warm_prompts) / self.warm_concurrency) * per_request
            if self.warm_prompts
            else 0.0
        )
        if self.schedule is None:
            run = math.ceil(self.n / max(1, self.concurrency or 1)) * per_request if self.n else 0.0
            if spec.duration_s:
                run = min(run, spec.duration_s + per_request)
        else:
            rounds = math.ceil(len(self.schedule) / self.concurrency) if self.concurrency else 1
            run = (self.schedule[-1] if self.schedule else 0.0) + rounds * per_request
        return warm + CHILD_SLACK_S, run + CHILD_SLACK_S


@dataclass
class _Child:
    k: int
    pid: int
    ctl_fd: int  # parent → child: the start time (8 bytes), or EOF = stop
    res_fd: int  # child → parent: frames (kind byte, 8-byte length, pickle)
    reader: asyncio.StreamReader | None = None
    transport: asyncio.BaseTransport | None = None
    reaped: bool = False
    status: str | None = None  # how it ended, once reaped


_FRAME_HEAD = struct.Struct("!cQ")
_READY, _DONE, _ERROR = b"R", b"D", b"E"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def _send_frame(fd: int, kind: bytes, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _FRAME_HEAD.pack(kind, len(data)) + data)


async def _read_frame(reader: asyncio.StreamReader) -> tuple[bytes, Any]:
    kind, n = _FRAME_HEAD.unpack(await reader.readexactly(_FRAME_HEAD.size))
    return kind, pickle.loads(await reader.readexactly(n))


def _exception_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        last = tb[-1]
        text += f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    return text


def _exit_status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"was killed by signal {signal.Signals(sig).name}"
        return f"was killed by signal {sig}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _become_child() -> None:
    """Right after fork, in the child: forget the parent's event loop and signal wiring, silence stdout.

    The inherited loop's epoll set and self-pipe are shared with the parent, so they are never touched
    (never closed); the child runs its own loop. stdout is the Ansible module's JSON result: the child's
    fd 1 goes to /dev/null, and it leaves with os._exit (no buffered parent output is flushed twice).
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    asyncio.events._set_running_loop(None)  # Python < 3.12 keeps the parent's running loop after fork
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


@dataclass
class _Measured:
    """What one measured run (a point, or one client process's shard of it) gave."""

    records: list[RequestRecord]
    wall_s: float
    cpu_s: float
    runqueue_wait_s: float | None
    loop_lag_s: list[float]


class PointHooks(Protocol):
    """Called around every point (telemetry): before its first cache flush and warm-up, after the warm-up
    just before the measured requests start, and right after its last measured response, before anything
    else (server info, reaping client processes)."""

    def before_point(self) -> None: ...

    def before_window(self) -> None: ...

    def after_window(self) -> None: ...


class _NoHooks:
    def before_point(self) -> None:
        pass

    def before_window(self) -> None:
        pass

    def after_window(self) -> None:
        pass


class LoadRunner:
    """Runs load points against one server through one keep-alive connection pool."""

    def __init__(
        self,
        spec: BenchSpec,
        *,
        progress: Callable[[str], None] | None = None,
        hooks: PointHooks | None = None,
    ) -> None:
        spec.validate()
        self.spec = spec
        self.hooks: PointHooks = hooks or _NoHooks()
        self.endpoint = Endpoint.from_url(spec.url)
        self.client = HttpClient(self.endpoint, api_key=spec.api_key)
        self.path = api_mod.API_PATHS[spec.api]
        self.progress = progress or (lambda _msg: None)
        self._extra_headers = b"Accept: text/event-stream\r\n"
        self.flush_failures = 0
        self.child_connections_opened = 0  # connections opened by client processes (procs > 1)
        # Multi-turn sessions (prompts with session and turn), played by sessions.run_sessions; else None.
        self.sessions = sessions_mod.check_prompts(spec.prompts, spec.procs)
        self.timed = trace_replay.timed(spec.prompts)  # a trace: its order, its send times
        self._point_extra: dict[str, Any] = {}  # what the point's schedule adds to its summary

    # -- small admin calls ---------------------------------------------------------------------------
    async def get_json(self, path: str, timeout: float = 30.0) -> dict[str, Any] | None:
        try:
            resp = await self.client.request("GET", path, timeout=timeout)
        except HttpError:
            return None
        if resp.status != 200:
            return None
        obj = api_mod.decode_json_body(resp.body)
        return obj if isinstance(obj, dict) else None

    async def _first_json(self, paths: tuple[str, ...]) -> dict[str, Any] | None:
        """The first non-empty JSON object of ``paths`` (newest spelling first), else the last answer."""
        obj = None
        for path in paths:
            obj = await self.get_json(path)
            if obj:
                break
        return obj

    async def flush_cache(self) -> bool:
        """POST /flush_cache; SGLang refuses while requests run, so retry briefly."""
        for attempt in range(FLUSH_RETRIES):
            try:
                resp = await self.client.request("POST", facts.FLUSH_CACHE, b"", timeout=60.0)
            except HttpError:
                resp = None
            if resp is not None and resp.status == 200:
                return True
            if resp is not None and resp.status == 404:
                break
            await asyncio.sleep(0.2 * (attempt + 1))
        self.flush_failures += 1
        self.progress(f"warning: POST {self.endpoint.url(facts.FLUSH_CACHE)} failed; caches were not reset")
        return False

    async def preflight(self) -> dict[str, Any]:
        """Check reachability and auth; return server facts (server_info, model, simulated)."""
        try:
            await self.client.request("GET", facts.HEALTH, timeout=30.0)
        except HttpError as exc:
            raise LoadgenError(str(exc)) from None
        server_info = await self._first_json(facts.SERVER_INFO_ENDPOINTS)
        model_info = await self._first_json(facts.MODEL_INFO_ENDPOINTS)
        model = self.spec.model
        token_prompts = any(p.kind == "input_ids" for p in self.spec.prompts)
        models = None
        if (model is None and self.spec.api != "native") or token_prompts:
            models = await self.get_json(facts.V1_MODELS)
        if model is None and self.spec.api != "native":
            data = (models or {}).get("data") or []
            if data and isinstance(data[0], dict) and data[0].get("id"):
                model = str(data[0]["id"])
        if token_prompts:  # lengths known here: refuse what the server would reject, before any load
            context = long_context.served_context(server_info, models)
            try:
                long_context.check_fits(self.spec.prompts, context, self.spec.sampling.max_new_tokens)
            except ValueError as exc:
                raise LoadgenError(str(exc)) from None
        simulated = (
            self.spec.simulated if self.spec.simulated is not None else is_simulated(server_info, model_info)
        )
        return {"server_info": server_info, "model_info": model_info, "model": model, "simulated": simulated}

    # -- one request ---------------------------------------------------------------------------------
    async def _one(
        self,
        rec: RequestRecord,
        prompt: Prompt,
        t0: float,
        model: str | None,
        tap: Callable[[list[bytes]], None] | None = None,
    ) -> float:
        """Send one request, fill ``rec``; return the absolute time the response ended (or failed).
        ``tap`` also gets every event's payloads (a session turn keeps its answer's text)."""
        greedy = self.spec.sampling.temperature == 0
        dec = api_mod.StreamDecoder(self.spec.api, rec, keep_output_ids=greedy and not rec.warmup)
        on_event = dec.on_event
        if tap is not None:
            decode = on_event

            def on_event(payloads: list[bytes], t: float) -> None:
                decode(payloads, t)
                tap(payloads)

        resp = http_mod.Response()
        try:
            body = api_mod.build_body(self.spec.api, prompt, self.spec.sampling, model)
        except (prompts_mod.PromptError, ValueError) as exc:
            rec.error = str(exc)
            now = _perf()
            rec.sent_s = rec.end_s = None
            return now
        raw = self.client.build_request("POST", self.path, body, self._extra_headers)
        try:
            await self.client.request(
                "POST",
                self.path,
                raw=raw,
                on_event=on_event,
                timeout=self.spec.request_timeout_s,
                into=resp,
            )
        except HttpError as exc:
            rec.error = str(exc)
        rec.http_status = resp.status or None
        rec.bytes_received = resp.bytes_received
        rec.n_events = resp.n_events
        rec.sent_s = resp.sent_t - t0 if resp.sent_t else None
        rec.first_byte_s = resp.first_byte_t - t0 if resp.first_byte_t is not None else None
        end = resp.end_t if resp.end_t is not None else _perf()
        if rec.error is None:
            if resp.status != 200:
                rec.error = api_mod.error_from_response(resp.status, resp.body)
            elif not resp.is_event_stream:
                rec.error = f"expected an event stream, got Content-Type {resp.headers.get('content-type')!r}"
            else:
                dec.finish()
        if rec.error is None:
            rec.end_s = end - t0
        if rec.chunk_t:
            rec.chunk_t = [t - t0 for t in rec.chunk_t]
        return end

    # -- load shapes ---------------------------------------------------------------------------------
    async def _closed_loop(
        self,
        prompts: Iterable[Prompt],
        n_prompts: int,
        concurrency: int,
        t0: float,
        deadline: float | None,
        model: str | None,
        warmup: bool,
        out: list[RequestRecord],
    ) -> None:
        it = iter(enumerate(prompts))

        async def worker() -> None:
            ready = t0
            for idx, prompt in it:
                if deadline is not None and _perf() >= deadline:
                    return
                rec = RequestRecord(idx=idx, prompt_id=prompt.id, category=prompt.category, warmup=warmup)
                rec.scheduled_s = rec.ready_s = ready - t0
                out.append(rec)
                ready = await self._one(rec, prompt, t0, model)

        await asyncio.gather(*(worker() for _ in range(min(concurrency, n_prompts))))

    async def _open_loop(
        self,
        prompts: Iterable[Prompt],
        schedule: list[float],
        cap: int | None,
        t0: float,
        model: str | None,
        out: list[RequestRecord],
    ) -> None:
        sem = asyncio.Semaphore(cap) if cap else None

        async def one(rec: RequestRecord, prompt: Prompt) -> None:
            if sem is None:
                rec.ready_s = rec.scheduled_s
                await self._one(rec, prompt, t0, model)
                return
            async with sem:
                rec.ready_s = max(rec.scheduled_s, _perf() - t0)
                await self._one(rec, prompt, t0, model)

        tasks = []
        loop = asyncio.get_running_loop()
        for idx, (t_sched, prompt) in enumerate(zip(schedule, prompts, strict=False)):
            delay = t0 + t_sched - _perf()
            if delay > 0:
                await asyncio.sleep(delay)
            rec = RequestRecord(idx=idx, prompt_id=prompt.id, category=prompt.category)
            rec.scheduled_s = t_sched
            out.append(rec)
            tasks.append(loop.create_task(one(rec, prompt)))
        if tasks:
            await asyncio.gather(*tasks)

    # -- one point -----------------------------------------------------------------------------------
    async def run_point(self, point: LoadPoint, repeat: int, model: str | None) -> PointResult:
        if self.spec.procs > 1:
            return await self._run_point_procs(point, repeat, model)
        spec = self.spec
        seed = spec.seed + repeat
        measured: Iterable[Prompt] | sessions_mod.SessionPlan
        if self.sessions is not None:
            measured = sessions_mod.SessionPlan(self.sessions, spec.num_prompts, seed)
            warm_pool = sessions_mod.first_turns(self.sessions)
        else:
            measured = itertools.islice(self._sequence(seed), spec.num_prompts)
            warm_pool = spec.prompts
        n_warm = self._n_warm(point)
        self.hooks.before_point()
        if spec.flush_cache:
            await self.flush_cache()
        if n_warm > 0:
            warm_prompts = prompts_mod.select_prompts(warm_pool, n_warm, seed + 1_000_003)
            warm: list[RequestRecord] = []
            await self._closed_loop(
                warm_prompts, n_warm, point.concurrency or n_warm, _perf(), None, model, True, warm
            )
            bad = [r for r in warm if r.error]
            if bad and len(bad) == len(warm):
                self.progress(f"warning: every warmup request failed, e.g. {bad[0].error}")
        if spec.flush_cache:
            await self.flush_cache()

        stats = metrics_mod.ClientStats()
        schedule = self._schedule(point, seed, stats)  # before t0: generating it must not delay sends
        self.hooks.before_window()
        t0_wall = time.time()
        t0 = _perf()
        m = await self._measure(measured, spec.num_prompts, point.concurrency, schedule, t0, model)
        self.hooks.after_window()
        records = m.records
        stats.wall_s, stats.cpu_s, stats.runqueue_wait_s = m.wall_s, m.cpu_s, m.runqueue_wait_s
        stats.loop_lag_s = m.loop_lag_s
        stats.n_sent = sum(1 for r in records if r.sent_s is not None)
        return await self._finish_point(point, repeat, seed, n_warm, t0_wall, records, stats)

    def _n_warm(self, point: LoadPoint) -> int:
        """Warmup requests of a point: as given, else one per concurrency slot (8 in rate mode), max 64."""
        return self.spec.warmup if self.spec.warmup is not None else min(point.concurrency or 8, 64)

    def _sequence(self, seed: int) -> Iterable[Prompt]:
        """The point's prompts in sending order: a trace's own order (over again after its end), else
        seeded shuffles of the set."""
        if self.timed:
            return itertools.cycle(self.spec.prompts)
        return prompts_mod.iter_prompts(self.spec.prompts, seed)

    def _schedule(self, point: LoadPoint, seed: int, stats: metrics_mod.ClientStats) -> list[float] | None:
        """Rate mode: the point's send times (also noted in ``stats``), Poisson or a trace's scaled to the
        rate (trace_replay); closed loop: None."""
        self._point_extra = {}
        if point.request_rate is None:
            return None
        if self.timed:
            arrivals = [p.arrival_s for p in self.spec.prompts]
            try:
                replay = trace_replay.replay_schedule(
                    arrivals, point.request_rate, self.spec.num_prompts, self.spec.duration_s
                )
            except ValueError as exc:
                raise LoadgenError(f"point {point.label()}: {exc}") from None
            schedule = replay.times
            stats.target_rate = replay.window_rate or point.request_rate
            self._point_extra = {"trace_replay": replay.summary(point.request_rate)}
        else:
            schedule = poisson_schedule(point.request_rate, self.spec.num_prompts, seed, self.spec.duration_s)
            stats.target_rate = point.request_rate
        stats.send_window_s = schedule[-1] if schedule else None
        return schedule

    async def _measure(
        self,
        prompts: Iterable[Prompt] | sessions_mod.SessionPlan,
        n: int,
        concurrency: int | None,
        schedule: list[float] | None,
        t0: float,
        model: str | None,
    ) -> _Measured:
        """The measured requests of a point (or of one process's shard) from ``t0``, with the client's
        own CPU, CPU wait and event-loop lag over them. Closed loop without a schedule, else open loop."""
        spec = self.spec
        records: list[RequestRecord] = []
        lag = _LagMonitor()
        lag.start()
        cpu0 = time.process_time()
        sched0 = runqueue_wait_s()
        if isinstance(prompts, sessions_mod.SessionPlan):
            deadline = t0 + spec.duration_s if spec.duration_s else None
            await sessions_mod.run_sessions(
                self._one, spec.api, prompts, concurrency, schedule, t0, deadline, model, records
            )
        elif schedule is None:
            assert concurrency is not None
            deadline = t0 + spec.duration_s if spec.duration_s else None
            await self._closed_loop(prompts, n, concurrency, t0, deadline, model, False, records)
        else:
            await self._open_loop(prompts, schedule, concurrency, t0, model, records)
        wall = _perf() - t0
        cpu = time.process_time() - cpu0
        sched1 = runqueue_wait_s()
        await lag.stop()
        wait = sched1 - sched0 if sched0 is not None and sched1 is not None else None
        return _Measured(records, wall, cpu, wait, lag.samples)

    async def _finish_point(
        self,
        point: LoadPoint,
        repeat: int,
        seed: int,
        n_warm: int,
        t0_wall: float,
        records: list[RequestRecord],
        stats: metrics_mod.ClientStats,
    ) -> PointResult:
        spec = self.spec
        info = await self.get_json(facts.SERVER_INFO) if any(r.spec_verify_ct for r in records) else None
        summary = metrics_mod.summarize_point(
            records,
            slo=spec.slo,
            client=stats,
            server_accept_length=server_accept_length(info),
            max_error_rate=spec.max_error_rate,
        )
        summary = {
            "point": point.label(),
            "concurrency": point.concurrency,
            "request_rate": point.rate_json,
            "repeat": repeat,
            "seed": seed,
            "warmup_requests": n_warm,
            "t0_unix": t0_wall,
            **self._point_extra,
            **summary,
        }
        if self.sessions is not None:
            summary["turns"] = sessions_mod.turn_table(records)
        return PointResult(point, repeat, seed, t0_wall, records, summary)

    # -- one point over several client processes (procs > 1) ----------------------------------------
    def _shards(self, point: LoadPoint, seed: int, n_warm: int, schedule: list[float] | None) -> list[_Shard]:
        spec = self.spec
        nprocs = spec.procs
        warm = prompts_mod.select_prompts(spec.prompts, n_warm, seed + 1_000_003) if n_warm > 0 else []
        warm_conc = split_evenly(point.concurrency or n_warm, nprocs)
        conc: list[int | None] = (
            list(split_evenly(point.concurrency, nprocs)) if point.concurrency else [None] * nprocs
        )
        shards = []
        for k in range(nprocs):
            # The point's one deterministic prompt sequence, every P-th request from k on.
            mine = itertools.islice(self._sequence(seed), k, spec.num_prompts, nprocs)
            shards.append(
                _Shard(
                    k=k,
                    procs=nprocs,
                    warm_prompts=warm[k::nprocs],
                    warm_concurrency=max(1, warm_conc[k]),
                    prompts=mine,
                    n=len(range(k, spec.num_prompts, nprocs)),
                    concurrency=conc[k],
                    schedule=schedule[k::nprocs] if schedule is not None else None,
                )
            )
        return shards

    async def _run_point_procs(self, point: LoadPoint, repeat: int, model: str | None) -> PointResult:
        """The point over ``spec.procs`` forked client processes; records and client stats merged."""
        spec = self.spec
        seed = spec.seed + repeat
        n_warm = self._n_warm(point)
        stats = metrics_mod.ClientStats()
        schedule = self._schedule(point, seed, stats)
        shards = self._shards(point, seed, n_warm, schedule)
        where = f"point {point.label()} repeat {repeat}"
        self.hooks.before_point()
        if spec.flush_cache:
            await self.flush_cache()
        children: list[_Child] = []
        finished = False
        try:
            for shard in shards:
                children.append(self._fork_child(shard, model, children))
            loop = asyncio.get_running_loop()
            for child in children:
                child.reader = asyncio.StreamReader(loop=loop)
                proto = asyncio.StreamReaderProtocol(child.reader, loop=loop)
                child.transport, _ = await loop.connect_read_pipe(
                    lambda proto=proto: proto, os.fdopen(child.res_fd, "rb", buffering=0)
                )
            bounds = [sh.time_bound_s(spec, self.client.connect_timeout) for sh in shards]
            ready = await self._collect(children, _READY, max(b[0] for b in bounds), "warmup", where)
            n_bad = sum(r["warm_failed"] for r in ready)
            if n_bad and n_bad == sum(r["warm_sent"] for r in ready):
                example = next(r["warm_error"] for r in ready if r["warm_error"])
                self.progress(f"warning: every warmup request failed, e.g. {example}")
            if spec.flush_cache:
                await self.flush_cache()
            self.hooks.before_window()
            t0 = _perf() + START_LEAD_S
            t0_wall = time.time() + (t0 - _perf())
            start = struct.pack("!d", t0)
            for child in children:
                _write_all(child.ctl_fd, start)
            run_bound = max(b[1] for b in bounds) + START_LEAD_S
            done = await self._collect(children, _DONE, run_bound, "measured run", where)
            self.hooks.after_window()
            finished = True
        finally:  # after a failure the other children's results are of no use: kill them at once
            await self._reap(children, grace_s=2.0 if finished else 0.0)

        records = sorted((r for d in done for r in d["records"]), key=lambda r: r.idx)
        stats.procs = [d["proc"] for d in done]
        stats.wall_s = max(p["wall_s"] for p in stats.procs)
        stats.cpu_s = math.fsum(p["cpu_s"] for p in stats.procs)
        waits = [p["runqueue_wait_s"] for p in stats.procs]
        stats.runqueue_wait_s = math.fsum(waits) if all(w is not None for w in waits) else None
        stats.loop_lag_s = [x for d in done for x in d["loop_lag_s"]]
        stats.n_sent = sum(1 for r in records if r.sent_s is not None)
        self.child_connections_opened += sum(d["connections_opened"] for d in done)
        return await self._finish_point(point, repeat, seed, n_warm, t0_wall, records, stats)

    def _fork_child(self, shard: _Shard, model: str | None, siblings: list[_Child]) -> _Child:
        def run(ctl_fd: int, res_fd: int) -> int:  # the child: runs its shard, never returns
            _become_child()
            return self._child_main(shard, model, ctl_fd, res_fd)

        try:
            pid, ctl_w, res_r = forked.fork_with_pipes(
                run, also_close=[f for c in siblings for f in (c.ctl_fd, c.res_fd)]
            )
        except OSError as exc:
            raise LoadgenError(f"cannot fork client process {shard.k} of {shard.procs}: {exc}") from None
        return _Child(shard.k, pid, ctl_w, res_r)

    def _child_main(self, shard: _Shard, model: str | None, ctl_fd: int, res_fd: int) -> int:
        """In the child: own loop and connections, warmup share, wait for t0, measured share, send back."""
        try:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            result = loop.run_until_complete(self._child_point(shard, model, ctl_fd, res_fd))
            if result is None:  # the parent closed the start pipe: it gave up on this point
                return 0
            _send_frame(res_fd, _DONE, result)
            return 0
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                _send_frame(res_fd, _ERROR, _exception_text(exc))
            return 1

    async def _child_point(
        self, shard: _Shard, model: str | None, ctl_fd: int, res_fd: int
    ) -> dict[str, Any] | None:
        self.client = HttpClient(self.endpoint, api_key=self.spec.api_key)  # this process's own pool
        try:
            warm: list[RequestRecord] = []
            if shard.warm_prompts:
                await self._closed_loop(
                    shard.warm_prompts,
                    len(shard.warm_prompts),
                    shard.warm_concurrency,
                    _perf(),
                    None,
                    model,
                    True,
                    warm,
                )
            bad = [r for r in warm if r.error]
            _send_frame(
                res_fd,
                _READY,
                {
                    "warm_sent": len(warm),
                    "warm_failed": len(bad),
                    "warm_error": bad[0].error if bad else None,
                },
            )
            raw = _read_exactly(ctl_fd, 8)  # blocks until the parent says go (nothing else runs here yet)
            if len(raw) < 8:
                return None
            (t0,) = struct.unpack("!d", raw)
            delay = t0 - _perf() - 0.002
            if delay > 0:
                await asyncio.sleep(delay)
            while _perf() < t0:  # the last ~2 ms: asyncio.sleep wakes up to a millisecond late
                pass
            return await self._shard_measure(shard, t0, model)
        finally:
            await self.client.close()

    async def _shard_measure(self, shard: _Shard, t0: float, model: str | None) -> dict[str, Any]:
        """One child's measured share, timed against the common ``t0``; idx mapped back to the point's."""
        m = await self._measure(shard.prompts, shard.n, shard.concurrency, shard.schedule, t0, model)
        for rec in m.records:  # local position j of this shard = request k + j*P of the point
            rec.idx = shard.k + rec.idx * shard.procs
        return {
            "records": m.records,
            "loop_lag_s": m.loop_lag_s,
            "connections_opened": self.client.connections_opened,
            "proc": {
                "proc": shard.k,
                "cpu_s": m.cpu_s,
                "wall_s": m.wall_s,
                "runqueue_wait_s": m.runqueue_wait_s,
                "n_requests": len(m.records),
                "n_sent": sum(1 for r in m.records if r.sent_s is not None),
                "loop_lag_ms_p99": metrics_mod.distribution(m.loop_lag_s, 1000.0)["p99"],
            },
        }

    async def _collect(
        self, children: list[_Child], kind: bytes, timeout: float, phase: str, where: str
    ) -> list[Any]:
        """One ``kind`` frame from every child within ``timeout`` s, else a LoadgenError naming the child."""
        nprocs = len(children)

        async def one(child: _Child) -> Any:
            assert child.reader is not None
            try:
                got, payload = await _read_frame(child.reader)
            except (asyncio.IncompleteReadError, pickle.UnpicklingError, EOFError):
                status = await self._wait_exit(child, 2.0)
                raise LoadgenError(
                    f"client process {child.k} of {nprocs} (pid {child.pid}) {status or 'closed its pipe'} "
                    f"during the {phase} of {where} without sending its results"
                ) from None
            if got == _ERROR:
                raise LoadgenError(
                    f"client process {child.k} of {nprocs} (pid {child.pid}) failed during the {phase} of "
                    f"{where}: {payload}"
                )
            if got != kind:
                raise LoadgenError(f"client process {child.k} sent {got!r} where {kind!r} was due ({where})")
            return payload

        tasks = [asyncio.ensure_future(one(c)) for c in children]
        try:
            finished, pending = await asyncio.wait(
                tasks, timeout=timeout, return_when=asyncio.FIRST_EXCEPTION
            )
            for task in tasks:  # the first failure in process order, when there is one
                if task in finished and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if pending:
                late = [c for c, t in zip(children, tasks, strict=True) if t in pending]
                raise LoadgenError(
                    f"client process{'es' if len(late) > 1 else ''} "
                    f"{', '.join(f'{c.k} (pid {c.pid})' for c in late)} of {nprocs} did not finish the "
                    f"{phase} of {where} within {timeout:.0f} s (bound from request_timeout_s = "
                    f"{self.spec.request_timeout_s:g} s, the point's requests and duration); killed"
                )
            return [t.result() for t in tasks]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _wait_exit(self, child: _Child, timeout: float) -> str | None:
        """Reap ``child`` if it exits within ``timeout`` s; how it ended, or None while it still runs."""
        end = _perf() + timeout
        while not child.reaped:
            try:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                child.reaped, child.status = True, "ended"
                break
            if pid:
                child.reaped, child.status = True, _exit_status_text(status)
                break
            if _perf() >= end:
                return None
            await asyncio.sleep(0.01)
        return child.status

    async def _reap(self, children: list[_Child], grace_s: float) -> None:
        """Close the pipes (a child still waiting for t0 sees EOF and leaves), then reap every child;
        one still running after ``grace_s`` is killed (SIGKILL)."""
        for child in children:
            with contextlib.suppress(OSError):
                os.close(child.ctl_fd)
            if child.transport is not None:
                child.transport.close()
            else:
                with contextlib.suppress(OSError):
                    os.close(child.res_fd)
        for child in children:
            if await self._wait_exit(child, grace_s) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child.pid, 0)
                child.reaped, child.status = True, "was killed"

    async def run(self) -> CampaignResult:
        facts = await self.preflight()
        model = facts["model"]
        results: list[PointResult] = []
        try:
            for point in self.spec.points:
                for r in range(self.spec.first_repeat, self.spec.first_repeat + self.spec.repeats):
                    res = await self.run_point(point, r, model)
                    res.summary["simulated"] = facts["simulated"]
                    results.append(res)
                    s = res.summary
                    tput = s["output_throughput_tok_s"]
                    self.progress(
                        f"{point.label()} repeat {r}: {s['n_ok']} ok / {s['n_err']} err, {tput:.1f} tok/s"
                        if tput is not None
                        else f"{point.label()} repeat {r}: no throughput"
                    )
        finally:
            await self.client.close()
        meta = {
            "url": self.spec.url,
            "api": self.spec.api,
            "model": model,
            "simulated": facts["simulated"],
            "server_info": server_api.strip_secrets(facts["server_info"]),
            "sampling": {
                "max_new_tokens": self.spec.sampling.max_new_tokens,
                "temperature": self.spec.sampling.temperature,
                "ignore_eos": self.spec.sampling.ignore_eos,
                "top_p": self.spec.sampling.top_p,
            },
            "num_prompts": self.spec.num_prompts,
            "duration_s": self.spec.duration_s,
            "repeats": self.spec.repeats,
            "seed": self.spec.seed,
            "flush_cache": self.spec.flush_cache,
            "flush_failures": self.flush_failures,
            "connections_opened": self.client.connections_opened + self.child_connections_opened,
            "procs": self.spec.procs,
            "slo": self.spec.slo.active(),
            "max_error_rate": self.spec.max_error_rate,
        }
        return CampaignResult(meta, results)


async def _fetch_server_info(url: str, api_key: str | None, timeout: float) -> dict[str, Any]:
    client = HttpClient(Endpoint.from_url(url), api_key=api_key, connect_timeout=timeout)
    try:
        for path in facts.SERVER_INFO_ENDPOINTS:
            try:
                resp = await client.request("GET", path, timeout=timeout)
            except HttpError as exc:
                raise LoadgenError(str(exc)) from None
            if resp.status == 200:
                obj = api_mod.decode_json_body(resp.body)
                if isinstance(obj, dict):
                    return obj
        raise LoadgenError(f"{Endpoint.from_url(url).url(facts.SERVER_INFO)} gave no JSON server info")
    finally:
        await client.close()


def fetch_server_info(url: str, api_key: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Blocking GET /server_info (falls back to /get_server_info); raises LoadgenError when unreachable."""
    try:
        Endpoint.from_url(url)
    except ValueError as exc:
        raise LoadgenError(str(exc)) from None
    return asyncio.run(_fetch_server_info(url, api_key, timeout))


async def _check_reachable(url: str, api_key: str | None, timeout: float) -> None:
    client = HttpClient(Endpoint.from_url(url), api_key=api_key, connect_timeout=timeout)
    try:
        await client.request("GET", facts.HEALTH, timeout=timeout)
    except HttpError as exc:
        raise LoadgenError(str(exc)) from None
    finally:
        await client.close()


def check_reachable(url: str, api_key: str | None = None, timeout: float = 30.0) -> None:
    """Blocking GET /health (any answer will do): raises LoadgenError when nothing answers at ``url``.
    Lets a caller fail before it builds large inputs (e.g. synthetic prompts) for a server that is not there.
    """
    try:
        Endpoint.from_url(url)
    except ValueError as exc:
        raise LoadgenError(str(exc)) from None
    asyncio.run(_check_reachable(url, api_key, timeout))


def run_campaign(
    spec: BenchSpec,
    progress: Callable[[str], None] | None = None,
    hooks: PointHooks | None = None,
) -> CampaignResult:
    """Blocking entry point (CLI / Ansible module); ``hooks`` are called around every point."""
    return asyncio.run(LoadRunner(spec, progress=progress, hooks=hooks).run())


def campaign_summary(result: CampaignResult) -> dict[str, Any]:
    """The summary.json document (``result_schema.bench_summary``): run meta, one entry per (point,
    repeat), aggregates over repeats."""
    return result_schema.bench_summary([pr.summary for pr in result.points], result.meta)


def record_rows(result: CampaignResult) -> list[dict[str, Any]]:
    """Flat per-request rows (one per measured or warmup request) tagged with their point/repeat."""
    rows = []
    for pr in result.points:
        for rec in pr.records:
            row = {
                "point": pr.point.label(),
                "concurrency": pr.point.concurrency,
                "request_rate": pr.point.rate_json,
                "repeat": pr.repeat,
                "seed": pr.seed,
                "t0_unix": pr.t0_wall,
                "simulated": result.meta.get("simulated"),
            }
            row.update(rec.to_dict())
            rows.append(row)
    return rows


def dumps_compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)
