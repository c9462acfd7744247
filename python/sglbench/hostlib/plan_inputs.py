"""What the capacity planner needs to know about the GPU host: SGLang build, GPU memory.

Standard library only: shipped to the GPU host as ``ansible.module_utils.sglbench_hostlib.plan_inputs`` and
used by the ``sglbench_plan`` module. Everything here is a pure function over text (the output of a
probe command, the files of the installed SGLang, the ``nvidia-smi`` CSV), so it is tested without a
GPU or an SGLang install.

- **Installed SGLang**: ``<python> -c "<PROBE_CODE>"`` prints the version, the package directory and
  an optional sglbench marker (see :data:`PROBE_CODE`). The accounting variant then comes from, in
  order: an explicit choice, the marker (``sglang.__sglbench_accounting__``, set only by the sim
  host's stand-in package to the variant it emulates), the source markers (:data:`SOURCE_MARKERS`,
  ``docs/capacity.md`` "SGLang version → variant") in the installed ``srt`` tree
  (``capacity.accounting_from_source``), the version (``capacity.accounting_for_version``).
- **GPU memory**: the planner needs the capacity (``memory.total``) and the free memory when SGLang
  measures it, i.e. after its CUDA context exists. ``nvidia-smi`` shows the free memory *before*
  that, so the free figure is ``min(memory.free + reclaimable) - context overhead`` over the GPUs
  the config gets, with the overhead of ``gpus.DEFAULT_CONTEXT_OVERHEAD_GIB`` (+ ``TP_OVERHEAD_GIB``
  at TP > 1), the same constant the stand-in subtracts. *Reclaimable* is the memory of compute
  processes the stop phase will kill before this config starts (command line contains the
  ``sglbench_stop`` kill match, ``sglang`` by default): the plan runs before that stop.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import capacity, gpus, nvidia_smi

# Printed on one line: "<version> <package dir> <sglbench marker or ->". Importing sglang takes seconds
# (its package imports much of the runtime), so the installed distribution's metadata answers when it is
# the package Python would import; only then (a source tree on PYTHONPATH, the stand-in, which has no
# metadata and declares its accounting variant) is the package imported.
PROBE_CODE = """import importlib.metadata as m, importlib.util as u, os
try:
    s = u.find_spec("sglang")
    d = m.distribution("sglang")
    same = os.path.realpath(str(d.locate_file("sglang/__init__.py"))) == os.path.realpath(s.origin)
    if not same:
        raise LookupError(s.origin)
    print(d.version, os.path.dirname(s.origin), "-")
except Exception:
    import sglang
    declared = getattr(sglang, "__sglbench_accounting__", None) or "-"
    print(sglang.__version__, os.path.dirname(sglang.__file__), declared)
"""
# Source markers of the accounting variants (docs/capacity.md, "SGLang version → variant"), grepped in
# <dir>/srt.
SOURCE_MARKERS: tuple[str, ...] = (
    "max_running_request is zero",
    "state cache is too small",
    "def _handle_max_mamba_cache",
    "def handle_max_mamba_cache",
    "KVCacheConfigurator",
)
SMI_FIELDS: tuple[str, ...] = ("index", "uuid", "memory.total", "memory.used", "memory.free")


class PlanInputError(ValueError):
    """Host facts the planner cannot use; the message says what was run and what to change."""


@dataclass
class SglangInstall:
    version: str
    path: str
    declared_accounting: str | None = None  # sglang.__sglbench_accounting__ (sim stand-in only)
    markers: dict[str, str] = field(default_factory=dict)  # marker -> first file (relative) holding it
    accounting: str | None = None
    accounting_source: str | None = None  # option | sglbench_marker | source | version

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe_argv(python: str) -> list[str]:
    """The command that reports the installed SGLang (run with the unit's environment)."""
    return [python, "-c", PROBE_CODE]


def parse_probe(stdout: str) -> SglangInstall:
    """Read the probe's last non-empty line: ``version dir [marker]``."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise PlanInputError("the SGLang probe printed nothing (expected '<version> <package dir>')")
    parts = lines[-1].split()
    if len(parts) < 2:
        raise PlanInputError(
            f"cannot read the SGLang probe output {lines[-1]!r} (expected '<version> <dir>')"
        )
    declared = parts[2] if len(parts) > 2 and parts[2] != "-" else None
    return SglangInstall(version=parts[0], path=parts[1], declared_accounting=declared)


def find_markers(root: str, markers: Sequence[str] = SOURCE_MARKERS) -> dict[str, str]:
    """Which accounting markers occur in the ``.py`` files under ``root/srt`` (marker -> relative file).

    Unreadable files are skipped; a missing ``srt`` directory gives ``{}`` (e.g. the sim stand-in).
    """
    srt = os.path.join(root, "srt")
    found: dict[str, str] = {}
    if not os.path.isdir(srt):
        return found
    for dirpath, dirnames, filenames in os.walk(srt):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            full = os.path.join(dirpath, name)
            try:
                with open(full, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            for marker in markers:
                if marker not in found and marker in text:
                    found[marker] = os.path.relpath(full, root)
            if len(found) == len(markers):
                return found
    return found


def resolve_accounting(install: SglangInstall, option: str | None = None) -> SglangInstall:
    """Fill ``install.accounting``/``accounting_source``: option > sglbench marker > source > version.

    Raises ``capacity.PlanError`` for a malformed variant or an unreadable version.
    """
    if option:
        install.accounting, install.accounting_source = capacity.resolve_accounting(option), "option"
    elif install.declared_accounting:
        install.accounting = capacity.resolve_accounting(install.declared_accounting)
        install.accounting_source = "sglbench_marker"
    elif (from_source := capacity.accounting_from_source(list(install.markers))) is not None:
        install.accounting, install.accounting_source = from_source, "source"
    else:
        install.accounting = capacity.accounting_for_version(install.version)
        install.accounting_source = "version"
    return install


@dataclass
class GpuMemory:
    indices: list[int]
    total_mib: dict[int, int]
    free_mib: dict[int, int]
    used_mib: dict[int, int]
    uuids: dict[str, int] = field(default_factory=dict)  # GPU UUID -> index
    reclaimable_mib: dict[int, int] = field(default_factory=dict)
    reclaimed_from: list[str] = field(default_factory=list)  # "pid N (cmdline) M MiB on GPU i"

    def available_mib(self, index: int) -> int:
        """Free memory once the stop phase has killed the reclaimable processes (capped at total)."""
        return min(self.total_mib[index], self.free_mib[index] + self.reclaimable_mib.get(index, 0))

    @property
    def min_total_mib(self) -> int:
        return min(self.total_mib[i] for i in self.indices)

    @property
    def min_free_mib(self) -> int:
        return min(self.available_mib(i) for i in self.indices)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.indices,
            "total_mib": [self.total_mib[i] for i in self.indices],
            "used_mib": [self.used_mib[i] for i in self.indices],
            "free_mib": [self.free_mib[i] for i in self.indices],
            "reclaimable_mib": [self.reclaimable_mib.get(i, 0) for i in self.indices],
            "reclaimed_from": self.reclaimed_from,
        }


def add_reclaimable(
    mem: GpuMemory, apps_text: str, cmdline_of: Callable[[int], str], match: str
) -> GpuMemory:
    """Count the memory of compute processes whose command line contains ``match`` as reclaimable.

    ``apps_text``: ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name
    --format=csv,noheader,nounits``. Processes on unknown GPUs are ignored (they are not ours to plan
    around); an empty ``match`` reclaims nothing.
    """
    if not match:
        return mem
    try:
        apps = nvidia_smi.parse_apps(apps_text)
    except nvidia_smi.NvidiaSmiError as exc:
        raise PlanInputError(str(exc)) from None
    for app in apps:
        index = mem.uuids.get(app.gpu_uuid)
        if index is None or index not in mem.indices:
            continue
        cmdline = cmdline_of(app.pid)
        if match not in cmdline:
            continue
        mem.reclaimable_mib[index] = mem.reclaimable_mib.get(index, 0) + app.used_mib
        mem.reclaimed_from.append(f"pid {app.pid} ({cmdline[:120]}) {app.used_mib} MiB on GPU {index}")
    return mem


def smi_argv(nvidia_smi_path: str = "nvidia-smi") -> list[str]:
    return [nvidia_smi_path, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]


def apps_argv(nvidia_smi_path: str = "nvidia-smi") -> list[str]:
    return nvidia_smi.apps_query_argv(nvidia_smi_path)


def gpu_memory(text: str, wanted: Iterable[int]) -> GpuMemory:
    """Memory of the ``wanted`` GPUs from ``nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,
    memory.free --format=csv,noheader,nounits``. A free figure of ``[N/A]`` is total - used."""
    try:
        rows = nvidia_smi.parse_csv(text, SMI_FIELDS)
    except nvidia_smi.NvidiaSmiError as exc:
        raise PlanInputError(str(exc)) from None
    total: dict[int, int] = {}
    used: dict[int, int] = {}
    free: dict[int, int] = {}
    uuids: dict[str, int] = {}
    for row in rows:
        try:
            idx = int(row["index"])
            total[idx] = int(float(row["memory.total"]))
        except ValueError:
            raise PlanInputError(f"nvidia-smi row without a GPU index/total: {row}") from None
        uuids[row["uuid"]] = idx
        used[idx] = _mib(row["memory.used"], 0)
        free[idx] = _mib(row["memory.free"], total[idx] - used[idx])
    indices = [int(i) for i in wanted]
    if not indices:
        raise PlanInputError("no GPUs given for this config (gpus: [])")
    missing = [i for i in indices if i not in total]
    if missing:
        raise PlanInputError(
            f"GPU(s) {missing} not reported by nvidia-smi (it lists {sorted(total)}); "
            "check the config's GPUs (CUDA_VISIBLE_DEVICES) against the host"
        )
    return GpuMemory(indices, total, free, used, uuids)


def _mib(value: str, default: int) -> int:
    try:
        return int(float(value))
    except ValueError:
        return default


def free_gib_at_start(mem: GpuMemory, tp_size: int, overhead_gib: float | None = None) -> float:
    """Free memory per rank when SGLang starts: the smallest free figure minus the context overhead."""
    overhead = gpus.context_overhead_gib(tp_size) if overhead_gib is None else float(overhead_gib)
    return mem.min_free_mib / 1024.0 - overhead


__all__ = [
    "PROBE_CODE",
    "SMI_FIELDS",
    "SOURCE_MARKERS",
    "GpuMemory",
    "PlanInputError",
    "SglangInstall",
    "add_reclaimable",
    "apps_argv",
    "find_markers",
    "free_gib_at_start",
    "gpu_memory",
    "parse_probe",
    "probe_argv",
    "resolve_accounting",
    "smi_argv",
]
