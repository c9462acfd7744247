"""SGLang's memory defaults per release: chunked prefill size, CUDA-graph max batch size and the
``--mem-fraction-static`` it picks when the flag is not given.

Standard library only (shipped to the GPU host beside :mod:`capacity`). Each era is read from one
release's own source, named in its docstring; the boundaries between eras come from the flag
catalogs (``sglang_catalogs/``), which show when a switch appeared or went:

- :class:`Era046` (releases before 0.4.8; read in 0.4.6 and 0.4.7 ``server_args.__post_init__``): a constant
  fraction by TP size up to 80 GB (0.88 at TP1 ... 0.79 at TP16), ``(gpu - 13 GiB) / gpu`` above;
- :class:`Era04` (0.4.8 to 0.5.5; read in 0.4.8, 0.4.10 and 0.5.2 ``server_args.__post_init__``): a fixed
  reserve per GPU tier (2.8 GiB + TP x PP / 10 below 35 GB, 9.5 GiB + TP x PP / 2 below 90 GB, ...);
- :class:`Era056` (0.5.6 to 0.5.9; read in 0.5.6.post2 ``server_args._handle_gpu_memory_settings``):
  piecewise CUDA graphs are opt-in (``--enable-piecewise-cuda-graph``), the speculative reserve is 2 GiB;
- :class:`Era0510` (0.5.10 to 0.5.19; read in 0.5.10.post1): piecewise CUDA graphs are on unless a
  rule turns them off (``_handle_piecewise_cuda_graph``), and their capture sizes are reserved
  (8 MiB each, 1.5 GiB with an MLA backend); the speculative reserve is 4 GiB (6 GiB STANDALONE);
- :class:`Era0520` (0.5.20 and later; read in 0.5.23 ``arg_groups/memory_hook.py``): the catalogs lose
  ``--disable-piecewise-cuda-graph`` (per-phase ``cuda_graph_config``); 24-35 GB GPUs get a 4096-token
  chunk and 48 (160 at TP>=4) decode graphs; the decode graph size is capped by
  ``--max-running-requests``; the prefill (breakable) graph is on by default on CUDA; no speculative
  term; without a GPU the fraction is 0.95.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from . import sglang_facts

_GIB_MIB = 1024


@dataclass(frozen=True)
class DefaultsInputs:
    """What SGLang's default rule reads (``gpu_mem_mib`` as ``get_device_memory_capacity`` gives it)."""

    gpu_mem_mib: float | None
    tp: int
    pp: int
    spec: str | None  # speculative algorithm as SGLang runs it, or None
    mla: bool  # the attention backend is an MLA one (``use_mla_backend``)
    multimodal: bool
    dp_attention: int  # attention data-parallel size (0 without --enable-dp-attention)
    requested_mrr: int | None  # --max-running-requests as given
    max_prefill: int
    no_prefill_graph: bool  # the flags rule out the piecewise / prefill graph
    disable_cuda_graph: bool
    model_class: str = ""
    model_type: str = ""


def pcg_capture_sizes(max_tokens: int) -> list[int]:
    """``_generate_piecewise_cuda_graph_tokens`` (0.5.10.post1) / ``generate_prefill_cuda_graph_batch_sizes``
    (0.5.23): the token counts a prefill graph is captured for, up to ``max_tokens``."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [s for s in sizes if s <= max_tokens]


class DefaultsEra:
    """One era's rule. ``since``: the first release it applies to."""

    name: ClassVar[str]
    since: ClassVar[tuple[int, int, int]]
    fallback_mfs: ClassVar[float] = 0.88  # when the GPU memory is unknown

    def chunked_prefill_and_graph_bs(self, gpu_mem_mib: float | None, tp: int) -> tuple[int, int]:
        """(chunked_prefill_size, cuda_graph_max_bs) by GPU memory and TP (the tier table)."""
        if gpu_mem_mib is None:
            return 4096, 160
        g = gpu_mem_mib
        if g < 20 * 1024:
            return 2048, 8
        if g < 35 * 1024:
            return self._mid_tier(tp)
        if g < 60 * 1024:
            return 4096, (32 if tp < 4 else 160)
        if g < 160 * 1024:
            return 8192, (256 if tp < 4 else 512)
        return 16384, 512

    def _mid_tier(self, tp: int) -> tuple[int, int]:
        return 2048, (24 if tp < 4 else 80)

    def graph_bs(self, cgmb: int, d: DefaultsInputs, given: bool) -> int:
        """The decode graph size the reserve is computed from."""
        return cgmb

    def prefill_graph_reserve_mib(self, cps: int, d: DefaultsInputs) -> float:
        return 0.0

    def spec_reserve_mib(self, spec: str | None) -> float:
        if spec is None or spec == "NGRAM":
            return 0.0
        return 6 * _GIB_MIB if spec == "STANDALONE" else 2 * _GIB_MIB

    def reserved_mib(self, cps: int, cgmb: int, d: DefaultsInputs) -> float:
        """``reserved_mem`` of ``_handle_gpu_memory_settings``."""
        reserved = 512.0
        reserved += max(cps if cps > 0 else d.max_prefill, 2048) * 1.5
        reserved += 0 if d.disable_cuda_graph else cgmb * 2
        reserved += d.tp * d.pp / 8 * 1024
        if d.dp_attention:
            reserved += cgmb * d.dp_attention * 3
            if cgmb > 300:
                reserved += cgmb * d.dp_attention * 1.5
        reserved += self.prefill_graph_reserve_mib(cps, d)
        if d.gpu_mem_mib is not None and d.gpu_mem_mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        return reserved + self.spec_reserve_mib(d.spec)

    def mem_fraction_static(self, cps: int, cgmb: int, d: DefaultsInputs) -> float:
        """SGLang's default before the multimodal factor (``round(..., 3)`` as SGLang rounds it)."""
        if d.gpu_mem_mib is None:
            return self.fallback_mfs
        reserved = self.reserved_mib(cps, cgmb, d)
        return round((d.gpu_mem_mib - reserved) / d.gpu_mem_mib, 3)


class Era046(DefaultsEra):
    """0.4.6 / 0.4.7 ``server_args.__post_init__``: up to 81,920 MiB a constant by TP size (TP1 0.88,
    TP2 0.87, TP4 0.85, TP8 0.81, TP16 0.79), above it ``(gpu - 13,312 MiB) / gpu`` (not rounded);
    chunk 2048 and 8 decode graphs (80 at TP>=4) below 25,000 MiB, else 8192 and 160."""

    name = "0.4.6"
    since = (0, 0, 0)

    def chunked_prefill_and_graph_bs(self, gpu_mem_mib: float | None, tp: int) -> tuple[int, int]:
        if gpu_mem_mib is not None and gpu_mem_mib < 25_000:
            return 2048, (8 if tp < 4 else 80)
        return 8192, 160

    def mem_fraction_static(self, cps: int, cgmb: int, d: DefaultsInputs) -> float:
        if d.gpu_mem_mib is None:
            return self.fallback_mfs
        if d.gpu_mem_mib > 81920:
            return (d.gpu_mem_mib - 13 * 1024) / d.gpu_mem_mib
        for tp_at_least, mfs in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
            if d.tp >= tp_at_least:
                return mfs
        return 0.88


class Era04(DefaultsEra):
    """0.4.10 / 0.5.2 ``server_args.__post_init__``: ``reserved_mem`` is a constant of the GPU tier and
    TP x PP; chunk 2048 below 35 GB, 8192 below 160 GB, else 16384; 8 decode graphs (80 at TP>=4) below
    35 GB, else 160; 2 GiB more with a draft (6 GiB STANDALONE, 0.5.2), 4 GiB more with DP attention."""

    name = "0.4.8"
    since = (0, 4, 8)

    def chunked_prefill_and_graph_bs(self, gpu_mem_mib: float | None, tp: int) -> tuple[int, int]:
        if gpu_mem_mib is None:
            return 4096, 160
        if gpu_mem_mib < 35 * 1024:
            return 2048, (8 if tp < 4 else 80)
        return (8192 if gpu_mem_mib < 160 * 1024 else 16384), 160

    def reserved_mib(self, cps: int, cgmb: int, d: DefaultsInputs) -> float:
        g, par = d.gpu_mem_mib or 0.0, d.tp * d.pp
        if g < 35 * 1024:
            reserved = (2.8 + par / 10) * 1024
        elif g < 90 * 1024:
            reserved = (9.5 + par / 2) * 1024
        elif g < 160 * 1024:
            reserved = (12 + par / 2) * 1024
        else:
            reserved = 32 * 1024
        reserved += self.spec_reserve_mib(d.spec)
        return reserved + (4 * _GIB_MIB if d.dp_attention else 0)


class Era056(DefaultsEra):
    """0.5.6.post2 ``server_args._handle_gpu_memory_settings``: no piecewise-graph term by default,
    2 GiB for EAGLE-family drafts, 6 GiB for STANDALONE."""

    name = "0.5.6"
    since = (0, 5, 6)


class Era0510(DefaultsEra):
    """0.5.10.post1 ``server_args._handle_gpu_memory_settings`` after ``_handle_piecewise_cuda_graph``:
    piecewise CUDA graphs on unless speculative decoding, DP attention, PP > 1, a multimodal model or an
    architecture in ``piecewise_cuda_graph_disabled_model_archs`` turns them off; reserve 8 MiB per
    capture size (sizes up to the chunked prefill size) or 1.5 GiB with MLA; 4 GiB speculative reserve."""

    name = "0.5.10"
    since = (0, 5, 10)
    disabled_archs: ClassVar[frozenset[str]] = frozenset(
        {
            "DeepseekV32ForCausalLM",
            "Qwen3NextForCausalLM",
            "GlmMoeDsaForCausalLM",
            "BailingMoeV2_5ForCausalLM",
            "LLaDAModelLM",
        }
    )

    def prefill_graph_reserve_mib(self, cps: int, d: DefaultsInputs) -> float:
        off = d.no_prefill_graph or d.spec is not None or d.dp_attention or d.pp > 1 or d.multimodal
        if off or d.model_class in self.disabled_archs:
            return 0.0
        if d.mla:
            return 1.5 * _GIB_MIB
        return len(pcg_capture_sizes(cps)) * 8.0

    def spec_reserve_mib(self, spec: str | None) -> float:
        return float(sglang_facts.startup_reserve_mib(spec))


class Era0520(DefaultsEra):
    """0.5.23 ``arg_groups/memory_hook.py`` (``_handle_gpu_memory_settings``, ``reserve_for_graph_mb``):
    the 24-35 GB tier takes 4096 tokens and 48 / 160 decode graphs; a default decode graph size above
    ``--max-running-requests`` is capped to it; the breakable prefill graph (on by default on CUDA,
    off for multimodal, KDA and DeepSeek-V4 models) reserves 8 MiB per capture size, 1.5 GiB with MLA
    (capture sizes up to the chunk, at most 8192 with MLA); no speculative term; 0.95 without a GPU."""

    name = "0.5.20"
    since = (0, 5, 20)
    fallback_mfs = 0.95

    def _mid_tier(self, tp: int) -> tuple[int, int]:
        return 4096, (48 if tp < 4 else 160)

    def graph_bs(self, cgmb: int, d: DefaultsInputs, given: bool) -> int:
        if not given and d.requested_mrr is not None and cgmb > d.requested_mrr:
            return d.requested_mrr
        return cgmb

    def prefill_graph_reserve_mib(self, cps: int, d: DefaultsInputs) -> float:
        off = d.no_prefill_graph or d.disable_cuda_graph or d.multimodal
        if off or d.model_type in ("kimi_linear", "deepseek_v4"):
            return 0.0
        if d.mla:
            return 1.5 * _GIB_MIB
        return len(pcg_capture_sizes(cps)) * 8.0

    def spec_reserve_mib(self, spec: str | None) -> float:
        return 0.0


# ``--mamba-scheduler-strategy auto`` (``--mamba-radix-cache-strategy`` from 0.5.14): no_buffer up to 0.5.13
# (server_args.__post_init__, read in 0.5.10.post1, 0.5.12, 0.5.13); from 0.5.14 (read in 0.5.14, 0.5.16,
# 0.5.23: server_args / arg_groups/overrides.py _mamba_radix_cache_resolution) extra_buffer when the
# overlap scheduler is on (or page > 1) and the architecture supports it with the triton linear backend
MAMBA_AUTO_EXTRA_BUFFER_SINCE = (0, 5, 14)
MAMBA_EXTRA_BUFFER_ARCHS = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "InternS2PreviewForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
    }
)


def auto_mamba_strategy(release: tuple[int, ...] | None, model_class: str, overlap: bool, page: int) -> str:
    """What ``auto`` resolves to; without a release, the pre-0.5.14 answer (no_buffer)."""
    v = (*release, 0, 0, 0)[:3] if release is not None else None
    if v is None or v < MAMBA_AUTO_EXTRA_BUFFER_SINCE:
        return "no_buffer"
    if (overlap or page > 1) and model_class in MAMBA_EXTRA_BUFFER_ARCHS:
        return "extra_buffer"
    return "no_buffer"


# DeepSeek sparse attention with an FP8 cache: the pool always stores the scaled latent
# (calculate_mla_kv_cache_dim), but the token count was profiled with the plain (kv_lora_rank + rope)
# x 1 byte cell up to 0.5.16 (model_runner_kv_cache_mixin.get_cell_size_per_token, read in 0.5.10.post1;
# 0.5.16 kv_cache_configurator) and with the scaled one from 0.5.17 (model_executor/pool_configurator.py)
DSA_SCALED_PROFILE_SINCE = (0, 5, 17)


def dsa_scaled_profile(release: tuple[int, ...] | None) -> bool:
    """Whether the release sizes the DSA FP8 pool by the scaled latent (None: the newest behaviour)."""
    return release is None or (*release, 0, 0, 0)[:3] >= DSA_SCALED_PROFILE_SINCE


PLATFORMS = ("cuda", "rocm")


def rocm_aiter_factor(
    platform: str, attention_backend: str | None, mla: bool, context_len: int, explicit: bool
) -> float:
    """``--mem-fraction-static`` (given or default) times 0.85 on ROCm with the aiter attention backend
    (the MHA default there) and a context above 8192 tokens: server_args
    ``_handle_attention_backend_compatibility`` "AMD platforms backends" (read in 0.5.6.post2,
    0.5.10.post1, 0.5.16, 0.5.17; 0.5.23 arg_groups/attention_hook.py, where
    SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION keeps a given value)."""
    if platform != "rocm" or mla or context_len <= 8192:
        return 1.0
    if attention_backend not in (None, "aiter"):
        return 1.0
    if explicit and os.environ.get("SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION", "").lower() in ("1", "true"):
        return 1.0
    return 0.85


ERAS: tuple[DefaultsEra, ...] = (Era046(), Era04(), Era056(), Era0510(), Era0520())


def era_for(release: tuple[int, ...] | None) -> DefaultsEra:
    """The era of a release (``(0, 5, 10)``); None (no release known) gives the 0.5.10 rule."""
    if release is None:
        return ERAS[3]
    v = (*release, 0, 0, 0)[:3]
    return [e for e in ERAS if e.since <= v][-1]


__all__ = [
    "DSA_SCALED_PROFILE_SINCE",
    "ERAS",
    "MAMBA_AUTO_EXTRA_BUFFER_SINCE",
    "MAMBA_EXTRA_BUFFER_ARCHS",
    "PLATFORMS",
    "DefaultsEra",
    "DefaultsInputs",
    "Era0510",
    "Era0520",
    "Era056",
    "auto_mamba_strategy",
    "dsa_scaled_profile",
    "era_for",
    "pcg_capture_sizes",
    "rocm_aiter_factor",
]
