"""Waiting until GPUs are really free, killing leftover SGLang workers (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.gpu_free``; the stop phase's module
(``plugins/modules/sglbench_stop.py``) runs :func:`wait_free` after stopping the units. Every poll reads
``nvidia-smi`` (GPU memory and compute processes); after ``grace_s`` a holder whose command line
contains ``kill_match`` gets SIGTERM, then SIGKILL after ``kill_grace_s``, together with its topmost
matching ancestor (the server's main process), so a leftover server is stopped whole. A holder that does
not match is never killed, only reported. What touches the host (nvidia-smi, /proc, signals, the clock)
is injected through :class:`HostOps`, so the loop is tested without GPUs or timing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .nvidia_smi import (
    Gpu,
    GpuReport,
    Holder,
    apps_query_argv,
    gpu_query_argv,
    gpu_report,
    parse_apps,
    parse_gpus,
    read_cmdline,
    run_nvidia_smi_all,
    server_root,
)


@dataclass(frozen=True)
class FreeSpec:
    """Which GPUs must be free and how long to wait and when to kill (the module's options)."""

    gpus: tuple[int, ...] = ()  # empty: every GPU
    timeout_s: float = 60.0
    grace_s: float = 2.0
    kill_grace_s: float = 5.0
    kill_match: str = "sglang"
    threshold_mib: int = 1024
    interval_s: float = 0.2
    nvidia_smi: str = "nvidia-smi"


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig``; False when the process is gone or not ours to signal."""
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


@dataclass(frozen=True)
class HostOps:
    """What the wait does to the host: run nvidia-smi queries (side by side), read a command line, signal,
    find a server's root, the clock."""

    smi: Callable[[Sequence[Sequence[str]]], list[str]] = run_nvidia_smi_all
    cmdline: Callable[[int], str] = read_cmdline
    kill: Callable[[int, int], bool] = signal_pid
    root: Callable[[int, str], int] = server_root
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class FreeResult:
    free: bool
    gpus: list[Gpu]
    last: GpuReport
    wanted: list[int]  # the GPUs that had to be free
    first_report: str = ""  # what held them at the first poll that found them busy
    killed: list[dict[str, Any]] = field(default_factory=list)
    waited_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        wanted = set(self.wanted)
        return {
            "free": self.free,
            "killed": self.killed,
            "report": self.first_report,
            "gpus": [
                {"index": g.index, "used_mib": g.used_mib, "total_mib": g.total_mib}
                for g in self.gpus
                if g.index in wanted
            ],
            "waited_s": round(self.waited_s, 3),
        }

    def failure_message(self, spec: FreeSpec) -> str:
        """One paragraph: what still holds the GPUs, what was not killed and why, what to do."""
        unkillable = [
            h.describe() for h in self.last.holders if not spec.kill_match or spec.kill_match not in h.cmdline
        ]
        hint = (
            f" Not killed (command line lacks {spec.kill_match!r}): {'; '.join(unkillable)}."
            if unkillable
            else ""
        )
        return (
            f"GPUs {sorted(self.wanted)} still busy after {spec.timeout_s}s: {self.last.describe()}.{hint} "
            "Stop those processes (or raise the timeout) before starting the next config."
        )


def snapshot(spec: FreeSpec, ops: HostOps) -> tuple[list[Gpu], GpuReport]:
    """One poll: every GPU's memory and who holds the wanted ones (raises NvidiaSmiError)."""
    gpu_text, apps_text = ops.smi([gpu_query_argv(spec.nvidia_smi), apps_query_argv(spec.nvidia_smi)])
    gpus, apps = parse_gpus(gpu_text), parse_apps(apps_text)
    cmdlines = {a.pid: ops.cmdline(a.pid) for a in apps}
    return gpus, gpu_report(gpus, apps, list(spec.gpus) or None, spec.threshold_mib, cmdlines)


def _signal_holder(
    holder: Holder,
    spec: FreeSpec,
    ops: HostOps,
    now: float,
    termed: dict[int, float],
    killed: list[dict[str, Any]],
) -> None:
    """The server's main process first (it takes its workers down), then the holder itself."""
    root = ops.root(holder.pid, spec.kill_match)
    for pid in dict.fromkeys((root, holder.pid)):
        entry = {**holder.__dict__, "pid": pid, "holder_pid": holder.pid}
        if pid != holder.pid:
            entry.update(used_mib=0, cmdline=ops.cmdline(pid))
        sent = termed.get(pid)
        if sent is None:
            if ops.kill(pid, signal.SIGTERM):
                termed[pid] = now
                killed.append({**entry, "signal": "SIGTERM"})
        elif now - sent >= spec.kill_grace_s and ops.kill(pid, signal.SIGKILL):
            termed[pid] = float("inf")
            killed.append({**entry, "signal": "SIGKILL"})


def wait_free(spec: FreeSpec, check_mode: bool = False, ops: HostOps | None = None) -> FreeResult:
    """Poll until the wanted GPUs are free or ``timeout_s`` passes, killing matching leftovers after the
    grace (never in check mode). Raises ``NvidiaSmiError`` when nvidia-smi cannot be read."""
    ops = ops or HostOps()
    start = ops.clock()
    deadline = start + spec.timeout_s
    killed: list[dict[str, Any]] = []
    termed: dict[int, float] = {}
    first_report = ""
    while True:
        gpus, report = snapshot(spec, ops)
        if report.free:
            break
        first_report = first_report or report.describe()
        now = ops.clock()
        if now >= deadline:
            break
        if not check_mode and spec.kill_match and now - start >= spec.grace_s:
            for holder in report.holders:
                if spec.kill_match in holder.cmdline:
                    _signal_holder(holder, spec, ops, now, termed, killed)
        ops.sleep(min(spec.interval_s, max(0.0, deadline - now)))
    wanted = list(spec.gpus) if spec.gpus else [g.index for g in gpus]
    return FreeResult(report.free, gpus, report, wanted, first_report, killed, ops.clock() - start)
