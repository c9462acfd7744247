"""GPU memory and compute processes from ``nvidia-smi`` CSV queries (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.nvidia_smi``. Parsing and the "who holds
which GPU" report are pure functions; running nvidia-smi is a thin wrapper.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GPU_FIELDS = ("index", "uuid", "name", "memory.used", "memory.total")
APP_FIELDS = ("pid", "gpu_uuid", "used_memory", "process_name")


class NvidiaSmiError(RuntimeError):
    """nvidia-smi could not be run or printed something we cannot read."""


def gpu_query_argv(nvidia_smi: str = "nvidia-smi") -> list[str]:
    return [nvidia_smi, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"]


def apps_query_argv(nvidia_smi: str = "nvidia-smi") -> list[str]:
    return [nvidia_smi, "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"]


def parse_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """``--format=csv,noheader,nounits`` output into one dict per row (values stripped)."""
    rows: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("No running"):
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) < len(fields):
            raise NvidiaSmiError(f"nvidia-smi row has {len(values)} fields, expected {len(fields)}: {line!r}")
        # process names may contain commas: keep the tail together in the last field
        head = values[: len(fields) - 1]
        tail = ", ".join(values[len(fields) - 1 :])
        rows.append(dict(zip(fields, [*head, tail], strict=True)))
    return rows


def _mib(value: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        return 0  # "[N/A]" (e.g. no permission to see per-process memory)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    used_mib: int
    total_mib: int


@dataclass(frozen=True)
class ComputeApp:
    pid: int
    gpu_uuid: str
    used_mib: int
    process_name: str


def parse_gpus(text: str) -> list[Gpu]:
    return [
        Gpu(int(r["index"]), r["uuid"], r["name"], _mib(r["memory.used"]), _mib(r["memory.total"]))
        for r in parse_csv(text, GPU_FIELDS)
    ]


def parse_apps(text: str) -> list[ComputeApp]:
    return [
        ComputeApp(int(r["pid"]), r["gpu_uuid"], _mib(r["used_memory"]), r["process_name"])
        for r in parse_csv(text, APP_FIELDS)
    ]


# How long one nvidia-smi query may take before the GPUs count as unreadable. It bounds a hung driver
# only: a query answers in well under a second, but a host whose CPUs are saturated (a busy sim host
# took over 20 s to start its nvidia-smi) must not turn a slow answer into a failed config.
NVIDIA_SMI_TIMEOUT_S = 90.0


def run_nvidia_smi_all(argvs: Sequence[Sequence[str]], timeout: float = NVIDIA_SMI_TIMEOUT_S) -> list[str]:
    """Several nvidia-smi queries at once (each takes a process start and a driver query: run side by
    side, a GPU poll costs the slowest of them, not their sum); the outputs in the order asked."""
    procs = []
    try:
        for argv in argvs:
            try:
                procs.append(
                    (
                        argv,
                        subprocess.Popen(
                            list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                        ),
                    )
                )
            except OSError as err:
                raise NvidiaSmiError(f"could not run {' '.join(argv)}: {err}") from err
        outs = []
        for argv, proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise NvidiaSmiError(f"could not run {' '.join(argv)}: {exc}") from exc
            if proc.returncode != 0:
                raise NvidiaSmiError(
                    f"{' '.join(argv)} exited {proc.returncode}: {err.strip() or out.strip()}"
                )
            outs.append(out)
        return outs
    finally:
        for _argv, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@dataclass(frozen=True)
class Holder:
    """A process holding memory on one of the GPUs we need."""

    pid: int
    gpu_index: int
    used_mib: int
    process_name: str
    cmdline: str

    def describe(self) -> str:
        who = self.cmdline or self.process_name
        return f"pid {self.pid} ({who}) holds {self.used_mib} MiB on GPU {self.gpu_index}"


@dataclass(frozen=True)
class GpuReport:
    busy_gpus: list[dict[str, int]]  # [{"index", "used_mib", "total_mib"}] above the threshold
    holders: list[Holder]

    @property
    def free(self) -> bool:
        return not self.busy_gpus and not self.holders

    def describe(self) -> str:
        if self.free:
            return "all requested GPUs are free"
        parts = [f"GPU {g['index']}: {g['used_mib']} of {g['total_mib']} MiB used" for g in self.busy_gpus]
        parts += [h.describe() for h in self.holders]
        return "; ".join(parts)


def gpu_report(
    gpus: Iterable[Gpu],
    apps: Iterable[ComputeApp],
    wanted: Iterable[int] | None,
    threshold_mib: int,
    cmdline_of: dict[int, str] | None = None,
) -> GpuReport:
    """Which of the ``wanted`` GPUs (None = all) are not free, and which processes hold them.

    A GPU is busy when its used memory is above ``threshold_mib`` or a compute process runs on it.
    Apps whose GPU UUID is unknown are counted against every wanted GPU (conservative).
    """
    gpu_list = list(gpus)
    wanted_set = {g.index for g in gpu_list} if wanted is None else set(wanted)
    by_uuid = {g.uuid: g.index for g in gpu_list}
    cmdlines = cmdline_of or {}
    busy = [
        {"index": g.index, "used_mib": g.used_mib, "total_mib": g.total_mib}
        for g in gpu_list
        if g.index in wanted_set and g.used_mib > threshold_mib
    ]
    holders: list[Holder] = []
    for app in apps:
        index = by_uuid.get(app.gpu_uuid, -1)
        if index != -1 and index not in wanted_set:
            continue
        holders.append(Holder(app.pid, index, app.used_mib, app.process_name, cmdlines.get(app.pid, "")))
    return GpuReport(busy, holders)


def parent_pid(pid: int) -> int:
    """Parent pid from /proc (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def server_root(pid: int, match: str, parent_of=parent_pid, cmdline_of=None) -> int:
    """The topmost ancestor of ``pid`` whose command line still contains ``match`` (the server's
    main process for a TP worker), so a leftover server is stopped whole, not just its workers."""
    cmdline_of = cmdline_of or read_cmdline
    root = pid
    seen = {pid}
    parent = parent_of(pid)
    while parent > 1 and parent not in seen and match and match in cmdline_of(parent):
        root = parent
        seen.add(parent)
        parent = parent_of(parent)
    return root


def read_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
