"""``nvidia-smi`` stand-in for sim hosts (stdlib only).

Answers the forms the project and SGLang use::

    nvidia-smi --query-gpu=index,name,memory.total,memory.used[,memory.free,uuid,...] \\
               --format=csv[,noheader][,nounits]
    nvidia-smi --query-compute-apps=pid,used_memory[,gpu_uuid,process_name,...] --format=csv[,...]
    nvidia-smi --query-gpu=timestamp,index,power.draw,utilization.gpu,utilization.memory,memory.used,\
               clocks.sm,temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits \
               -lms 200 -i 0,1   (one line per GPU every 200 ms, flushed, until killed; -l N in seconds)
    nvidia-smi -L
    nvidia-smi [-i N]          (a short human-readable table)

GPU kind/count come from SGLBENCH_SIM_GPU / SGLBENCH_SIM_GPU_COUNT; memory in use is what live
stand-in processes registered in SGLBENCH_SIM_STATE_DIR (see ``sglbench.sim.gpus``); power,
utilization, SM clock, temperature and throttle reasons what serving stand-ins publish there (the power
model, ``sglbench.sim.power``), averaged over the sample interval in a loop. ``timestamp`` is
nvidia-smi's ``YYYY/MM/DD HH:MM:SS.mmm`` in local time.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sglbench.sim import gpus, power
from sglbench.sim.settings import SimSettings, SimSettingsError, load_settings

DRIVER_VERSION = "580.95.05"
CUDA_VERSION = "13.0"

_MIB_FIELDS = {
    "memory.total",
    "memory.used",
    "memory.free",
    "memory.reserved",
    "used_memory",
    "used_gpu_memory",
}


_W_FIELDS = {"power.draw", "power.draw.average", "power.draw.instant", "power.limit"}
_MHZ_FIELDS = {"clocks.sm", "clocks.current.sm", "clocks.max.sm"}


def _fmt(field: str, value: object, units: bool) -> str:
    if field in _MIB_FIELDS:
        return f"{value} MiB" if units else str(value)
    if field in ("utilization.gpu", "utilization.memory"):
        return f"{value} %" if units else str(value)
    if field in _W_FIELDS:
        return f"{value:.2f} W" if units else f"{value:.2f}"
    if field in _MHZ_FIELDS:
        return f"{value} MHz" if units else str(value)
    return str(value)


def _unit(field: str) -> str | None:
    if field in _MIB_FIELDS:
        return "MiB"
    if field.startswith("utilization."):
        return "%"
    if field in _W_FIELDS:
        return "W"
    if field in _MHZ_FIELDS:
        return "MHz"
    return None


def _header(field: str, units: bool) -> str:
    unit = _unit(field)
    return f"{field} [{unit}]" if units and unit else field


def _timestamp(now: float) -> str:
    """nvidia-smi's ``timestamp``: local time, milliseconds."""
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def _parse(argv: Sequence[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-L", "--list-gpus"):
            opts["list"] = "1"
        elif arg in ("-i", "--id") and i + 1 < len(args):
            opts["id"] = args[i + 1]
            i += 1
        elif "=" in arg and arg.startswith("--"):
            key, value = arg[2:].split("=", 1)
            opts[key if key != "id" else "id"] = value
        elif arg.startswith("-i") and len(arg) > 2:
            opts["id"] = arg[2:]
        elif arg in ("-q", "--query"):
            opts["query"] = "1"
        elif arg in ("-lms", "-l") and i + 1 < len(args):
            opts["loop-ms" if arg == "-lms" else "loop"] = args[i + 1]
            i += 1
        else:
            opts.setdefault("unknown", arg)
        i += 1
    return opts


Out = Callable[[str], None]
_APP_FIELDS = {
    "pid",
    "used_memory",
    "used_gpu_memory",
    "gpu_uuid",
    "process_name",
    "gpu_bus_id",
    "gpu_name",
    "name",
}


@dataclass(frozen=True)
class _View:
    """What one call shows: the GPUs asked for, the memory live stand-ins registered on them, and the
    ``--format`` options."""

    kind: gpus.GpuKind
    count: int
    indices: list[int]
    holders: list[gpus.Holder]
    used: dict[int, int]  # MiB per GPU index
    header: bool
    units: bool
    now: float = 0.0  # the sample's wall time
    readings: dict[int, power.GpuReading] = dataclasses.field(default_factory=dict)

    def gpu_value(self, field: str, i: int) -> object:
        """A ``--query-gpu`` field of GPU ``i`` (KeyError for a field nvidia-smi does not know)."""
        kind, used = self.kind, self.used
        r = self.readings.get(i) or power.GpuReading(0.0, 0.0, 0.0, power.IDLE_SM_CLOCK_MHZ, 35.0, 0)
        reasons = f"0x{r.reasons:016x}"
        values: dict[str, object] = {
            "timestamp": _timestamp(self.now),
            "power.draw": r.power_w,
            "power.draw.average": r.power_w,
            "power.draw.instant": r.power_w,
            "power.limit": power.figures(kind).max_w,
            "clocks.sm": round(r.sm_clock_mhz),
            "clocks.current.sm": round(r.sm_clock_mhz),
            "clocks.max.sm": round(power.figures(kind).boost_mhz),
            "clocks_event_reasons.active": reasons,
            "clocks_throttle_reasons.active": reasons,
            "index": i,
            "name": kind.smi_name,
            "uuid": gpus.gpu_uuid(kind, i),
            "memory.total": kind.memory_mib,
            "memory.used": min(kind.memory_mib, used[i]),
            "memory.free": max(0, kind.memory_mib - used[i]),
            "memory.reserved": 0,
            "count": self.count,
            "driver_version": DRIVER_VERSION,
            "pci.bus_id": f"00000000:{0x18 + i:02X}:00.0",
            "utilization.gpu": round(r.util_pct),
            "utilization.memory": round(r.mem_util_pct),
            "persistence_mode": "Enabled",
            "compute_mode": "Default",
            "temperature.gpu": round(r.temp_c),
        }
        return values[field]


def run(argv: Sequence[str], out: Out) -> int:
    opts = _parse(argv)
    if "unknown" in opts:
        out(
            'Invalid combination of input arguments. Please run "nvidia-smi -h" for help. '
            f"({opts['unknown']})"
        )
        return 2
    try:
        settings = load_settings()
        kind = gpus.gpu_kind(settings)
    except (SimSettingsError, gpus.GpuConfigError) as exc:
        out(f"nvidia-smi (sglbench sim): {exc}")
        return 9
    indices = _indices(opts, settings.gpu_count, out)
    if indices is None:
        return 6
    readings = power.Readings(power.figures(kind))
    if "query-gpu" in opts and ("loop-ms" in opts or "loop" in opts):
        return _loop(opts, kind, settings, indices, readings, out)
    wall, now = _instant()
    view = _view(opts, kind, settings.gpu_count, indices, gpus.live_holders(settings.state_dir), wall)
    view.readings.update(readings.read(settings.state_dir, indices, now))
    if "list" in opts:
        for i in indices:
            out(f"GPU {i}: {kind.smi_name} (UUID: {gpus.gpu_uuid(kind, i)})")
        return 0
    if "query-gpu" in opts:
        return _query_gpu(view, _fields(opts["query-gpu"]), out)
    if "query-compute-apps" in opts:
        return _query_compute_apps(view, _fields(opts["query-compute-apps"]), out)
    _table(view, out)
    return 0


def _loop(
    opts: dict[str, str],
    kind: gpus.GpuKind,
    settings: SimSettings,
    indices: list[int],
    readings: power.Readings,
    out: Out,
) -> int:
    """``-lms N`` / ``-l N``: a sample of every GPU asked for each interval, until killed."""
    try:
        interval = int(opts["loop-ms"]) / 1000.0 if "loop-ms" in opts else float(opts["loop"])
    except ValueError:
        out('Invalid combination of input arguments. Please run "nvidia-smi -h" for help.')
        return 2
    interval = max(interval, 0.01)
    state_dir, count = settings.state_dir, settings.gpu_count
    fields = _fields(opts["query-gpu"])
    tick = time.monotonic()
    first = True
    while True:
        wall, now = _instant()
        view = _view(opts, kind, count, indices, gpus.live_holders(state_dir), wall)
        view.readings.update(readings.read(state_dir, indices, now))
        if not first:
            view = _no_header(view)
        code = _query_gpu(view, fields, out)
        if code:
            return code
        first = False
        tick += interval
        delay = tick - time.monotonic()
        if delay < 0:  # fell behind (a busy machine): sample again from now
            tick, delay = time.monotonic(), 0.0
        time.sleep(delay)


def _no_header(view: _View) -> _View:
    return dataclasses.replace(view, header=False)


def _indices(opts: dict[str, str], count: int, out: Out) -> list[int] | None:
    """The GPUs ``-i`` names (all by default); None, said on ``out``, when one does not exist."""
    if "id" not in opts:
        return list(range(count))
    try:
        indices = [int(x) for x in opts["id"].split(",")]
    except ValueError:
        out(f"No devices were found matching {opts['id']!r}")
        return None
    if any(not 0 <= i < count for i in indices):
        out("No devices were found")
        return None
    return indices


def _instant() -> tuple[float, float]:
    """One sample's instant on both clocks: the readings are taken at the moment its ``timestamp`` says
    (read apart, a loaded machine put tens of ms between them, and power times the printed intervals no
    longer added up to the energy drawn)."""
    return time.time(), time.monotonic()


def _view(
    opts: dict[str, str],
    kind: gpus.GpuKind,
    count: int,
    indices: list[int],
    holders: list[gpus.Holder],
    wall: float,
) -> _View:
    used = dict.fromkeys(range(count), 0)
    for holder in holders:
        for index, mib in holder.gpus.items():
            if index in used:
                used[index] += mib
    fmt = opts.get("format", "csv").split(",")
    header, units = "noheader" not in fmt, "nounits" not in fmt
    return _View(kind, count, indices, holders, used, header, units, wall)


def _fields(spec: str) -> list[str]:
    return [f.strip() for f in spec.split(",") if f.strip()]


def _query_gpu(view: _View, fields: list[str], out: Out) -> int:
    for field in fields:
        try:
            view.gpu_value(field, 0)
        except KeyError:
            out(f'Field "{field}" is not a valid field to query.')
            return 2
    if view.header:
        out(", ".join(_header(f, view.units) for f in fields))
    for i in view.indices:
        out(", ".join(_fmt(f, view.gpu_value(f, i), view.units) for f in fields))
    return 0


def _query_compute_apps(view: _View, fields: list[str], out: Out) -> int:
    for field in fields:
        if field not in _APP_FIELDS:
            out(f'Field "{field}" is not a valid field to query.')
            return 2
    if view.header:
        out(", ".join(_header(f, view.units) for f in fields))
    kind = view.kind
    for index in view.indices:
        for holder in view.holders:
            if index not in holder.gpus:
                continue
            row = {
                "pid": holder.pid,
                "used_memory": holder.gpus[index],
                "used_gpu_memory": holder.gpus[index],
                "gpu_uuid": gpus.gpu_uuid(kind, index),
                "process_name": holder.process_name,
                "name": holder.process_name,
                "gpu_bus_id": f"00000000:{0x18 + index:02X}:00.0",
                "gpu_name": kind.smi_name,
            }
            out(", ".join(_fmt(f, row[f], view.units) for f in fields))
    return 0


def _table(view: _View, out: Out) -> None:
    """Plain ``nvidia-smi``: a short table in the spirit of the real one."""
    kind = view.kind
    out(
        f"| NVIDIA-SMI {DRIVER_VERSION}   Driver Version: {DRIVER_VERSION}   CUDA Version: {CUDA_VERSION} "
        "(sglbench sim) |"
    )
    for i in view.indices:
        out(f"| {i:>3}  {kind.smi_name:<48} | {view.used[i]:>6}MiB / {kind.memory_mib:>6}MiB |")
    out("| Processes:")
    any_proc = False
    for holder in view.holders:
        for index, mib in sorted(holder.gpus.items()):
            if index in view.indices:
                any_proc = True
                out(f"| {index:>3}  {holder.pid:>8}  C  {holder.process_name:<30} {mib:>6}MiB |")
    if not any_proc:
        out("|  No running processes found")


def _write_now(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "-lms" in argv or "-l" in argv:  # a loop: every sample is written (and flushed) as it is taken
        try:
            return run(argv, _write_now)
        except (BrokenPipeError, KeyboardInterrupt):
            return 0
    lines: list[str] = []
    code = run(argv, lines.append)
    try:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return code


if __name__ == "__main__":
    raise SystemExit(main())
