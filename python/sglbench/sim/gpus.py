"""Simulated GPUs: the configured kind (a row of the planner's table, ``sglbench.hostlib.gpus``), and
a registry of the memory live stand-in processes hold.

Each stand-in worker process (one per TP rank, like SGLang's scheduler processes) has a JSON file
``<state_dir>/procs/<pid>.json`` saying which GPU indices it holds and how many MiB on each. The
``nvidia-smi`` stand-in sums the entries of live processes; files of dead pids are ignored (and
removed when possible), so memory is "freed" exactly when the holding process is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.hostlib.atomic_file import write_atomic
from sglbench.sim.settings import SimSettings

# The one table of GPU kinds (memory, nvidia-smi name, bandwidth, FLOPs) is the planner's.
GpuKind = hostlib_gpus.GpuKind
GPU_KINDS = hostlib_gpus.GPU_KINDS
# A kind given only by SGLBENCH_SIM_GPU_MEM_MIB: timing figures of a mid-range data-centre GPU.
CUSTOM_BANDWIDTH_GBPS = 2000.0
CUSTOM_BF16_TFLOPS = 300.0


class GpuConfigError(ValueError):
    """Bad GPU selection (unknown kind, device index out of range)."""


def gpu_kind(settings: SimSettings) -> GpuKind:
    """The configured GPU kind, with the MiB/bandwidth overrides applied."""
    key = settings.gpu.strip()
    kind = hostlib_gpus.find_gpu(key)
    if kind is None:
        if settings.gpu_mem_mib is None:
            raise GpuConfigError(
                f"SGLBENCH_SIM_GPU={key!r} is not a known kind ({', '.join(k.key for k in GPU_KINDS)}); "
                "use one of those or also set SGLBENCH_SIM_GPU_MEM_MIB"
            )
        kind = GpuKind(
            key,
            settings.gpu_mem_mib,
            (key.lower(),),
            "custom",
            key,
            CUSTOM_BANDWIDTH_GBPS,
            CUSTOM_BF16_TFLOPS,
        )
    if settings.gpu_mem_mib is not None:
        kind = dataclasses.replace(kind, memory_mib=settings.gpu_mem_mib)
    if settings.gpu_bandwidth_gbps is not None:
        kind = dataclasses.replace(kind, bandwidth_gbps=settings.gpu_bandwidth_gbps)
    return kind


def gpu_uuid(kind: GpuKind, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"sglbench-sim/{kind.smi_name}/{index}"))


def assigned_gpus(
    tp_size: int, gpu_count: int, cuda_visible_devices: str | None, base_gpu_id: int = 0
) -> list[int]:
    """Physical GPU indices a server with ``tp_size`` ranks uses (CUDA_VISIBLE_DEVICES order)."""
    if cuda_visible_devices is not None and cuda_visible_devices.strip() != "":
        try:
            visible = [int(x) for x in cuda_visible_devices.split(",") if x.strip() != ""]
        except ValueError:
            raise GpuConfigError(
                f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r}: the stand-in understands GPU indices only"
            ) from None
    else:
        visible = list(range(gpu_count))
    wanted = visible[base_gpu_id : base_gpu_id + tp_size]
    if len(wanted) < tp_size:
        raise GpuConfigError(
            f"RuntimeError: CUDA error: invalid device ordinal (tp_size={tp_size} needs {tp_size} GPUs, "
            f"{len(visible)} visible)"
        )
    bad = [i for i in wanted if not 0 <= i < gpu_count]
    if bad:
        raise GpuConfigError(
            f"RuntimeError: CUDA error: invalid device ordinal (GPU {bad[0]} does not exist)"
        )
    return wanted


# ----------------------------------------------------------------------------------- registry


def _procs_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "procs")


def _start_time(pid: int) -> str | None:
    """Process start time from /proc (guards against pid reuse); None when unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            return "zombie"
        return fields[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, start_time: str | None = None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    if now == "zombie":
        return False
    return not (start_time is not None and now is not None and now != start_time)


def register(state_dir: str, pid: int, gpus: dict[int, int], process_name: str, role: str) -> None:
    """Write (atomically) the GPU memory ``pid`` holds: ``{gpu_index: used_mib}``."""
    entry = {
        "pid": pid,
        "start_time": _start_time(pid),
        "process_name": process_name,
        "role": role,
        "gpus": {str(k): int(v) for k, v in gpus.items()},
    }
    write_atomic(os.path.join(_procs_dir(state_dir), f"{pid}.json"), json.dumps(entry))


def unregister(state_dir: str, pid: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(_procs_dir(state_dir), f"{pid}.json"))


@dataclass(frozen=True)
class Holder:
    pid: int
    process_name: str
    role: str
    gpus: dict[int, int]


def live_holders(state_dir: str) -> list[Holder]:
    """Entries of processes that are still alive (stale files are removed when possible)."""
    directory = _procs_dir(state_dir)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    holders: list[Holder] = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
            pid = int(entry["pid"])
            gpus = {int(k): int(v) for k, v in entry.get("gpus", {}).items()}
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not pid_alive(pid, entry.get("start_time")):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        holders.append(
            Holder(pid, str(entry.get("process_name", "python3")), str(entry.get("role", "")), gpus)
        )
    return holders


def used_mib_by_gpu(state_dir: str, gpu_count: int, exclude_pids: Iterable[int] = ()) -> dict[int, int]:
    excluded = set(exclude_pids)
    used = dict.fromkeys(range(gpu_count), 0)
    for holder in live_holders(state_dir):
        if holder.pid in excluded:
            continue
        for index, mib in holder.gpus.items():
            if index in used:
                used[index] += mib
    return used
