"""Load generator: drives an SGLang server (or the null server) and records raw per-request facts.

Stdlib asyncio only; ships to the GPU host as ``ansible.module_utils.sglbench_loadgen`` (siblings:
``sglbench_loadgen_http``, ``sglbench_loadgen_api``, ``sglbench_metrics``, ``sglbench_prompts``).

Load shapes, per point of a campaign:

- closed loop at fixed concurrency C: C workers, each sends its next request the moment its previous
  one ended (``ready`` = arrival of the previous response's last byte);
- open loop at a Poisson request rate (seeded exponential gaps, precomputed as absolute times), with
  an optional concurrency cap (time waiting for a slot is recorded as ``queue``, not hidden);
- bounded by a request count and/or a duration (no new sends after the deadline; in-flight requests
  finish and count).

Per (point, repeat): ``POST /flush_cache`` → warmup requests (same concurrency, marked ``warmup``,
excluded from metrics) → ``/flush_cache`` again (resets SGLang's acceptance counters) → measured run
→ ``GET /server_info`` for the server's acceptance counter. Repeats use seeds ``seed + r``, so repeat
r sends the same prompts in the same order at every point and for every server config.

The client measures itself (send lateness, event-loop lag, CPU) and metrics.summarize_point turns
that into ``valid`` / ``invalid_reasons``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

try:  # on the GPU host: shipped as ansible module_utils
    from ansible.module_utils import sglbench_loadgen_api as api_mod  # type: ignore[attr-defined]
    from ansible.module_utils import sglbench_loadgen_http as http_mod  # type: ignore[attr-defined]
    from ansible.module_utils import sglbench_metrics as metrics_mod  # type: ignore[attr-defined]
    from ansible.module_utils import sglbench_prompts as prompts_mod  # type: ignore[attr-defined]
    from ansible.module_utils import sglbench_server_api as server_api  # type: ignore[attr-defined]
except ImportError:  # controller, sim, tests
    from sglbench.hostlib import loadgen_api as api_mod
    from sglbench.hostlib import loadgen_http as http_mod
    from sglbench.hostlib import metrics as metrics_mod
    from sglbench.hostlib import prompts as prompts_mod
    from sglbench.hostlib import server_api

Prompt = prompts_mod.Prompt
RequestRecord = api_mod.RequestRecord
SamplingSpec = api_mod.SamplingSpec
HttpClient = http_mod.HttpClient
HttpError = http_mod.HttpError
Endpoint = http_mod.Endpoint

_perf = time.perf_counter

SUMMARY_SCHEMA = "sglbench.bench/1"
DEFAULT_MAX_CONCURRENCY = 64  # ladder cap when neither the user nor the server gives one
LOOP_LAG_INTERVAL_S = 0.01
FLUSH_RETRIES = 5
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
        if self.request_rate is None:
            return f"c{self.concurrency}"
        cap = f"-c{self.concurrency}" if self.concurrency else ""
        return f"r{self.request_rate:g}{cap}"


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

    def validate(self) -> None:
        if self.api not in api_mod.APIS:
            raise LoadgenError(f"api must be one of {', '.join(api_mod.APIS)}, got {self.api!r}")
        if not self.points:
            raise LoadgenError("no load points: give --concurrency and/or --request-rate")
        for p in self.points:
            if p.concurrency is not None and p.concurrency < 1:
                raise LoadgenError(f"concurrency must be >= 1, got {p.concurrency}")
            if p.request_rate is not None and not p.request_rate > 0:
                raise LoadgenError(f"request rate must be > 0 req/s, got {p.request_rate}")
            if p.request_rate is not None and math.isinf(p.request_rate) and self.num_prompts > 10**6:
                raise LoadgenError("an infinite request rate (all requests at once) needs a request count")
            if p.concurrency is None and p.request_rate is None:
                raise LoadgenError("a load point needs a concurrency or a request rate")
        if self.num_prompts < 1:
            raise LoadgenError(f"num_prompts must be >= 1, got {self.num_prompts}")
        if self.repeats < 1:
            raise LoadgenError(f"repeats must be >= 1, got {self.repeats}")
        if self.first_repeat < 0:
            raise LoadgenError(f"first_repeat must be >= 0, got {self.first_repeat}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise LoadgenError(f"duration must be > 0 s, got {self.duration_s}")
        if self.sampling.max_new_tokens < 1:
            raise LoadgenError(f"max_new_tokens must be >= 1, got {self.sampling.max_new_tokens}")
        if self.api == "openai-chat" and any(p.input_ids is not None for p in self.prompts):
            raise LoadgenError(
                "token-id prompts (synthetic:N) cannot go to /v1/chat/completions; use --api native"
            )
        try:
            Endpoint.from_url(self.url)
        except ValueError as exc:
            raise LoadgenError(str(exc)) from None


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
    if max_concurrency < 1:
        raise LoadgenError(f"max concurrency must be >= 1, got {max_concurrency}")
    out = []
    c = 1
    while c < max_concurrency:
        out.append(c)
        c *= 2
    out.append(max_concurrency)
    return out


def effective_max_running_requests(server_info: dict[str, Any]) -> int | None:
    """The server's effective request cap from ``/server_info`` (per-DP value × dp_size)."""
    states = server_info.get("internal_states") or []
    per_dp = (
        states[0].get("effective_max_running_requests_per_dp")
        if states and isinstance(states[0], dict)
        else None
    )
    if not isinstance(per_dp, int) or per_dp < 1:
        mrr = server_info.get("max_running_requests")
        return mrr if isinstance(mrr, int) and mrr > 0 else None
    dp = server_info.get("dp_size") or 1
    return int(per_dp) * int(dp)


def server_accept_length(server_info: dict[str, Any] | None) -> float | None:
    if not server_info:
        return None
    states = server_info.get("internal_states") or []
    if states and isinstance(states[0], dict):
        v = states[0].get("avg_spec_accept_length")
        if isinstance(v, (int, float)):
            return float(v)
    return None


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


class LoadRunner:
    """Runs load points against one server through one keep-alive connection pool."""

    def __init__(self, spec: BenchSpec, *, progress: Callable[[str], None] | None = None) -> None:
        spec.validate()
        self.spec = spec
        self.endpoint = Endpoint.from_url(spec.url)
        self.client = HttpClient(self.endpoint, api_key=spec.api_key)
        self.path = api_mod.API_PATHS[spec.api]
        self.progress = progress or (lambda _msg: None)
        self._extra_headers = b"Accept: text/event-stream\r\n"
        self.flush_failures = 0

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

    async def flush_cache(self) -> bool:
        """POST /flush_cache; SGLang refuses while requests run, so retry briefly."""
        for attempt in range(FLUSH_RETRIES):
            try:
                resp = await self.client.request("POST", "/flush_cache", b"", timeout=60.0)
            except HttpError:
                resp = None
            if resp is not None and resp.status == 200:
                return True
            if resp is not None and resp.status == 404:
                break
            await asyncio.sleep(0.2 * (attempt + 1))
        self.flush_failures += 1
        self.progress(f"warning: POST {self.endpoint.url('/flush_cache')} failed; caches were not reset")
        return False

    async def preflight(self) -> dict[str, Any]:
        """Check reachability and auth; return server facts (server_info, model, simulated)."""
        try:
            await self.client.request("GET", "/health", timeout=30.0)
        except HttpError as exc:
            raise LoadgenError(str(exc)) from None
        server_info = await self.get_json("/server_info") or await self.get_json("/get_server_info")
        model_info = await self.get_json("/model_info") or await self.get_json("/get_model_info")
        model = self.spec.model
        if model is None and self.spec.api != "native":
            models = await self.get_json("/v1/models")
            data = (models or {}).get("data") or []
            if data and isinstance(data[0], dict) and data[0].get("id"):
                model = str(data[0]["id"])
        simulated = (
            self.spec.simulated if self.spec.simulated is not None else is_simulated(server_info, model_info)
        )
        return {"server_info": server_info, "model_info": model_info, "model": model, "simulated": simulated}

    # -- one request ---------------------------------------------------------------------------------
    async def _one(self, rec: RequestRecord, prompt: Prompt, t0: float, model: str | None) -> float:
        """Send one request, fill ``rec``; return the absolute time the response ended (or failed)."""
        dec = api_mod.StreamDecoder(self.spec.api, rec)
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
                on_event=dec.on_event,
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
        spec = self.spec
        seed = spec.seed + repeat
        measured = itertools.islice(prompts_mod.iter_prompts(spec.prompts, seed), spec.num_prompts)
        n_warm = spec.warmup if spec.warmup is not None else min(point.concurrency or 8, 64)
        if spec.flush_cache:
            await self.flush_cache()
        if n_warm > 0:
            warm_prompts = prompts_mod.select_prompts(spec.prompts, n_warm, seed + 1_000_003)
            warm: list[RequestRecord] = []
            await self._closed_loop(
                warm_prompts, n_warm, point.concurrency or n_warm, _perf(), None, model, True, warm
            )
            bad = [r for r in warm if r.error]
            if bad and len(bad) == len(warm):
                self.progress(f"warning: every warmup request failed, e.g. {bad[0].error}")
        if spec.flush_cache:
            await self.flush_cache()

        records: list[RequestRecord] = []
        lag = _LagMonitor()
        lag.start()
        cpu0 = time.process_time()
        sched0 = runqueue_wait_s()
        t0_wall = time.time()
        t0 = _perf()
        deadline = t0 + spec.duration_s if spec.duration_s else None
        stats = metrics_mod.ClientStats()
        if point.request_rate is None:
            assert point.concurrency is not None
            await self._closed_loop(
                measured, spec.num_prompts, point.concurrency, t0, deadline, model, False, records
            )
        else:
            schedule = poisson_schedule(point.request_rate, spec.num_prompts, seed, spec.duration_s)
            stats.target_rate = point.request_rate
            stats.send_window_s = schedule[-1] if schedule else None
            await self._open_loop(measured, schedule, point.concurrency, t0, model, records)
        stats.wall_s = _perf() - t0
        stats.cpu_s = time.process_time() - cpu0
        sched1 = runqueue_wait_s()
        if sched0 is not None and sched1 is not None:
            stats.runqueue_wait_s = sched1 - sched0
        await lag.stop()
        stats.loop_lag_s = lag.samples
        stats.n_sent = sum(1 for r in records if r.sent_s is not None)

        info = await self.get_json("/server_info") if any(r.spec_verify_ct for r in records) else None
        summary = metrics_mod.summarize_point(
            records, slo=spec.slo, client=stats, server_accept_length=server_accept_length(info)
        )
        summary = {
            "point": point.label(),
            "concurrency": point.concurrency,
            "request_rate": point.rate_json,
            "repeat": repeat,
            "seed": seed,
            "warmup_requests": n_warm,
            "t0_unix": t0_wall,
            **summary,
        }
        return PointResult(point, repeat, seed, t0_wall, records, summary)

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
            "connections_opened": self.client.connections_opened,
            "slo": self.spec.slo.active(),
        }
        return CampaignResult(meta, results)


async def _fetch_server_info(url: str, api_key: str | None, timeout: float) -> dict[str, Any]:
    client = HttpClient(Endpoint.from_url(url), api_key=api_key, connect_timeout=timeout)
    try:
        for path in ("/server_info", "/get_server_info"):
            try:
                resp = await client.request("GET", path, timeout=timeout)
            except HttpError as exc:
                raise LoadgenError(str(exc)) from None
            if resp.status == 200:
                obj = api_mod.decode_json_body(resp.body)
                if isinstance(obj, dict):
                    return obj
        raise LoadgenError(f"{Endpoint.from_url(url).url('/server_info')} gave no JSON server info")
    finally:
        await client.close()


def fetch_server_info(url: str, api_key: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Blocking GET /server_info (falls back to /get_server_info); raises LoadgenError when unreachable."""
    try:
        Endpoint.from_url(url)
    except ValueError as exc:
        raise LoadgenError(str(exc)) from None
    return asyncio.run(_fetch_server_info(url, api_key, timeout))


def run_campaign(spec: BenchSpec, progress: Callable[[str], None] | None = None) -> CampaignResult:
    """Blocking entry point (CLI / Ansible module)."""
    return asyncio.run(LoadRunner(spec, progress=progress).run())


def campaign_summary(result: CampaignResult) -> dict[str, Any]:
    """The summary.json document: run meta, one entry per (point, repeat), aggregates over repeats."""
    points = [pr.summary for pr in result.points]
    aggregates = []
    seen: dict[str, list[dict[str, Any]]] = {}
    for pr in result.points:
        seen.setdefault(pr.point.label(), []).append(pr.summary)
    for pr in result.points:
        label = pr.point.label()
        if label not in seen:
            continue
        group = seen.pop(label)
        aggregates.append(
            {
                "point": label,
                "concurrency": pr.point.concurrency,
                "request_rate": pr.point.rate_json,
                **metrics_mod.aggregate_repeats(group),
            }
        )
    return {
        "schema": SUMMARY_SCHEMA,
        "simulated": bool(result.meta.get("simulated")),
        "meta": result.meta,
        "points": points,
        "aggregates": aggregates,
    }


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
