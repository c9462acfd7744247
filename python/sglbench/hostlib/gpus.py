"""Known GPU kinds: memory capacity as ``nvidia-smi --query-gpu=memory.total`` reports it (MiB).

Standard library only (ships to the GPU host as ``module_utils/sglbench_gpus.py``).

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
    name: str
    memory_mib: int
    aliases: tuple[str, ...]
    note: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024.0


GPU_KINDS: tuple[GpuKind, ...] = (
    GpuKind(
        "RTX PRO 6000",
        97887,
        ("rtx-pro-6000", "rtxpro6000", "rtx pro 6000 blackwell", "pro6000"),
        "96 GB GDDR7; nvidia-smi shows 97887 MiB (Workstation and Server editions)",
    ),
    GpuKind("H100", 81559, ("h100-80gb", "h100-sxm", "h100 80gb", "h100-pcie"), "80 GB HBM3"),
    GpuKind("H100 NVL", 95830, ("h100-nvl", "h100nvl"), "94 GB HBM3"),
    GpuKind("H200", 143771, ("h200-141gb", "h200 141gb", "h200-sxm"), "141 GB HBM3e"),
    GpuKind("B200", 183359, ("b200-180gb", "b200 180gb"), "180 GB usable HBM3e (DGX B200)"),
    GpuKind("A100", 81920, ("a100-80gb", "a100 80gb", "a100-sxm4-80gb"), "80 GB HBM2e"),
    GpuKind("A100 40GB", 40960, ("a100-40gb",), "40 GB HBM2"),
    GpuKind("L40S", 46068, ("l40s",), "48 GB GDDR6"),
    GpuKind("L4", 23034, ("nvidia-l4",), "24 GB GDDR6"),
    GpuKind("RTX 4090", 24564, ("rtx-4090", "4090"), "24 GB GDDR6X"),
)


def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def find_gpu(name: str) -> GpuKind | None:
    """Look a GPU kind up by name or alias (case, spaces, dashes ignored); None if unknown."""
    key = _norm(name)
    for kind in GPU_KINDS:
        if key == _norm(kind.name) or any(key == _norm(a) for a in kind.aliases):
            return kind
    return None


def known_names() -> list[str]:
    return [k.name for k in GPU_KINDS]


def default_free_gib(memory_gib: float, tp_size: int = 1) -> float:
    """Free memory at startup when not measured: capacity minus the documented context overhead."""
    return memory_gib - DEFAULT_CONTEXT_OVERHEAD_GIB - (TP_OVERHEAD_GIB if tp_size > 1 else 0.0)
