"""The stand-in's GPU power model, and how a serving stand-in tells the ``nvidia-smi`` stand-in what its
GPUs draw.

**Model.** Each GPU of a serving config draws, per GPU (every TP rank does the same work)::

    idle:         P = idle_w
    busy (step):  P = idle_w + (max_w - idle_w) * (K_MEMORY + (K_COMPUTE - K_MEMORY) * intensity)

``intensity`` is how compute bound the step is (:meth:`sglbench.sim.timing.TimingModel.decode_intensity`
and ``prefill_intensity``: the target's compute time over the step's bound time): a memory-bound decode
step at batch 1 draws ``K_MEMORY`` of the idle-to-limit swing, a compute-bound prefill or a wide verify
batch up to all of it. So speculative decoding costs energy where it costs compute: a DFlash verify step
(16 tokens a request) is more compute bound, and draws more, than an autoregressive decode step.

``max_w`` is the board power limit from the data sheets and ``idle_w`` an assumption (about what
``nvidia-smi`` shows for an idle data-centre GPU with a model loaded and persistence mode on, roughly a
tenth of the limit); ``boost_mhz`` the data-sheet boost clock. They are in :data:`POWER_FIGURES` by the
name of the planner's GPU kind (``sglbench.hostlib.gpus``); a kind without a row (a custom
``SGLBENCH_SIM_GPU``) gets :data:`DEFAULT_FIGURES`.

Durations are the stand-in's real (time-scaled) ones, so at ``SGLBENCH_SIM_TIME_SCALE`` s the energy
per token is s times the real-world figure (the power in watts is the same).

**Throttling** (``SGLBENCH_SIM_THROTTLE``): during an episode the dynamic part of the power and the SM
clock are multiplied by the kind's factor, and the episode's reason bit is set in
``clocks_event_reasons.active`` (:data:`THROTTLE_BITS`; bit values are NVML's ``nvmlClocksEventReason*``).
An idle GPU (utilization 0 over the sample) reports :data:`REASON_GPU_IDLE`, as real GPUs do.

**Publication.** A serving stand-in keeps a :class:`Meter`: at every scheduler step it adds the energy and
busy time since the last one and writes its state (cumulative energy and busy seconds at a monotonic
instant, the step's power and until when it lasts, its figures, the throttle episode, its GPU indices) into
``<SGLBENCH_SIM_STATE_DIR>/power/<pid>.bin``, one fixed-size record (:data:`RECORD`, guarded by a
sequence number at both ends). The ``nvidia-smi`` stand-in reads the records of live processes
(:func:`read_boards`); its ``power.draw`` and ``utilization.gpu`` are the averages over its own sample
interval of the energy and busy time (``CLOCK_MONOTONIC`` is one clock for every process). A GPU no
server publishes for draws ``idle_w``.

**Ledger** (``SGLBENCH_SIM_POWER_LEDGER=1``): the meter also appends every published change as a line
``<wall time> <cumulative energy J per GPU>`` to ``<SGLBENCH_SIM_STATE_DIR>/power/<pid>.ledger``, and a last
one when the server exits; the file stays. Between two lines the power is the first change's, so
:func:`ledger_energy` (linear between lines) gives the energy the meter accounted over any window within
the server's life: the server-side truth a campaign's sampled telemetry is held to, however busy the
machine (a late step or a starved client changes what the GPUs drew, and the ledger with it).

:func:`expected_energy_per_output_token` is the model's own J/token for a request served alone (a
steady point at concurrency 1), what a campaign's measured energy per token is compared with.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.sim import gpus
from sglbench.sim.timing import TimingModel

K_MEMORY = 0.55  # share of the idle-to-limit swing a memory-bound step draws [assumption]
K_COMPUTE = 1.0  # ... and a compute-bound one
IDLE_SM_CLOCK_MHZ = 345.0
IDLE_TEMP_C = 32.0
LOAD_TEMP_RISE_C = 45.0  # at the power limit
THERMAL_SLOWDOWN_TEMP_C = 90.0

REASON_GPU_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4
REASON_HW_THERMAL_SLOWDOWN = 0x40
# kind of episode -> (reason bit, factor on the dynamic power and the SM clock)
THROTTLE_BITS: dict[str, tuple[int, float]] = {
    "power": (REASON_SW_POWER_CAP, 0.6),
    "thermal": (REASON_HW_THERMAL_SLOWDOWN, 0.5),
}


@dataclass(frozen=True)
class PowerFigures:
    max_w: float  # board power limit (data sheet)
    idle_w: float  # idle draw with a model loaded [assumption, ~10 % of the limit]
    boost_mhz: float  # SM boost clock (data sheet)


# By the planner's GPU kind name (hostlib/gpus.py). Limits and clocks: NVIDIA data sheets (RTX PRO 6000
# Blackwell Server/Workstation 600 W, H100 SXM 700 W, H100 NVL 400 W, H200 SXM 700 W, B200 1000 W,
# A100 SXM4 400 W, L40S 350 W, L4 72 W, RTX 4090 450 W).
POWER_FIGURES: dict[str, PowerFigures] = {
    "RTX PRO 6000": PowerFigures(600.0, 60.0, 2617.0),
    "RTX PRO 6000 WS": PowerFigures(600.0, 60.0, 2617.0),
    "H100": PowerFigures(700.0, 70.0, 1980.0),
    "H100 NVL": PowerFigures(400.0, 60.0, 1785.0),
    "H200": PowerFigures(700.0, 70.0, 1980.0),
    "B200": PowerFigures(1000.0, 140.0, 1965.0),
    "A100": PowerFigures(400.0, 55.0, 1410.0),
    "A100 40GB": PowerFigures(400.0, 55.0, 1410.0),
    "L40S": PowerFigures(350.0, 35.0, 2520.0),
    "L4": PowerFigures(72.0, 16.0, 2040.0),
    "RTX 4090": PowerFigures(450.0, 30.0, 2520.0),
}
DEFAULT_FIGURES = PowerFigures(400.0, 50.0, 1800.0)


def figures(kind: hostlib_gpus.GpuKind) -> PowerFigures:
    return POWER_FIGURES.get(kind.name, DEFAULT_FIGURES)


def step_power_w(fig: PowerFigures, intensity: float, throttle_factor: float = 1.0) -> float:
    """Per-GPU draw during a step of ``intensity`` (0 memory bound .. 1 compute bound)."""
    share = K_MEMORY + (K_COMPUTE - K_MEMORY) * min(1.0, max(0.0, intensity))
    return fig.idle_w + (fig.max_w - fig.idle_w) * share * throttle_factor


def expected_energy_per_output_token(
    kind: hostlib_gpus.GpuKind,
    timing: TimingModel,
    *,
    prompt_tokens: float,
    output_tokens: int,
    accept_length: float | None = None,
    time_scale: float = 1.0,
) -> float:
    """The model's joules per output token, over all the config's GPUs, of a request served alone (a
    steady point at concurrency 1): its prefill, then decode steps (``accept_length`` tokens each for a
    speculative config) over a growing KV cache, at the step durations and draws of the model, at
    ``time_scale``. Idle gaps between requests are not counted (the client sends the next request at once)."""
    fig = figures(kind)
    prompt = max(1, round(prompt_tokens))
    t = timing.prefill(prompt)
    energy = step_power_w(fig, timing.prefill_intensity(prompt)) * t
    per_step = max(1.0, accept_length or 1.0)
    steps = max(0.0, (output_tokens - 1) / per_step)  # the first token comes from the prefill
    i = 0
    while i < steps:
        kv = prompt + 1 + int(i * per_step)
        step = timing.decode_step(1, kv)
        # a fractional last step: the mean over requests whose step counts straddle it
        energy += min(1.0, steps - i) * step_power_w(fig, timing.decode_intensity(1, kv)) * step
        i += 1
    return energy * max(1, timing.tp_size) * time_scale / max(1, output_tokens)


# ------------------------------------------------------------------------------------ publication

# seq, t_mono, energy_j, busy_s, power_w, busy_until, idle_w, max_w, boost_mhz, throttle_from, throttle_to,
# throttle_factor, throttle_bits, n_gpus, gpus[16], seq (again: a torn read has two different ones)
RECORD = struct.Struct("<Q11dQH16hQ")


def _accrue(t: float, now: float, power_w: float, busy_until: float, idle_w: float) -> tuple[float, float]:
    """(energy J, busy s) from ``t`` to ``now``: ``power_w`` until ``busy_until``, ``idle_w`` after it."""
    if now <= t:
        return 0.0, 0.0
    edge = min(now, max(t, busy_until))
    return power_w * (edge - t) + idle_w * (now - edge), edge - t


MAX_GPUS = 16


def board_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "power")


LEDGER_SUFFIX = ".ledger"


def read_ledger(text: str) -> list[tuple[float, float]]:
    """The (wall time, cumulative energy J per GPU) lines of a ledger, in order (a last line without its
    newline, torn, dropped)."""
    out = []
    for line in text.split("\n")[:-1]:
        parts = line.split()
        if len(parts) == 2:
            with contextlib.suppress(ValueError):
                out.append((float(parts[0]), float(parts[1])))
    return out


def ledger_energy(entries: list[tuple[float, float]], t: float) -> float:
    """Cumulative energy (J per GPU) at wall time ``t`` by a ledger's lines, linear between two of them;
    ValueError outside the ledger's span."""
    if not entries or not entries[0][0] <= t <= entries[-1][0]:
        raise ValueError(f"{t} is outside the ledger ({entries[0][0] if entries else None} ..)")
    i = bisect.bisect_right([e[0] for e in entries], t)
    if i >= len(entries):
        return entries[-1][1]
    (t0, e0), (t1, e1) = entries[i - 1], entries[i]
    return e0 if t1 <= t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)


@dataclass(frozen=True)
class Board:
    """One serving process's published state."""

    pid: int
    t_mono: float
    energy_j: float  # per GPU, cumulative at t_mono
    busy_s: float
    power_w: float  # from t_mono until busy_until (then idle)
    busy_until: float
    fig: PowerFigures
    throttle_from: float  # monotonic; 0, 0 = no episode
    throttle_to: float
    throttle_factor: float
    throttle_bits: int
    gpus: tuple[int, ...]

    @property
    def busy(self) -> bool:
        return self.busy_until > self.t_mono

    def at(self, now: float) -> tuple[float, float]:
        """Cumulative (energy J, busy s) per GPU at monotonic ``now``."""
        energy, busy = _accrue(self.t_mono, now, self.power_w, self.busy_until, self.fig.idle_w)
        return self.energy_j + energy, self.busy_s + busy

    def throttled(self, now: float) -> bool:
        return self.throttle_from <= now < self.throttle_to


class Meter:
    """The serving process's energy and busy-time account, published at every change (a few µs).

    Between two steps the GPUs draw the first step's power for the real time between them (the
    scheduler's own clock catches up on a late step, so over a window that is the model's time); when the
    scheduler goes idle, its last step counts busy for its own (time-scaled) duration at most and the rest
    idle (a late wake-up, a client between two requests). Readers extrapolate the published state: the
    step's power until its nominal end, idle after it."""

    def __init__(
        self,
        fig: PowerFigures,
        gpu_ids: list[int],
        state_dir: str | None,
        clock: Callable[[], float] | None = None,
        ledger: bool = False,
    ) -> None:
        self.fig = fig
        self.gpu_ids = list(gpu_ids)[:MAX_GPUS]
        self.clock = clock or time.monotonic
        self.t = self.clock()
        self.energy_j = 0.0
        self.busy_s = 0.0
        self.power_w = fig.idle_w
        self.busy_now = False
        self.busy_until = self.t  # the current step's nominal end (what readers extrapolate to)
        self.throttle: tuple[float, float, float, int] = (0.0, 0.0, 1.0, 0)
        self.seq = 0
        self.path: str | None = None
        self._fd: int | None = None
        self._ledger: Any = None
        if state_dir:
            self._open(state_dir, ledger)
        self._publish()

    def _open(self, state_dir: str, ledger: bool) -> None:
        directory = board_dir(state_dir)
        try:
            os.makedirs(directory, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o1777)
            self.path = os.path.join(directory, f"{os.getpid()}.bin")
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError:
            self.path, self._fd = None, None
        if ledger:
            with contextlib.suppress(OSError):
                self._ledger = open(os.path.join(directory, f"{os.getpid()}{LEDGER_SUFFIX}"), "w")  # noqa: SIM115

    def _record(self) -> None:
        """A ledger line for the account as it stands (the meter's clock is CLOCK_MONOTONIC: its instant
        is written as wall time)."""
        if self._ledger is not None:
            wall = self.t + (time.time() - time.monotonic())
            self._ledger.write(f"{wall!r} {self.energy_j!r}\n")

    def set_throttle(self, start_mono: float, duration_s: float, kind: str) -> None:
        bit, factor = THROTTLE_BITS[kind]
        self.throttle = (start_mono, start_mono + duration_s, factor, bit)
        self._publish()

    def _advance(self, cap: bool) -> float:
        """Account the time since the last change; ``cap``: the step ends here, busy for its nominal
        duration at most."""
        now = self.clock()
        if not self.busy_now:
            energy, busy = _accrue(self.t, now, self.fig.idle_w, self.t, self.fig.idle_w)
        elif cap:
            energy, busy = _accrue(self.t, now, self.power_w, self.busy_until, self.fig.idle_w)
        else:
            energy, busy = _accrue(self.t, now, self.power_w, now, self.fig.idle_w)
        self.energy_j += energy
        self.busy_s += busy
        self.t = now
        return now

    def busy(self, intensity: float, seconds: float) -> None:
        """A step of ``intensity`` and ``seconds`` (real, time-scaled) starts now."""
        now = self._advance(cap=False)
        start, end, factor, _bit = self.throttle
        self.power_w = step_power_w(self.fig, intensity, factor if start <= now < end else 1.0)
        self.busy_now = True
        self.busy_until = now + max(0.0, seconds)
        self._publish()

    def idle(self) -> None:
        if not self.busy_now:
            return
        now = self._advance(cap=True)
        self.busy_now = False
        self.power_w = self.fig.idle_w
        self.busy_until = now
        self._publish()
        if self._ledger is not None:
            self._ledger.flush()

    def _publish(self) -> None:
        self._record()
        if self._fd is None:
            return
        self.seq += 1
        start, end, factor, bit = self.throttle
        ids = self.gpu_ids + [0] * (MAX_GPUS - len(self.gpu_ids))
        data = RECORD.pack(
            self.seq,
            self.t,
            self.energy_j,
            self.busy_s,
            self.power_w,
            self.busy_until,
            self.fig.idle_w,
            self.fig.max_w,
            self.fig.boost_mhz,
            start,
            end,
            factor,
            bit,
            len(self.gpu_ids),
            *ids,
            self.seq,
        )
        try:
            os.pwrite(self._fd, data, 0)
        except OSError:
            self.close()

    def close(self) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is not None:
            with contextlib.suppress(OSError, ValueError):
                self._ledger = ledger
                self._advance(cap=True)  # the account up to the end
                self._record()
                ledger.close()
            self._ledger = None
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def _read_board(path: str, pid: int) -> Board | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        for _ in range(5):
            data = os.pread(fd, RECORD.size, 0)
            if len(data) != RECORD.size:
                return None
            v = RECORD.unpack(data)
            if v[0] == v[-1]:
                n = min(int(v[13]), MAX_GPUS)
                return Board(
                    pid=pid,
                    t_mono=v[1],
                    energy_j=v[2],
                    busy_s=v[3],
                    power_w=v[4],
                    busy_until=v[5],
                    fig=PowerFigures(v[7], v[6], v[8]),
                    throttle_from=v[9],
                    throttle_to=v[10],
                    throttle_factor=v[11],
                    throttle_bits=int(v[12]),
                    gpus=tuple(v[14 : 14 + n]),
                )
        return None
    finally:
        os.close(fd)


def read_boards(state_dir: str) -> list[Board]:
    """The records of live serving processes (a dead process's record is removed when possible)."""
    directory = board_dir(state_dir)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    boards = []
    for name in names:
        if not name.endswith(".bin"):
            continue
        path = os.path.join(directory, name)
        try:
            pid = int(name[: -len(".bin")])
        except ValueError:
            continue
        if not gpus.pid_alive(pid):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        board = _read_board(path, pid)
        if board is not None:
            boards.append(board)
    return boards


@dataclass
class GpuReading:
    """What nvidia-smi shows for one GPU at one sample."""

    power_w: float
    util_pct: float
    mem_util_pct: float
    sm_clock_mhz: float
    temp_c: float
    reasons: int


class Readings:
    """Per-GPU readings over consecutive samples (``nvidia-smi -lms``): power and utilization are the
    averages since the previous sample (the first sample: the instantaneous state)."""

    def __init__(self, idle_fig: PowerFigures) -> None:
        self.idle_fig = idle_fig
        self._prev: dict[tuple[int, int], tuple[float, float, float]] = {}

    def read(self, state_dir: str, indices: list[int], now: float | None = None) -> dict[int, GpuReading]:
        now = time.monotonic() if now is None else now
        by_gpu: dict[int, Board] = {}
        for board in read_boards(state_dir):
            for g in board.gpus:
                by_gpu.setdefault(g, board)
        out: dict[int, GpuReading] = {}
        for i in indices:
            board = by_gpu.get(i)
            out[i] = self._idle() if board is None else self._reading(i, board, now)
        return out

    def _idle(self) -> GpuReading:
        fig = self.idle_fig
        return GpuReading(fig.idle_w, 0.0, 0.0, IDLE_SM_CLOCK_MHZ, IDLE_TEMP_C, REASON_GPU_IDLE)

    def _reading(self, i: int, board: Board, now: float) -> GpuReading:
        energy, busy = board.at(now)
        prev = self._prev.get((board.pid, i))
        self._prev[(board.pid, i)] = (now, energy, busy)
        if prev is not None and now - prev[0] > 1e-6:
            dt = now - prev[0]
            power = (energy - prev[1]) / dt
            util = min(1.0, max(0.0, (busy - prev[2]) / dt))
        else:
            busy_now = board.busy_until > now
            power, util = (board.power_w, 1.0) if busy_now else (board.fig.idle_w, 0.0)
        fig = board.fig
        throttled = board.throttled(now)
        factor = board.throttle_factor if throttled else 1.0
        clock = fig.boost_mhz * factor if util > 0 else IDLE_SM_CLOCK_MHZ
        load = (power - fig.idle_w) / max(1.0, fig.max_w - fig.idle_w)
        temp = IDLE_TEMP_C + LOAD_TEMP_RISE_C * min(1.0, max(0.0, load))
        reasons = board.throttle_bits if throttled else 0
        if throttled and board.throttle_bits == REASON_HW_THERMAL_SLOWDOWN:
            temp = max(temp, THERMAL_SLOWDOWN_TEMP_C)
        if util == 0:
            reasons |= REASON_GPU_IDLE
        return GpuReading(power, util * 100.0, util * 80.0, clock, temp, reasons)
