"""Continuous-batching scheduler of the stand-in (asyncio, one loop).

Requests wait in a FIFO queue; at most ``max_running`` run at once (the rest queue at the slot limit)
and their reserved tokens must fit ``max_total_num_tokens`` (when the pool is full the head of the
queue waits for running requests to finish: KV exhaustion queues, it never retracts). New requests
are prefilled as a batch (which yields their first token; the running requests wait meanwhile), then
every decode step gives each running request one token, or for speculative configs an accept length
drawn per request. Step durations come from :mod:`sglbench.sim.timing`, scaled by
SGLBENCH_SIM_TIME_SCALE. Every ``decode_log_interval`` steps a ``Decode batch`` line is logged.
:mod:`sglbench.sim.truth` runs the same rules in virtual time (the model's own answer, for tests).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from sglbench.sim.textgen import AcceptSampler, Generator
from sglbench.sim.timing import TimingModel


@dataclass
class SimRequest:
    rid: str
    prompt_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool
    generator: Generator
    sampler: AcceptSampler | None
    eos_id: int
    fixed_token: int | None = None  # SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed: every verified token is this id
    stop_token_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    cached_tokens: int = 0
    is_health: bool = False
    stream: bool = False  # the client streams the answer (SGLang's ``is_streaming`` metric label)
    created: float = field(default_factory=time.monotonic)
    admitted_time: float | None = None  # left the waiting queue (SGLang's queue_time ends here)
    output_ids: list[int] = field(default_factory=list)
    verify_ct: int = 0
    accept_hist: dict[int, int] = field(default_factory=dict)
    finish_reason: dict[str, object] | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    cancelled: bool = False
    events: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    @property
    def reserved_tokens(self) -> int:
        """KV tokens this request will hold at most. The stand-in knows the output length in advance
        (deterministic), so it reserves exactly that instead of SGLang's estimate + retraction."""
        out = self.max_new_tokens if self.ignore_eos else min(self.max_new_tokens, self.generator.natural_len)
        return len(self.prompt_ids) + out

    @property
    def seq_len(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class Queued(Protocol):
    """What admission reads of a request: its reservation and whether its client went away."""

    @property
    def reserved_tokens(self) -> int: ...

    cancelled: bool


Q = TypeVar("Q", bound=Queued)


def admit(waiting: deque[Q], running: Sequence[Q], max_running: int, max_total_tokens: int) -> list[Q]:
    """Pop the requests the scheduler admits now from the head of ``waiting`` (FIFO, cancelled ones
    dropped): while a request slot is free (``max_running``) and the request's reserved tokens fit the
    KV pool beside those already reserved. A request that does not fit waits (the queue stops there, no
    retraction); one larger than the whole pool runs alone, capped at the pool. The asyncio engine and
    the virtual-time model (:mod:`sglbench.sim.truth`) both admit with this."""
    admitted: list[Q] = []
    reserved = sum(r.reserved_tokens for r in running)
    while waiting and len(running) + len(admitted) < max_running:
        req = waiting[0]
        if req.cancelled:
            waiting.popleft()
            continue
        need = min(req.reserved_tokens, max_total_tokens)
        if (running or admitted) and reserved + need > max_total_tokens:
            break
        waiting.popleft()
        reserved += need
        admitted.append(req)
    return admitted


class StepMeter(Protocol):
    """Told when the GPUs start a step (its compute intensity and real duration) and when the scheduler
    goes idle: the power model's account (:class:`sglbench.sim.power.Meter`)."""

    def busy(self, intensity: float, seconds: float) -> None: ...

    def idle(self) -> None: ...


class _NoMeter:
    def busy(self, intensity: float, seconds: float) -> None:
        pass

    def idle(self) -> None:
        pass


class Engine:
    def __init__(
        self,
        timing: TimingModel,
        *,
        max_running: int,
        max_total_tokens: int,
        time_scale: float,
        decode_log_interval: int,
        log: Callable[[str], None],
        hybrid: bool,
        cuda_graph: bool,
        cuda_graph_max_bs: int,
        mamba_slots: int | None,
        pending_token_field: bool = True,
    ) -> None:
        self.timing = timing
        # 0.5.23's Prefill batch line has "#pending-token: N, " before the graph flag
        self.pending_part = "#pending-token: 0, " if pending_token_field else ""
        self.max_running = max(1, max_running)
        self.max_total_tokens = max(1, max_total_tokens)
        self.time_scale = time_scale
        self.decode_log_interval = max(1, decode_log_interval)
        self.log = log
        self.hybrid = hybrid
        self.cuda_graph = cuda_graph
        self.cuda_graph_max_bs = cuda_graph_max_bs
        self.mamba_slots = mamba_slots or 0
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._wake = asyncio.Event()
        self._clock = 0.0
        self._task: asyncio.Task[None] | None = None
        self.on_finish: Callable[[SimRequest], None] | None = None
        self.on_request: Callable[[int], None] | None = None  # told the count at each non-health request
        self.requests = 0
        self.meter: StepMeter = _NoMeter()
        # statistics
        self.decode_steps = 0
        self.spec_accept_sum = 0  # Σ tokens emitted per req-step (accepted + bonus)
        self.spec_req_steps = 0
        self.window_tokens = 0
        self.window_start = time.monotonic()
        self.window_accept_sum = 0
        self.window_req_steps = 0
        self.last_gen_throughput = 0.0
        self.avg_spec_accept_length: float | None = None
        self.last_accept_length = 0.0
        self.last_accept_rate = 0.0
        self.realtime_tokens_total = 0
        self.lag_seconds = 0.0  # wall time the simulation fell behind its own clock (CPU-bound)

    # ------------------------------------------------------------------ public API
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, req: SimRequest) -> None:
        if not req.is_health:
            self.requests += 1
            if self.on_request is not None:
                self.on_request(self.requests)
        self.waiting.append(req)
        self._wake.set()

    def reset_spec_stats(self) -> None:
        self.spec_accept_sum = self.spec_req_steps = 0
        self.avg_spec_accept_length = None

    @property
    def used_tokens(self) -> int:
        return sum(r.seq_len for r in self.running)

    # ------------------------------------------------------------------ loop
    async def _sleep(self, sim_seconds: float) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._clock < now - 0.05:  # far behind (CPU-bound at a tiny time scale): restart the clock
            self.lag_seconds += now - self._clock
            self._clock = now
        self._clock += sim_seconds * self.time_scale
        delay = self._clock - now
        await asyncio.sleep(delay if delay > 0 else 0)

    def _admit(self) -> list[SimRequest]:
        admitted = admit(self.waiting, self.running, self.max_running, self.max_total_tokens)
        now = time.monotonic()
        for req in admitted:
            req.admitted_time = now
        return admitted

    async def _run(self) -> None:
        while True:
            self.running = [r for r in self.running if not r.cancelled]
            if not self.running and not self.waiting:
                self.meter.idle()
                self._wake.clear()
                await self._wake.wait()
                self._clock = asyncio.get_running_loop().time()
                continue
            admitted = self._admit()
            if admitted:
                new_tokens = sum(len(r.prompt_ids) - r.cached_tokens for r in admitted)
                started = time.monotonic()
                prefill = self.timing.prefill(new_tokens)
                self.meter.busy(self.timing.prefill_intensity(new_tokens), prefill * self.time_scale)
                await self._sleep(prefill)
                self._log_prefill(admitted, new_tokens, time.monotonic() - started)
                self.running.extend(admitted)
                for req in admitted:
                    self._emit(req, 1)
                self._reap()
                continue
            if not self.running:
                self.meter.idle()
                await asyncio.sleep(0.001)  # only cancelled/oversized work left
                continue
            batch = len(self.running)
            step = self.timing.decode_step(batch, self.used_tokens)
            self.meter.busy(self.timing.decode_intensity(batch, self.used_tokens), step * self.time_scale)
            await self._sleep(step)
            self.decode_steps += 1
            for req in list(self.running):
                if req.cancelled or req.done:
                    continue
                if req.sampler is not None:
                    n = req.sampler.draw()
                    req.verify_ct += 1
                    req.accept_hist[n] = req.accept_hist.get(n, 0) + 1
                    self.spec_accept_sum += n
                    self.spec_req_steps += 1
                    self.window_accept_sum += n
                    self.window_req_steps += 1
                    self._emit(req, n, verified=True)
                else:
                    self._emit(req, 1)
            self._reap()
            if self.decode_steps % self.decode_log_interval == 0:
                self._log_decode()

    def _emit(self, req: SimRequest, count: int, verified: bool = False) -> None:
        if req.done or req.cancelled:
            return
        now = time.monotonic()
        remaining = req.max_new_tokens - len(req.output_ids)
        natural_left = req.generator.natural_len - len(req.output_ids)
        n = max(0, min(count, remaining))
        fixed = req.fixed_token if verified else None
        stop_at_eos = fixed is None and not req.ignore_eos and natural_left <= n
        if stop_at_eos:
            n = max(0, natural_left - 1)
        ids = [fixed] * n if fixed is not None else req.generator.next_ids(n)
        if stop_at_eos:
            ids.append(req.eos_id)
        if req.stop_token_ids:
            for i, tok in enumerate(ids):
                if tok in req.stop_token_ids:
                    ids = ids[: i + 1]
                    req.finish_reason = {"type": "stop", "matched": tok}
                    break
        req.output_ids.extend(ids)
        self.window_tokens += len(ids)
        self.realtime_tokens_total += len(ids)
        if req.first_token_time is None and ids:
            req.first_token_time = now
        if req.finish_reason is None:
            if stop_at_eos:
                req.finish_reason = {"type": "stop", "matched": req.eos_id}
            elif len(req.output_ids) >= req.max_new_tokens:
                req.finish_reason = {"type": "length", "length": req.max_new_tokens}
        if req.finish_reason is not None:
            req.finished_time = now
        req.events.put_nowait("update")

    def _reap(self) -> None:
        still: list[SimRequest] = []
        for req in self.running:
            if req.done:
                if self.on_finish is not None and not req.cancelled:
                    self.on_finish(req)
            elif not req.cancelled:
                still.append(req)
        self.running = still

    def _log_prefill(self, admitted: list[SimRequest], new_tokens: int, elapsed: float) -> None:
        cached = sum(r.cached_tokens for r in admitted)
        usage = (self.used_tokens + sum(len(r.prompt_ids) for r in admitted)) / self.max_total_tokens
        if self.hybrid:
            mamba = (len(self.running) + len(admitted)) / max(1, self.mamba_slots)
            usage_part = f"full token usage: {usage:.2f}, mamba usage: {mamba:.2f}, "
        else:
            usage_part = f"token usage: {usage:.2f}, "
        self.log(
            f"Prefill batch, #new-seq: {len(admitted)}, #new-token: {new_tokens}, #cached-token: {cached}, "
            f"{usage_part}#running-req: {len(self.running)}, #queue-req: {len(self.waiting)}, "
            f"{self.pending_part}cuda graph: False, "
            f"input throughput (token/s): {new_tokens / max(elapsed, 1e-9):.2f}"
        )

    def _log_decode(self) -> None:
        now = time.monotonic()
        elapsed = max(1e-9, now - self.window_start)
        self.last_gen_throughput = self.window_tokens / elapsed
        tokens = self.used_tokens
        usage = tokens / self.max_total_tokens
        if self.hybrid:
            mamba_num = len(self.running)
            token_part = (
                f"#full token: {tokens}, full token usage: {usage:.2f}, mamba num: {mamba_num}, "
                f"mamba usage: {mamba_num / max(1, self.mamba_slots):.2f}, "
            )
        else:
            token_part = f"#token: {tokens}, token usage: {usage:.2f}, "
        spec_part = ""
        if self.timing.draft_passes:
            if self.window_req_steps:
                self.last_accept_length = self.window_accept_sum / self.window_req_steps
                denom = max(1, self.timing.num_draft_tokens - 1)
                self.last_accept_rate = (self.last_accept_length - 1) / denom
            if self.spec_req_steps:
                self.avg_spec_accept_length = self.spec_accept_sum / self.spec_req_steps
            spec_part = (
                f"accept len: {self.last_accept_length:.2f}, accept rate: {self.last_accept_rate:.2f}, "
            )
        graph = self.cuda_graph and len(self.running) <= self.cuda_graph_max_bs
        self.log(
            f"Decode batch, #running-req: {len(self.running)}, {token_part}{spec_part}cuda graph: {graph}, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: {len(self.waiting)}"
        )
        self.window_tokens = 0
        self.window_accept_sum = self.window_req_steps = 0
        self.window_start = now
