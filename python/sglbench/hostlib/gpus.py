"""Known GPU kinds, the one table: memory capacity as ``nvidia-smi --query-gpu=memory.total`` reports
it (MiB), the name ``nvidia-smi`` prints, memory bandwidth and effective BF16 FLOPs.

Standard library only (ships to the GPU host as ``module_utils/sglbench_hostlib/gpus.py``). The capacity
planner reads the memory; the SGLang stand-in (``sglbench.sim.gpus``, its ``nvidia-smi``) reads all
of it.

SGLang's defaults (``mem_fraction_static``, ``chunked_prefill_size``, ``cuda_graph_max_bs``) are keyed on
this capacity in MiB. The free memory at startup is smaller: the CUDA context, NCCL and the allocator
take some before SGLang measures ``pre_model_load_memory``. ``DEFAULT_CONTEXT_OVERHEAD_GIB`` is the
difference seen on the mission's RTX PRO 6000 (97,887 MiB = 95.59 GiB total, 94.24 GiB free at
startup, TP1); pass ``--free-gib`` when you know the real figure (it is the "Load weight begin.
avail mem" line of a previous start).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONTEXT_OVERHEAD_GIB = 1.35
# extra per-rank free-memory loss with TP>1 (NCCL communicators, custom all-reduce buffers) [estimate]
TP_OVERHEAD_GIB = 0.5


@dataclass(frozen=True)
class GpuKind:
    """One GPU kind: what the planner keys SGLang's defaults on and what the stand-in emulates."""

    name: str  # short name: ``--gpu NAME`` of the planner, ``known_names()``
    memory_mib: int  # ``nvidia-smi --query-gpu=memory.total`` (MiB)
    aliases: tuple[str, ...]
    note: str = ""
    smi_name: str = ""  # as ``nvidia-smi`` prints it (the stand-in reports this)
    bandwidth_gbps: float = 0.0  # memory bandwidth, GB/s (10^9 bytes): the stand-in's decode timing
    bf16_tflops: float = 0.0  # effective dense BF16 (~0.7 x the data sheet): the stand-in's prefill timing

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024.0

    @property
    def key(self) -> str:
        """Lowercase short id (the first alias), e.g. ``rtx-pro-6000``: ``SGLBENCH_SIM_GPU`` values."""
        return self.aliases[0]


# Memory: nvidia-smi memory.total. Bandwidth: data sheets (specdec.md §5 for the RTX PRO 6000 rows).
GPU_KINDS: tuple[GpuKind, ...] = (
    GpuKind(
        "RTX PRO 6000",
        97887,
        ("rtx-pro-6000", "rtxpro6000", "rtx pro 6000 blackwell", "pro6000", "rtx pro 6000 server"),
        "96 GB GDDR7; nvidia-smi shows 97887 MiB (Server Edition; same memory as the Workstation Edition)",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        1597.0,
        250.0,
    ),
    GpuKind(
        "RTX PRO 6000 WS",
        97887,
        ("rtx-pro-6000-ws", "rtx pro 6000 workstation", "rtx pro 6000 blackwell workstation"),
        "96 GB GDDR7, 1792 GB/s (Workstation Edition)",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        1792.0,
        250.0,
    ),
    GpuKind(
        "H100",
        81559,
        ("h100", "h100-80gb", "h100-sxm", "h100 80gb", "h100-pcie"),
        "80 GB HBM3",
        "NVIDIA H100 80GB HBM3",
        3350.0,
        700.0,
    ),
    GpuKind("H100 NVL", 95830, ("h100-nvl", "h100nvl"), "94 GB HBM3", "NVIDIA H100 NVL", 3900.0, 600.0),
    GpuKind(
        "H200",
        143771,
        ("h200", "h200-141gb", "h200 141gb", "h200-sxm"),
        "141 GB HBM3e",
        "NVIDIA H200",
        4800.0,
        700.0,
    ),
    GpuKind(
        "B200",
        183359,
        ("b200", "b200-180gb", "b200 180gb"),
        "180 GB usable HBM3e (DGX B200)",
        "NVIDIA B200",
        8000.0,
        1600.0,
    ),
    GpuKind(
        "A100",
        81920,
        ("a100", "a100-80gb", "a100 80gb", "a100-sxm4-80gb"),
        "80 GB HBM2e",
        "NVIDIA A100-SXM4-80GB",
        2039.0,
        250.0,
    ),
    GpuKind("A100 40GB", 40960, ("a100-40gb",), "40 GB HBM2", "NVIDIA A100-SXM4-40GB", 1555.0, 250.0),
    GpuKind("L40S", 46068, ("l40s",), "48 GB GDDR6", "NVIDIA L40S", 864.0, 250.0),
    GpuKind("L4", 23034, ("l4", "nvidia-l4"), "24 GB GDDR6", "NVIDIA L4", 300.0, 85.0),
    GpuKind("RTX 4090", 24564, ("rtx-4090", "4090"), "24 GB GDDR6X", "NVIDIA GeForce RTX 4090", 1008.0, 60.0),
)


def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def find_gpu(name: str) -> GpuKind | None:
    """A GPU kind by name, alias or nvidia-smi name (case, spaces, dashes ignored); None if unknown."""
    key = _norm(name)
    for kind in GPU_KINDS:
        if key in (_norm(kind.name), _norm(kind.smi_name)) or any(key == _norm(a) for a in kind.aliases):
            return kind
    return None


def known_names() -> list[str]:
    return [k.name for k in GPU_KINDS]


def context_overhead_gib(tp_size: int) -> float:
    """Memory a rank's CUDA context/NCCL take before SGLang measures its free memory (planner's constant)."""
    return DEFAULT_CONTEXT_OVERHEAD_GIB + (TP_OVERHEAD_GIB if tp_size > 1 else 0.0)


def default_free_gib(memory_gib: float, tp_size: int = 1) -> float:
    """Free memory at startup when not measured: capacity minus the documented context overhead."""
    return memory_gib - context_overhead_gib(tp_size)
