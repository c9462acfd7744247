"""Capacity planner: predict what SGLang will allocate for a launch command, before launching it.

Standard library only: shipped to the GPU host as ``module_utils/sglbench_hostlib/capacity.py`` (with
its sibling ``capacity_variants.py``) and used by the SGLang stand-in to produce its log numbers and failures.

Given the launch flags (an ``argparse.Namespace`` from ``sglang_args.parse_launch_args_or_raise``),
the target (and draft) ``config.json``, and the GPU's memory, :func:`plan` replays SGLang's startup
memory accounting (docs/capacity.md has every formula and where it comes from) in stages, each a
function over the previous stages' dataclasses:

1. inputs (:func:`resolve_inputs` -> :class:`Inputs`): flags, geometry, SGLang's defaults
   (``mem_fraction_static`` incl. the multimodal factor, ``chunked_prefill_size``, ``cuda_graph_max_bs``,
   context length, KV dtype, speculative draft-token count), free memory and weights;
2. budget (:func:`budget`): ``rest = (free_after_weights) - pre * (1 - mem_fraction_static)``;
3. pools: the per-token cell (:func:`kv_cell`), the Mamba state pool and speculative intermediate
   reservation of hybrid linear-attention models (:func:`mamba_pool`), KV tokens ``= rest // cell``
   page-rounded and capped by ``--max-total-tokens`` (:func:`kv_tokens`), the allocated pools as the log
   prints them (:func:`pools`) and the slack (:func:`slack`);
4. limits: ``max_running_requests`` as SGLang resolves it (:func:`running_requests`);
5. failure: the first error SGLang would hit, with its exact text (:func:`failure`);
6. recommendations: flag changes, each re-planned and shown to fit, least disruptive first
   (:func:`recommendations`, one search function per kind of change).

Wherever SGLang's eras differ, a stage asks the plan's accounting variant
(:mod:`capacity_variants`: ``A`` before 2026-05-27, ``B`` June-2026 main, ``C`` V4 / 0.5.16+);
the variant names, version mapping and source markers come from its registry.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from . import (
    capacity_variants,
    checkpoint,
    geometry,
    gpus,
    hf_cache,
    sglang_args,
    sglang_defaults,
    sglang_facts,
)

GiB = 1 << 30
MiB = 1 << 20
ACCOUNTING_VARIANTS = tuple(capacity_variants.VARIANTS)
DEFAULT_ACCOUNTING = capacity_variants.DEFAULT

# failure kinds and the failure record: owned by capacity_variants (the variants word the errors)
ZERO_REQUESTS = capacity_variants.ZERO_REQUESTS
NOT_ENOUGH_MEMORY = capacity_variants.NOT_ENOUGH_MEMORY
POOL_SMALLER_THAN_CONTEXT = capacity_variants.POOL_SMALLER_THAN_CONTEXT
BAD_CONFIG = capacity_variants.BAD_CONFIG
CONTEXT_TOO_LONG = capacity_variants.CONTEXT_TOO_LONG
Failure = capacity_variants.Failure

_SSM_DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}
_KV_FLAG_TO_TORCH = {
    "bf16": "torch.bfloat16",
    "bfloat16": "torch.bfloat16",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2",
    "fp4_e2m1": "torch.float4_e2m1fn_x2",
    "mxfp8": "torch.float8_e4m3fn",
}
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48


class PlanError(ValueError):
    """Input the planner cannot work with; ``field`` names the config key or flag to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass
class Recommendation:
    flags: dict[str, Any]
    max_total_num_tokens: int
    max_running_requests: int
    why: str
    rank: int = 0


@dataclass
class Plan:
    # inputs as resolved
    accounting: str
    model_class: str
    attention: str
    tp_size: int
    gpu_mem_gib: float
    pre_gib: float
    mem_fraction_static: float
    mem_fraction_static_source: str  # "flag" | "default"
    default_mem_fraction_static: float  # what SGLang would pick for this config
    context_len: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    cuda_graph_max_bs: int
    page_size: int
    kv_dtype: str
    mamba_ssm_dtype: str | None
    spec_algorithm: str | None
    num_draft_tokens: int
    requested_max_running_requests: int | None
    mamba_ratio: int | None
    overlap: bool
    weights_gib: float
    weights_source: str
    draft_weights_gib: float
    draft_weights_source: str
    # budget
    avail_after_weights_gib: float
    rest_gib: float  # KV + Mamba budget before the Mamba split
    cell_bytes: int
    target_cell_bytes: int
    draft_cell_bytes: int
    mamba_per_req_bytes: int
    spec_intermediate_reserved_gib: float
    mamba_budget_gib: float
    kv_budget_gib: float
    # results
    max_total_num_tokens: int
    max_running_requests: int
    mamba_slots: int | None
    full_max_total_num_tokens: int | None
    swa_max_total_num_tokens: int | None
    kv_cache_gib: float
    k_size_gib: float
    v_size_gib: float
    draft_k_size_gib: float
    draft_v_size_gib: float
    mamba_conv_gib: float
    mamba_ssm_gib: float
    spec_intermediate_ssm_gib: float
    spec_intermediate_conv_gib: float
    req_to_token_gib: float
    pool_end_avail_gib: float
    cuda_graph_gib: float
    available_gpu_mem_gib: float
    slack: dict[str, float]
    fits: bool
    failure: Failure | None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    # the SGLang release whose flags were checked, the releases that accept the command line
    # (when none was named), and the given flags by effect (sglang_args.capacity_effect)
    sglang_release: str | None = None
    accepted_by: list[str] = field(default_factory=list)
    flags_effect: dict[str, list[str]] = field(default_factory=dict)
    # set when the model's layout is planned from the nearest modelled one (geometry.APPROXIMATED_MODEL_TYPES)
    uncertainty: str | None = None
    # whose default rule filled in chunked prefill, CUDA-graph size and mem_fraction_static (sglang_defaults)
    defaults_rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key, value in list(d.items()):
            if isinstance(value, float):
                d[key] = round(value, 4)
        d["slack"] = {k: round(v, 4) for k, v in self.slack.items()}
        return d

    def explain(self) -> str:
        return explain(self)


# --- version -> accounting variant ---------------------------------------------------------------


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.strip().lstrip("v").replace("-", ".").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if not piece.isdigit():
            break
    if not parts:
        raise PlanError("--sglang-version", f"cannot read a version number from {version!r}")
    return tuple(parts)


def accounting_for_version(version: str) -> str:
    """Map an SGLang version string to an accounting variant (see docs/capacity.md).

    ``< 0.5.12`` → A (0.5.10.post1 is verified A; the Mamba joint solve landed on 2026-05-27),
    ``0.5.12 … 0.5.15`` → B (June/July 2026 main), ``>= 0.5.16`` → C (V4 configurator): the ``since``
    of each :mod:`capacity_variants` class.
    Release dates between 0.5.10 and 0.5.19 are inferred; when in doubt grep the installed tree
    (``state cache is too small`` → B/C; ``_handle_max_mamba_cache`` in KVCacheConfigurator → C).
    """
    return capacity_variants.for_version(_version_tuple(version)).name


def accounting_from_source(texts: list[str]) -> str | None:
    """Pick the variant from the installed SGLang's own source (more reliable than its version).

    ``texts``: contents of the installed ``srt`` files worth grepping (e.g.
    ``model_runner_kv_cache_mixin.py``, ``mem_cache/kv_cache_configurator.py``,
    ``managers/tp_worker.py``). None when no marker is found (the markers: each variant's
    ``source_markers``).
    """
    found = capacity_variants.from_source("\n".join(texts))
    return found.name if found is not None else None


def resolve_accounting(accounting: str | None, sglang_version: str | None = None) -> str:
    if accounting:
        acc = accounting.strip().upper()
        if acc not in capacity_variants.VARIANTS:
            known = ", ".join(capacity_variants.VARIANTS)
            raise PlanError("--accounting", f"must be one of {known}, got {accounting!r}")
        return acc
    if sglang_version:
        return accounting_for_version(sglang_version)
    return DEFAULT_ACCOUNTING


# --- SGLang defaults (§2.2): the rule of each release, in sglang_defaults ------------------------


def defaults_release(
    args: argparse.Namespace | None, variant: capacity_variants.AccountingVariant | None = None
) -> tuple[int, ...] | None:
    """The one release the command line was checked against (``--sglang-version``), else None.

    With an accounting variant older than that release (a build whose memory code predates the flags it
    is checked against, e.g. variant A with 0.5.23 flags), the last release of the variant's era."""
    accepted = list(getattr(args, "_sglbench_accepted_by", []) or [])
    release = getattr(args, "_sglbench_requested_release", None) or getattr(args, "_sglbench_release", None)
    if not release or len(accepted) > 1:
        return None
    version = _version_tuple(release)
    if variant is not None:
        later = [v.since for v in capacity_variants.VARIANTS.values() if v.since > variant.since]
        if later and (*version, 0, 0, 0)[:3] >= min(later):
            major, minor, patch = min(later)
            version = (major, minor, patch - 1) if patch else (major, minor - 1, 99)
    return version


def defaults_era(
    args: argparse.Namespace | None, variant: capacity_variants.AccountingVariant | None = None
) -> sglang_defaults.DefaultsEra:
    """The default rule of that release; without one, the 0.5.10-0.5.19 rule (the era of the default
    accounting variant)."""
    return sglang_defaults.era_for(defaults_release(args, variant))


def default_chunked_prefill_and_graph_bs(
    gpu_mem_mib: float | None, tp: int, era: sglang_defaults.DefaultsEra | None = None
) -> tuple[int, int]:
    return (era or sglang_defaults.era_for(None)).chunked_prefill_and_graph_bs(gpu_mem_mib, tp)


def vlm_factor(geo: geometry.Geometry) -> float:
    """``adjust_mem_fraction_for_vlm``: the vision tower's share, from its depth and width."""
    if not geo.multimodal:
        return 1.0
    hidden = geo.vit_hidden or 1152
    c = geo.vit_layers * hidden * hidden / (24 * 1024 * 1024)
    return 0.95 * min(max(1 - 0.1 * (c - 1), 0.8), 1.05)


def default_mem_fraction_static(
    era: sglang_defaults.DefaultsEra,
    cps: int,
    cgmb: int,
    d: sglang_defaults.DefaultsInputs,
    geo: geometry.Geometry,
) -> float:
    return era.mem_fraction_static(cps, cgmb, d) * vlm_factor(geo)


# --- helpers ---------------------------------------------------------------------------------------


def _arg(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    value = getattr(args, name, default)
    return default if value is None else value


def _geo(cfg: dict[str, Any], tp: int, *, is_draft: bool, what: str) -> geometry.Geometry:
    try:
        return geometry.geometry(cfg, tp, is_draft=is_draft)
    except geometry.GeometryError as exc:
        prefix = "draft config.json " if is_draft else ""
        raise PlanError(
            f"{prefix}{exc.field}" if exc.field != "tp_size" else "--tp-size", f"{exc.message} ({what})"
        ) from None


def _model_dtype(flag: str | None, geo: geometry.Geometry) -> str:
    """``--dtype``: auto keeps the config's dtype (float32 checkpoints run as bfloat16)."""
    if flag in (None, "auto"):
        return geo.model_dtype
    try:
        return geometry.config_dtype({"torch_dtype": flag})
    except geometry.GeometryError:
        raise PlanError("--dtype", f"unknown value {flag!r} (auto, bfloat16, float16, float32)") from None


def _kv_dtype(flag: str | None, geo: geometry.Geometry, model_dtype: str) -> str:
    if flag in (None, "auto"):
        return "torch.float8_e4m3fn" if geo.kv_quant_fp8 else model_dtype
    try:
        return _KV_FLAG_TO_TORCH[flag]
    except KeyError:
        raise PlanError("--kv-cache-dtype", f"unknown value {flag!r}") from None


def _spec_tokens(
    args: argparse.Namespace, algo: str | None, draft_cfg: dict[str, Any] | None, model_class: str
) -> int:
    """Tokens verified per step: the one rule, :meth:`sglang_facts.SpecAlgorithm.draft_tokens`."""
    if algo is None:
        return 0
    try:
        return sglang_facts.spec_algorithm(algo).draft_tokens(args, draft_cfg, model_class)
    except sglang_facts.SpecFlagError as exc:
        raise PlanError(exc.flag, exc.message) from None


def _mamba_ratio(disable_radix: bool, strategy: str, overlap: bool) -> int:
    if disable_radix:
        return 1
    if strategy in ("auto", "no_buffer"):
        return 3
    if strategy == "extra_buffer":
        return 5 if overlap else 4
    return 4  # extra_buffer_lazy


def _weights(
    given: float | None,
    model_dir: str | None,
    cfg: dict[str, Any] | None,
    geo: geometry.Geometry | None,
    tp: int,
    dtype_bytes: float,
    keep_mtp: bool,
) -> tuple[float, str]:
    if given is not None:
        if not 0 <= given < math.inf:  # NaN included
            raise PlanError("--weights-gib", f"must be a finite GiB figure >= 0, got {given}")
        return float(given), "given"
    if model_dir:
        found = checkpoint.weights_from_dir(model_dir, tp=tp, load_bytes=dtype_bytes, keep_mtp=keep_mtp)
        if found is not None:
            return found.per_rank_gib, found.source
    if cfg is None or geo is None:
        return 0.0, "none"
    est = checkpoint.estimate_from_params(
        geo.param_count_estimate, checkpoint.bytes_per_param(cfg, dtype_bytes), tp
    )
    return est.per_rank_gib, est.source


# --- stage 1: inputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """Parallelism and scheduler flags, with SGLang's defaults filled in (§2.2)."""

    tp: int
    pp: int
    attn_dp: int  # attention data-parallel ranks (1 unless --enable-dp-attention)
    requested_mrr: int | None  # --max-running-requests as given
    mrr: int | None  # as given, else the speculative default, else None
    cps: int  # chunked_prefill_size
    cgmb: int  # cuda_graph_max_bs
    max_prefill: int
    page: int
    ctx: int  # context length: the flag, else the model's
    overlap: bool
    disable_radix: bool
    strategy: str  # --mamba-scheduler-strategy


@dataclass(frozen=True)
class Speculation:
    """The speculative algorithm SGLang runs (NEXTN runs as EAGLE), its draft and verify width."""

    spec: sglang_facts.SpecAlgorithm | None
    algo: str | None
    dgeo: geometry.Geometry | None  # the draft model's geometry (None: no draft, or the MTP layers)
    draft_tokens: int  # tokens verified per step (0 without speculative decoding)

    @property
    def dflash_like(self) -> bool:
        return self.spec is not None and self.spec.kv_fold == sglang_facts.KV_FOLD_DRAFT_CELL


@dataclass(frozen=True)
class Memory:
    """GPU memory at startup, the static fraction and the weights (GiB per rank)."""

    gpu_mem_gib: float
    pre: float  # free at start
    mfs: float
    mfs_src: str
    mfs_default: float
    weights: float
    weights_src: str
    draft_weights: float
    draft_weights_src: str


@dataclass(frozen=True)
class Inputs:
    """Everything the later stages read: the launch as SGLang resolves it, before any budget."""

    variant: capacity_variants.AccountingVariant
    geo: geometry.Geometry
    launch: Launch
    speculation: Speculation
    model_dtype: str
    kv_dtype: str
    ssm_dtype: str | None  # Mamba SSM state dtype (hybrid linear-attention models only)
    memory: Memory
    cell_scaling: bool  # fold a DFLASH-like draft's KV into the per-token cell
    notes: list[str]

    @property
    def kv_bytes(self) -> float:
        return geometry.dtype_bytes(self.kv_dtype)


def _parallelism(args: argparse.Namespace, notes: list[str]) -> tuple[int, int, int]:
    """(tp, pp, attention dp) from the flags; notes the approximations."""
    tp = int(_arg(args, "tp_size", 1))
    pp = int(_arg(args, "pp_size", 1))
    dp = int(_arg(args, "dp_size", 1))
    dp_attn = bool(_arg(args, "enable_dp_attention", False))
    if tp < 1:
        raise PlanError("--tp-size", f"must be >= 1, got {tp}")
    if dp_attn and dp > 1:
        notes.append("dp-attention: heads are divided by tp/dp (attention TP); planned with full TP")
    if pp > 1:
        notes.append(f"pp_size={pp}: layers and weights divided evenly across {pp} stages (approximation)")
    return tp, pp, dp if dp_attn else 1


def resolve_speculation(
    args: argparse.Namespace, draft_config: dict[str, Any] | None, geo: geometry.Geometry, tp: int
) -> Speculation:
    """The speculative algorithm's table row, the draft geometry and the verify width."""
    algo = _arg(args, "speculative_algorithm")
    algo = str(algo).upper() if algo else None
    if algo is not None and algo not in sglang_args.SPEC_ALGORITHMS:
        raise PlanError(
            "--speculative-algorithm",
            f"{algo} is not an algorithm the planner models ({', '.join(sglang_args.SPEC_ALGORITHMS)})",
        )
    # the table row of the algorithm SGLang runs (NEXTN runs as EAGLE)
    spec = sglang_facts.spec_algorithm(sglang_facts.spec_algorithm(algo).runs_as) if algo else None
    algo = spec.name if spec is not None else None
    dgeo: geometry.Geometry | None = None
    if spec is not None and spec.uses_draft_model and (draft_config or not spec.mtp_fallback):
        if draft_config is None:
            raise PlanError(
                "--speculative-draft-model-path",
                f"--speculative-algorithm {algo} needs the draft model's config.json",
            )
        dgeo = _geo(draft_config, tp, is_draft=True, what="draft model")
    return Speculation(spec, algo, dgeo, _spec_tokens(args, algo, draft_config, geo.model_class))


def _defaults_inputs(
    args: argparse.Namespace,
    geo: geometry.Geometry,
    gpu_mem_gib: float,
    parallel: tuple[int, int, int],
    algo: str | None,
) -> sglang_defaults.DefaultsInputs:
    tp, pp, _ = parallel
    no_graph_flags = ("disable_piecewise_cuda_graph", "disable_prefill_cuda_graph", "enable_torch_compile")
    return sglang_defaults.DefaultsInputs(
        gpu_mem_mib=gpu_mem_gib * 1024.0,
        tp=tp,
        pp=pp,
        spec=algo,
        mla=geo.mla,
        multimodal=geo.multimodal,
        dp_attention=int(_arg(args, "dp_size", 1)) if _arg(args, "enable_dp_attention", False) else 0,
        requested_mrr=getattr(args, "max_running_requests", None),
        max_prefill=int(_arg(args, "max_prefill_tokens", 16384)),
        no_prefill_graph=any(bool(_arg(args, f, False)) for f in no_graph_flags)
        or bool(getattr(args, "lora_paths", None) or _arg(args, "enable_lora", False)),
        disable_cuda_graph=bool(_arg(args, "disable_cuda_graph", False)),
        model_class=geo.model_class,
        model_type=geo.model_type,
    )


def _mamba_strategy(
    args: argparse.Namespace,
    geo: geometry.Geometry,
    overlap: bool,
    page: int,
    variant: capacity_variants.AccountingVariant | None,
) -> str:
    """``--mamba-scheduler-strategy`` as given, or what ``auto`` resolves to in the release."""
    given = str(_arg(args, "mamba_scheduler_strategy", "auto"))
    if given != "auto" or not geo.hybrid_mamba:
        return given
    release = defaults_release(args, variant)
    if release is None:
        return given  # planned as no_buffer (releases before 0.5.14)
    return sglang_defaults.auto_mamba_strategy(release, geo.model_class, overlap, page)


def _launch(
    args: argparse.Namespace,
    geo: geometry.Geometry,
    gpu_mem_gib: float,
    parallel: tuple[int, int, int],
    algo: str | None,
    overlap: bool | None,
    notes: list[str],
    variant: capacity_variants.AccountingVariant | None = None,
) -> Launch:
    tp, pp, attn_dp = parallel
    requested_mrr = getattr(args, "max_running_requests", None)
    mrr = requested_mrr
    if algo and mrr is None:
        mrr = SPEC_DEFAULT_MAX_RUNNING_REQUESTS
        notes.append(f"speculative decoding: --max-running-requests defaults to {mrr}")
    era = defaults_era(args, variant)
    cps_def, cgmb_def = era.chunked_prefill_and_graph_bs(gpu_mem_gib * 1024.0, tp)
    cgmb_given = getattr(args, "cuda_graph_max_bs", None) is not None
    cgmb = int(_arg(args, "cuda_graph_max_bs", cgmb_def))
    cgmb = era.graph_bs(cgmb, _defaults_inputs(args, geo, gpu_mem_gib, parallel, algo), cgmb_given)
    ctx_flag = getattr(args, "context_length", None)
    overlap_on = bool(overlap) if overlap is not None else not _arg(args, "disable_overlap_schedule", False)
    page = int(_arg(args, "page_size", 1)) or 1
    return Launch(
        tp=tp,
        pp=pp,
        attn_dp=attn_dp,
        requested_mrr=requested_mrr,
        mrr=mrr,
        cps=int(_arg(args, "chunked_prefill_size", cps_def)),
        cgmb=cgmb,
        max_prefill=int(_arg(args, "max_prefill_tokens", 16384)),
        page=page,
        ctx=int(ctx_flag) if ctx_flag else geo.context_len,
        overlap=overlap_on,
        disable_radix=bool(_arg(args, "disable_radix_cache", False)),
        strategy=_mamba_strategy(args, geo, overlap_on, page, variant),
    )


def _mem_fraction(
    args: argparse.Namespace,
    launch: Launch,
    gpu_mem_gib: float,
    algo: str | None,
    geo: geometry.Geometry,
    platform: str = "cuda",
    notes: list[str] | None = None,
    variant: capacity_variants.AccountingVariant | None = None,
) -> tuple[float, str, float]:
    """(mem_fraction_static, "flag" | "default", SGLang's default for this config)."""
    mfs_flag = getattr(args, "mem_fraction_static", None)
    parallel = (launch.tp, launch.pp, launch.attn_dp)
    d = _defaults_inputs(args, geo, gpu_mem_gib, parallel, algo)
    mfs_default = default_mem_fraction_static(defaults_era(args, variant), launch.cps, launch.cgmb, d, geo)
    backend = _arg(args, "attention_backend")
    if mfs_flag is None:
        factor = sglang_defaults.rocm_aiter_factor(platform, backend, geo.mla, launch.ctx, explicit=False)
        _note_rocm(factor, notes)
        return mfs_default * factor, "default", mfs_default * factor
    mfs = float(mfs_flag)
    if not 0 < mfs < 1:
        raise PlanError("--mem-fraction-static", f"must be in (0, 1), got {mfs}")
    factor = sglang_defaults.rocm_aiter_factor(platform, backend, geo.mla, launch.ctx, explicit=True)
    _note_rocm(factor, notes)
    return (
        mfs * factor,
        "flag",
        mfs_default
        * sglang_defaults.rocm_aiter_factor(platform, backend, geo.mla, launch.ctx, explicit=False),
    )


def _note_rocm(factor: float, notes: list[str] | None) -> None:
    if factor != 1.0 and notes is not None:
        notes.append(
            f"ROCm with the aiter attention backend and a context above 8192: SGLang multiplies "
            f"mem_fraction_static by {factor} (pass --attention-backend triton to keep it)"
        )


def _ssm_dtype(args: argparse.Namespace, geo: geometry.Geometry) -> str | None:
    """Mamba state dtype: env > flag > config > float32 (None for models without Mamba state)."""
    if not geo.hybrid_mamba:
        return None
    ssm_dtype = (
        os.environ.get("SGLANG_MAMBA_SSM_DTYPE")
        or _arg(args, "mamba_ssm_dtype")
        or geo.mamba_ssm_dtype_config
        or "float32"
    )
    ssm_dtype = str(ssm_dtype).replace("torch.", "")
    if ssm_dtype not in _SSM_DTYPE_BYTES:
        raise PlanError("mamba_ssm_dtype", f"unknown dtype {ssm_dtype!r} (float32, bfloat16, float16)")
    return ssm_dtype


@dataclass(frozen=True)
class WeightSources:
    """Where the weight figures come from: given, a checkpoint directory, or the config."""

    weights_gib: float | None
    draft_weights_gib: float | None
    model_dir: str | None
    draft_model_dir: str | None


def _memory(
    gpu_mem_gib: float,
    free_gib: float | None,
    mfs: tuple[float, str, float],
    sources: WeightSources,
    configs: tuple[dict[str, Any], dict[str, Any] | None],
    geo: geometry.Geometry,
    sp: Speculation,
    tp_pp: tuple[int, int],
    model_dtype: str,
    notes: list[str],
) -> Memory:
    model_config, draft_config = configs
    tp, pp = tp_pp
    pre = float(free_gib) if free_gib is not None else gpus.default_free_gib(gpu_mem_gib, tp)
    if not 0 < pre <= gpu_mem_gib + 1e-6:  # NaN included
        raise PlanError("--free-gib", f"must be in (0, gpu memory {gpu_mem_gib:.2f}], got {pre}")
    dtype_bytes = geometry.dtype_bytes(model_dtype)
    keep_mtp = sp.spec is not None and sp.spec.mtp_fallback and draft_config is None
    w_gib, w_src = _weights(
        sources.weights_gib, sources.model_dir, model_config, geo, tp * pp, dtype_bytes, keep_mtp=keep_mtp
    )
    dw_gib, dw_src = 0.0, "none"
    if sp.spec is not None and sp.spec.uses_draft_model:
        dw_gib, dw_src = _weights(
            sources.draft_weights_gib, sources.draft_model_dir, draft_config, sp.dgeo, tp, dtype_bytes, False
        )
    if w_src == "estimate":
        notes.append(
            "target weights are an ESTIMATE from config geometry (no checkpoint on disk); "
            "pass --weights-gib for a firm figure"
        )
    if dw_src == "estimate":
        notes.append("draft weights are an ESTIMATE from config geometry; pass --draft-weights-gib")
    return Memory(gpu_mem_gib, pre, *mfs, w_gib, w_src, dw_gib, dw_src)


def resolve_inputs(
    args: argparse.Namespace,
    configs: tuple[dict[str, Any], dict[str, Any] | None],
    gpu_mem_gib: float,
    free_gib: float | None,
    sources: WeightSources,
    variant: capacity_variants.AccountingVariant,
    *,
    overlap: bool | None = None,
    dflash_cell_scaling: bool | None = None,
    platform: str = "cuda",
) -> Inputs:
    """Stage 1: flags, configs and SGLang's defaults resolved; bad input raises :class:`PlanError`."""
    if gpu_mem_gib is None or not 0 < gpu_mem_gib < math.inf:  # NaN included
        raise PlanError("--gpu-mem-gib", f"must be a positive GiB figure, got {gpu_mem_gib!r}")
    if platform not in sglang_defaults.PLATFORMS:
        raise PlanError(
            "--platform", f"must be one of {', '.join(sglang_defaults.PLATFORMS)}, got {platform!r}"
        )
    notes: list[str] = []
    parallel = _parallelism(args, notes)
    geo = _geo(configs[0], parallel[0], is_draft=False, what="target model")
    sp = resolve_speculation(args, configs[1], geo, parallel[0])
    launch = _launch(args, geo, gpu_mem_gib, parallel, sp.algo, overlap, notes, variant)
    mfs = _mem_fraction(args, launch, gpu_mem_gib, sp.algo, geo, platform, notes, variant)
    model_dtype = _model_dtype(getattr(args, "dtype", None), geo)
    kv_dtype = _kv_dtype(getattr(args, "kv_cache_dtype", None), geo, model_dtype)
    ssm_dtype = _ssm_dtype(args, geo)
    memory = _memory(
        gpu_mem_gib, free_gib, mfs, sources, configs, geo, sp, (launch.tp, launch.pp), model_dtype, notes
    )
    scaling = dflash_cell_scaling if dflash_cell_scaling is not None else variant.default_dflash_cell_scaling
    return Inputs(variant, geo, launch, sp, model_dtype, kv_dtype, ssm_dtype, memory, scaling, notes)


# --- stage 2: budget --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """``rest = (free after weights) - pre * (1 - mem_fraction_static)`` (GiB)."""

    post: float  # free after the weights (and, when the variant counts it, the draft)
    reserved_by_mfs: float  # kept back by (1 - mem_fraction_static)
    rest: float  # KV + Mamba budget before the Mamba split


def budget(inp: Inputs) -> Budget:
    m = inp.memory
    post = m.pre - m.weights - inp.variant.static_draft_weights_gib(m.draft_weights)
    reserved_by_mfs = m.pre * (1 - m.mfs)
    return Budget(post, reserved_by_mfs, post - reserved_by_mfs)


# --- stage 3: pools ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """Bytes per token of ``max_total_num_tokens``: the target's, and with the draft folded in."""

    target: float
    folded: float
    draft: int
    swa_ratio: float  # --swa-full-tokens-ratio for hybrid sliding-window targets, else 0


def kv_cell(args: argparse.Namespace, inp: Inputs) -> Cell:
    """The per-token KV cell (§2.4); the variant says how a draft's KV is folded in."""
    geo, sp, kv_bytes = inp.geo, inp.speculation, inp.kv_bytes
    if geo.attention == "hybrid_swa":
        swa_ratio = float(_arg(args, "swa_full_tokens_ratio", 0.8))
        per = geo.full_layer_bytes_per_token(kv_bytes)
        target = per * geo.kv_layers + swa_ratio * per * geo.swa_layers
    else:
        swa_ratio = 0.0
        scaled = sglang_defaults.dsa_scaled_profile(defaults_release(args, inp.variant))
        target = float(geo.cell_bytes(kv_bytes, inp.kv_dtype, scaled))
    if inp.launch.pp > 1:
        target /= inp.launch.pp
    dgeo = sp.dgeo
    draft = dgeo.cell_bytes(kv_bytes, inp.kv_dtype) if dgeo is not None else 0
    if dgeo is not None and dgeo.mla:
        draft = 0  # MTP-like drafts share the target's latent layout; counted by layer ratio
    folded = target
    if sp.dflash_like and dgeo is not None and inp.cell_scaling:
        folded = inp.variant.dflash_cell(target, draft, geo.kv_layers, dgeo.num_layers)
    elif sp.spec is not None and sp.spec.kv_fold == sglang_facts.KV_FOLD_LAYER_RATIO:
        draft_layers = dgeo.num_layers if dgeo is not None else 1
        by_ratio = inp.variant.layer_ratio_cell(target, geo.kv_layers, draft_layers)
        folded = target if by_ratio is None else by_ratio
    return Cell(target, folded, draft, swa_ratio)


@dataclass(frozen=True)
class MambaPool:
    """The Mamba state pool and the speculative intermediate reservation (hybrid models), and the KV
    budget left after them; for other models only ``kv_budget_gib`` (= the whole budget) is set."""

    per_req_bytes: int = 0
    ratio: int | None = None
    slots: int | None = None
    spec_reserved_gib: float = 0.0
    budget_gib: float = 0.0
    kv_budget_gib: float = 0.0
    failure: Failure | None = None


def mamba_pool(args: argparse.Namespace, inp: Inputs, rest_gib: float) -> MambaPool:
    """The hybrid Mamba split (§2.5), as the variant solves it."""
    geo, launch, sp = inp.geo, inp.launch, inp.speculation
    if not geo.hybrid_mamba or geo.mamba is None:
        return MambaPool(kv_budget_gib=rest_gib)
    P = geo.mamba.per_req_bytes(_SSM_DTYPE_BYTES[inp.ssm_dtype or "float32"])
    if launch.pp > 1:
        P = P // launch.pp
    ratio = _mamba_ratio(launch.disable_radix, launch.strategy, launch.overlap)
    split = inp.variant.mamba_split(
        capacity_variants.MambaInputs(
            rest_bytes=rest_gib * GiB,
            per_req_bytes=P,
            ratio=ratio,
            full_memory_ratio=float(_arg(args, "mamba_full_memory_ratio", 0.9)),
            explicit_slots=getattr(args, "max_mamba_cache_size", None),
            max_running_requests=launch.mrr,
            attn_dp=launch.attn_dp,
            disable_radix=launch.disable_radix,
            speculative=bool(sp.algo),
            draft_tokens=sp.draft_tokens if sp.algo else 0,
        )
    )
    return MambaPool(
        P,
        ratio,
        split.slots,
        split.spec_reserved_gib,
        split.mamba_budget_gib,
        split.kv_budget_bytes / GiB,
        split.failure,
    )


@dataclass(frozen=True)
class Tokens:
    """``max_total_num_tokens`` (and the full/SWA split of hybrid sliding-window targets)."""

    total: int
    full: int | None
    swa: int | None
    warnings: list[str]


def kv_tokens(args: argparse.Namespace, inp: Inputs, cell: Cell, kv_budget_gib: float) -> Tokens:
    """KV tokens ``= budget // cell``, capped by ``--max-total-tokens``, rounded to the page."""
    page = inp.launch.page
    warnings: list[str] = []
    tokens = int(int(kv_budget_gib * GiB) // cell.folded) if kv_budget_gib > 0 else 0
    full = swa = None
    if inp.geo.attention == "hybrid_swa":
        full = tokens // page * page
        swa = int(full * cell.swa_ratio) // page * page
    max_total_tokens = getattr(args, "max_total_tokens", None)
    if max_total_tokens is not None and tokens > 0:
        if max_total_tokens > tokens:
            warnings.append(
                f"--max-total-tokens {max_total_tokens} is above the profiled {tokens}; "
                "SGLang uses the profiled value"
            )
        tokens = min(tokens, int(max_total_tokens))
    return Tokens(tokens // page * page, full, swa, warnings)


@dataclass(frozen=True)
class Pools:
    """What SGLang allocates, as its log lines print it (GiB)."""

    k: float
    v: float
    draft_k: float
    draft_v: float
    mamba_conv: float
    mamba_ssm: float
    intermediate_ssm: float
    intermediate_conv: float
    req_to_token: float

    @property
    def target_state(self) -> float:
        """KV and Mamba state of the target, intermediate states included."""
        return (
            self.k
            + self.v
            + self.mamba_conv
            + self.mamba_ssm
            + self.intermediate_ssm
            + self.intermediate_conv
        )

    @property
    def draft_kv(self) -> float:
        return self.draft_k + self.draft_v


def _target_kv_sizes(inp: Inputs, tokens: Tokens) -> tuple[float, float]:
    """(K, V) of the target's KV pool, with SGLang's extra page."""
    geo, page, kv_bytes = inp.geo, inp.launch.page, inp.kv_bytes
    if geo.mla:
        # one "KV size" pool: the (scaled) latent, plus the DSA indexer key where there is one
        pg = tokens.total + page
        per_layer = geo.mla_dim_bytes(kv_bytes, inp.kv_dtype) + geo.indexer_bytes_per_layer()
        return pg * per_layer * geo.kv_layers / GiB, 0.0
    full_pg = (tokens.full if tokens.full is not None else tokens.total) + page
    k = full_pg * geo.kv_heads_per_rank * geo.head_dim * geo.kv_layers * kv_bytes / GiB
    v = full_pg * geo.kv_heads_per_rank * geo.v_head_dim * geo.kv_layers * kv_bytes / GiB
    if tokens.swa is not None:
        swa_pg = tokens.swa + page
        k += swa_pg * geo.kv_heads_per_rank * geo.head_dim * geo.swa_layers * kv_bytes / GiB
        v += swa_pg * geo.kv_heads_per_rank * geo.v_head_dim * geo.swa_layers * kv_bytes / GiB
    if inp.launch.pp > 1:
        k /= inp.launch.pp
        v /= inp.launch.pp
    return k, v


def _draft_kv_sizes(inp: Inputs, tokens: Tokens) -> tuple[float, float]:
    dgeo, kv_bytes = inp.speculation.dgeo, inp.kv_bytes
    pg = tokens.total + inp.launch.page
    if dgeo is None:
        return 0.0, 0.0
    if dgeo.mla:
        return pg * dgeo.mla_dim_bytes(kv_bytes, inp.kv_dtype) / GiB, 0.0
    dk = pg * dgeo.kv_heads_per_rank * dgeo.head_dim * dgeo.num_layers * kv_bytes / GiB
    dv = pg * dgeo.kv_heads_per_rank * dgeo.v_head_dim * dgeo.num_layers * kv_bytes / GiB
    return dk, dv


def _mamba_sizes(inp: Inputs, mamba: MambaPool, requests: int) -> tuple[float, float, float, float]:
    """(conv, SSM, intermediate SSM, intermediate conv): the Mamba pools with their +1 slot and the
    speculative intermediate states for ``resolved max_running_requests + 1``."""
    if mamba.slots is None or inp.geo.mamba is None:
        return 0.0, 0.0, 0.0, 0.0
    conv_req = inp.geo.mamba.conv_bytes_per_req(2.0)
    ssm_req = inp.geo.mamba.ssm_bytes_per_req(_SSM_DTYPE_BYTES[inp.ssm_dtype or "float32"])
    conv = (mamba.slots + 1) * conv_req / GiB
    ssm = (mamba.slots + 1) * ssm_req / GiB
    if not inp.speculation.algo:
        return conv, ssm, 0.0, 0.0
    D = inp.speculation.draft_tokens
    return conv, ssm, (requests + 1) * D * ssm_req / GiB, (requests + 1) * D * conv_req / GiB


def pools(inp: Inputs, tokens: Tokens, mamba: MambaPool, requests: int) -> Pools:
    k, v = _target_kv_sizes(inp, tokens)
    dk, dv = _draft_kv_sizes(inp, tokens)
    conv, ssm, iss, icv = _mamba_sizes(inp, mamba, requests)
    req_to_token = (requests + 1) * (inp.launch.ctx + 4 + inp.speculation.draft_tokens) * 4 / GiB
    return Pools(k, v, dk, dv, conv, ssm, iss, icv, req_to_token)


# --- stage 4: limits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requests:
    """``max_running_requests`` as SGLang resolves it (§2.7)."""

    n: int
    warnings: list[str]


def running_requests(inp: Inputs, tokens: int, mamba: MambaPool) -> Requests:
    ctx, mrr, attn_dp = inp.launch.ctx, inp.launch.mrr, inp.launch.attn_dp
    estimated = min(max(int(tokens / ctx * 512), 2048), 4096) if ctx > 0 else 2048
    if mrr is not None:
        n = inp.variant.running_requests(mrr // attn_dp, tokens, estimated)
    else:
        n = min(estimated, tokens // 2)
    if mamba.slots is not None and mamba.ratio is not None:
        n = min(n, mamba.slots // mamba.ratio)
    n = max(n, 0)
    warnings: list[str] = []
    if mrr is not None and 0 < n < mrr:
        why = (
            f"Mamba state slots ({mamba.slots} // {mamba.ratio})"
            if (mamba.slots is not None and mamba.ratio and n == mamba.slots // mamba.ratio)
            else "token capacity"
        )
        warnings.append(f"max_running_requests resolves to {n}, below the requested {mrr} (capped by {why})")
    return Requests(n, warnings)


@dataclass(frozen=True)
class Slack:
    """Where the memory outside the static pools goes (GiB); ``breakdown`` is ``Plan.slack``."""

    breakdown: dict[str, float]
    pool_end: float  # SGLang's "Memory pool end" free memory
    cuda_graph: float
    available_after: float  # free after the draft (when loaded from the slack) and CUDA graphs

    @property
    def left_for_activations(self) -> float:
        return self.breakdown["left_for_activations_gib"]


def slack(args: argparse.Namespace, inp: Inputs, b: Budget, p: Pools) -> Slack:
    launch, in_static = inp.launch, inp.variant.draft_in_static_pool
    target_pools = p.target_state + p.req_to_token + (p.draft_kv if in_static else 0.0)
    pool_end = b.post - target_pools
    graphs = 2 if inp.speculation.algo else 1
    cuda_graph = 0.0 if _arg(args, "disable_cuda_graph", False) else launch.cgmb * 2 / 1024 * graphs
    activation_reserve = max(launch.cps if launch.cps > 0 else launch.max_prefill, 2048) * 1.5 / 1024
    draft_weights_from_slack = 0.0 if in_static else inp.memory.draft_weights
    draft_kv_from_slack = 0.0 if in_static else p.draft_kv
    draft_from_slack = draft_weights_from_slack + draft_kv_from_slack
    unused = max(b.rest - p.target_state - (p.draft_kv if in_static else 0.0), 0.0)
    left = b.reserved_by_mfs + unused - draft_from_slack - p.req_to_token - cuda_graph
    breakdown = {
        "reserved_by_mem_fraction_gib": b.reserved_by_mfs,
        "unallocated_budget_gib": unused,
        "draft_weights_gib": draft_weights_from_slack,
        "draft_kv_gib": draft_kv_from_slack,
        "req_to_token_gib": p.req_to_token,
        "cuda_graph_gib": cuda_graph,
        "left_for_activations_gib": left,
        "sglang_activation_heuristic_gib": activation_reserve,
    }
    return Slack(breakdown, pool_end, cuda_graph, pool_end - draft_from_slack - cuda_graph)


# --- stage 5: failure ----------------------------------------------------------------------------------


def _context_failure(args: argparse.Namespace, inp: Inputs) -> Failure | None:
    ctx_flag = getattr(args, "context_length", None)
    if (
        ctx_flag
        and int(ctx_flag) > inp.geo.context_len
        and os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() not in ("1", "true")
    ):
        return Failure(
            CONTEXT_TOO_LONG,
            f"User-specified context_length ({inp.launch.ctx}) is greater than the derived context_length "
            f"({inp.geo.context_len}). This may lead to incorrect model outputs or CUDA errors. To allow "
            "overriding, please set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
            "ValueError",
        )
    return None


def _spec_radix_failure(inp: Inputs) -> Failure | None:
    """Speculative decoding on a hybrid model with radix cache needs the extra_buffer strategy."""
    launch = inp.launch
    if not (inp.geo.hybrid_mamba and inp.geo.mamba is not None and inp.speculation.algo):
        return None
    if launch.disable_radix or launch.strategy not in ("auto", "no_buffer"):
        return None
    return Failure(
        BAD_CONFIG,
        f"Speculative decoding for {inp.geo.model_class} is not compatible with radix cache when using "
        "--mamba-scheduler-strategy no_buffer. To use radix cache with speculative decoding, please "
        "use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.",
        "ValueError",
    )


def _limit_failures(inp: Inputs, tokens: int, requests: int, mamba: MambaPool) -> list[Failure | None]:
    """The checks on the resolved token and request counts, in SGLang's order."""
    ctx, mfs = inp.launch.ctx, inp.memory.mfs
    out: list[Failure | None] = []
    if tokens <= 0:
        out.append(
            Failure(
                NOT_ENOUGH_MEMORY,
                f"Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                f"mem_fraction_static={mfs:g}",
                "RuntimeError",
            )
        )
        return out
    if requests <= 0:
        out.append(inp.variant.zero_requests_failure(mamba.slots or 0, mamba.ratio or 1))
    if min(ctx, tokens) - 6 <= 0:
        out.append(Failure(NOT_ENOUGH_MEMORY, "Memory pool size is too small", "AssertionError"))
    if tokens < ctx:
        out.append(
            Failure(
                POOL_SMALLER_THAN_CONTEXT,
                f"KV pool holds {tokens} tokens, fewer than context_len={ctx}: SGLang starts, but rejects "
                f"requests longer than {min(ctx, tokens) - 6} tokens (max_req_input_len)",
                "none",
                "SGLang itself starts; a request needing the full context cannot be served",
            )
        )
    return out


def failure(
    args: argparse.Namespace, inp: Inputs, b: Budget, mamba: MambaPool, tokens: int, requests: int
) -> Failure | None:
    """The first failure SGLang would hit, with its exact text (None: it starts and serves)."""
    checks = [
        _context_failure(args, inp),
        _spec_radix_failure(inp),
        mamba.failure,
        inp.variant.kv_budget_failure(mamba.kv_budget_gib, b.post, inp.memory.pre, inp.memory.mfs),
        *_limit_failures(inp, tokens, requests, mamba),
    ]
    first = next((f for f in checks if f is not None), None)
    if first is not None and first.kind == NOT_ENOUGH_MEMORY and not first.explanation:
        first.explanation = (
            f"after the weights {b.post:.2f} GiB are free; "
            f"(1 - mem_fraction_static) x {inp.memory.pre:.2f} = "
            f"{b.reserved_by_mfs:.2f} GiB is kept back, leaving {b.rest:.2f} GiB for KV and state"
            + (" (the weights alone do not fit at this TP size)" if b.post <= 0 else "")
        )
    return first


def _activation_warning(sl: Slack, fail: Failure | None, tokens: int) -> list[str]:
    left = sl.left_for_activations
    if left < 1.0 and fail is None and tokens > 0:
        return [
            f"only {left:.2f} GiB left for activations after draft weights/KV and CUDA graphs: expect an OOM "
            "during CUDA-graph capture or the first large prefill; lower --mem-fraction-static"
        ]
    return []


# --- the planner -----------------------------------------------------------------------------------


def plan(
    args: argparse.Namespace,
    model_config: dict[str, Any],
    draft_config: dict[str, Any] | None,
    gpu_mem_gib: float,
    free_gib: float | None = None,
    weights_gib: float | None = None,
    draft_weights_gib: float | None = None,
    accounting: str | None = None,
    model_dir: str | None = None,
    draft_model_dir: str | None = None,
    *,
    overlap: bool | None = None,
    dflash_cell_scaling: bool | None = None,
    recommend: bool = True,
    platform: str = "cuda",
) -> Plan:
    """Predict SGLang's memory pools for one launch (see module docstring).

    ``gpu_mem_gib``: capacity per GPU (nvidia-smi memory.total / 1024). ``free_gib``: free memory
    per GPU when SGLang starts (default: capacity minus :data:`gpus.DEFAULT_CONTEXT_OVERHEAD_GIB`).
    ``weights_gib``/``draft_weights_gib``: per-rank weight memory (default: from the checkpoint in
    ``model_dir``/``draft_model_dir``, else an estimate from the config geometry).
    ``overlap``: force the overlap scheduler on/off for the Mamba ratio (default: on unless
    ``--disable-overlap-schedule``). ``dflash_cell_scaling``: fold the DFLASH draft KV into the target
    cell (default: no for A, yes for B/C).
    """
    variant = capacity_variants.variant(resolve_accounting(accounting))
    sources = WeightSources(weights_gib, draft_weights_gib, model_dir, draft_model_dir)
    inp = resolve_inputs(
        args,
        (model_config, draft_config),
        gpu_mem_gib,
        free_gib,
        sources,
        variant,
        overlap=overlap,
        dflash_cell_scaling=dflash_cell_scaling,
        platform=platform,
    )
    p = _assemble(args, inp)
    if recommend and p.failure is not None:
        opts = dict(
            free_gib=inp.memory.pre,
            weights_gib=inp.memory.weights,
            draft_weights_gib=inp.memory.draft_weights,
            accounting=variant.name,
            overlap=overlap,
            dflash_cell_scaling=dflash_cell_scaling,
            platform=platform,
        )
        p.recommendations = recommendations(args, model_config, draft_config, gpu_mem_gib, p, opts)
    return p


def _assemble(args: argparse.Namespace, inp: Inputs) -> Plan:
    """Stages 2-5 over resolved inputs: budget, pools, limits, failure; the :class:`Plan`."""
    b = budget(inp)
    cell = kv_cell(args, inp)
    notes = list(inp.notes)
    if inp.speculation.dflash_like and not inp.cell_scaling:
        notes.append(
            "DFLASH draft KV is not folded into the target cell (variant A as observed); "
            "it is allocated from the slack"
        )
    mamba = mamba_pool(args, inp, b.rest)
    tokens = kv_tokens(args, inp, cell, mamba.kv_budget_gib)
    requests = running_requests(inp, tokens.total, mamba)
    allocated = pools(inp, tokens, mamba, requests.n)
    sl = slack(args, inp, b, allocated)
    fail = failure(args, inp, b, mamba, tokens.total, requests.n)
    warnings = tokens.warnings + requests.warnings + _activation_warning(sl, fail, tokens.total)
    if inp.geo.uncertainty:
        warnings.insert(0, f"approximate plan: {inp.geo.uncertainty}; check it against a real startup log")
    dgeo = inp.speculation.dgeo
    notes += inp.geo.notes + (dgeo.notes if dgeo else [])
    return _to_plan(args, inp, (b, cell, mamba, tokens, requests.n, allocated, sl), fail, warnings, notes)


def _to_plan(
    args: argparse.Namespace,
    inp: Inputs,
    stages: tuple[Budget, Cell, MambaPool, Tokens, int, Pools, Slack],
    fail: Failure | None,
    warnings: list[str],
    notes: list[str],
) -> Plan:
    b, cell, mamba, tokens, n, p, sl = stages
    launch, sp, m, geo = inp.launch, inp.speculation, inp.memory, inp.geo
    return Plan(
        accounting=inp.variant.name,
        model_class=geo.model_class,
        attention=geo.attention,
        tp_size=launch.tp,
        gpu_mem_gib=m.gpu_mem_gib,
        pre_gib=m.pre,
        mem_fraction_static=m.mfs,
        mem_fraction_static_source=m.mfs_src,
        default_mem_fraction_static=m.mfs_default,
        context_len=launch.ctx,
        chunked_prefill_size=launch.cps,
        max_prefill_tokens=launch.max_prefill,
        cuda_graph_max_bs=launch.cgmb,
        page_size=launch.page,
        kv_dtype=inp.kv_dtype,
        mamba_ssm_dtype=f"torch.{inp.ssm_dtype}" if inp.ssm_dtype else None,
        spec_algorithm=sp.algo,
        num_draft_tokens=sp.draft_tokens,
        requested_max_running_requests=launch.requested_mrr,
        mamba_ratio=mamba.ratio,
        overlap=launch.overlap,
        weights_gib=m.weights,
        weights_source=m.weights_src,
        draft_weights_gib=m.draft_weights,
        draft_weights_source=m.draft_weights_src,
        avail_after_weights_gib=m.pre - m.weights,
        rest_gib=b.rest,
        cell_bytes=round(cell.folded),
        target_cell_bytes=round(cell.target),
        draft_cell_bytes=cell.draft,
        mamba_per_req_bytes=mamba.per_req_bytes,
        spec_intermediate_reserved_gib=mamba.spec_reserved_gib,
        mamba_budget_gib=mamba.budget_gib,
        kv_budget_gib=mamba.kv_budget_gib,
        max_total_num_tokens=max(tokens.total, 0),
        max_running_requests=n,
        mamba_slots=mamba.slots,
        full_max_total_num_tokens=tokens.full,
        swa_max_total_num_tokens=tokens.swa,
        kv_cache_gib=p.k + p.v,
        k_size_gib=p.k,
        v_size_gib=p.v,
        draft_k_size_gib=p.draft_k,
        draft_v_size_gib=p.draft_v,
        mamba_conv_gib=p.mamba_conv,
        mamba_ssm_gib=p.mamba_ssm,
        spec_intermediate_ssm_gib=p.intermediate_ssm,
        spec_intermediate_conv_gib=p.intermediate_conv,
        req_to_token_gib=p.req_to_token,
        pool_end_avail_gib=sl.pool_end,
        cuda_graph_gib=sl.cuda_graph,
        available_gpu_mem_gib=sl.available_after,
        slack=sl.breakdown,
        fits=fail is None,
        failure=fail,
        warnings=warnings,
        notes=notes,
        sglang_release=getattr(args, "_sglbench_release", None),
        accepted_by=list(getattr(args, "_sglbench_accepted_by", [])),
        flags_effect=sglang_args.capacity_effect(args),
        uncertainty=geo.uncertainty,
        defaults_rule=defaults_era(args, inp.variant).name,
    )


# --- stage 6: recommendations ----------------------------------------------------------------------


def _replan(
    args: argparse.Namespace,
    changes: dict[str, Any],
    model_config: dict[str, Any],
    draft_config: dict[str, Any] | None,
    gpu_mem_gib: float,
    opts: dict[str, Any],
) -> Plan | None:
    new = copy.copy(args)
    for dest, value in changes.items():
        setattr(new, dest, value)
    try:
        return plan(new, model_config, draft_config, gpu_mem_gib, recommend=False, **opts)
    except PlanError:
        return None


def _flag(dest: str, args: argparse.Namespace | None = None) -> str:
    """The flag for a planner field, spelled as the release the command line was parsed for."""
    return sglang_args.spell(args, dest)


@dataclass
class _Search:
    """One recommendation search: the failing plan, what it is re-planned with, what was found."""

    args: argparse.Namespace
    model_config: dict[str, Any]
    draft_config: dict[str, Any] | None
    gpu_mem_gib: float
    base: Plan
    opts: dict[str, Any]
    want: int | None  # the request count asked for (or the speculative default)
    out: list[Recommendation] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    @property
    def kind(self) -> str | None:
        return self.base.failure.kind if self.base.failure else None

    @property
    def hybrid(self) -> bool:
        return self.base.mamba_slots is not None

    def replan(self, changes: dict[str, Any], args: argparse.Namespace | None = None) -> Plan | None:
        return _replan(
            args or self.args, changes, self.model_config, self.draft_config, self.gpu_mem_gib, self.opts
        )

    def consider(self, changes: dict[str, Any], why: str, rank: int) -> Plan | None:
        """Re-plan with ``changes``; keep them (once) when the plan fits. The fitting plan, else None."""
        cand = self.replan(changes)
        if cand is None or not cand.fits:
            return None
        flags = {_flag(k, self.args): v for k, v in changes.items() if v is not None}
        key = json.dumps(flags, sort_keys=True, default=str)
        if key in self.seen:
            return cand
        self.seen.add(key)
        self.out.append(
            Recommendation(flags, cand.max_total_num_tokens, cand.max_running_requests, why, rank)
        )
        return cand


def _context_too_long_fix(s: _Search) -> list[Recommendation]:
    geo_ctx = geometry.derive_context_length(geometry.text_config(s.model_config))
    cand = s.replan({"context_length": geo_ctx})
    if cand and cand.fits:
        return [
            Recommendation(
                {"--context-length": geo_ctx},
                cand.max_total_num_tokens,
                cand.max_running_requests,
                "the model's own context length",
                8,
            )
        ]
    return []


def _bad_config_fixes(s: _Search) -> None:
    """Spec decoding + radix cache on a hybrid model: the strategy fix or no radix cache, each with
    the follow-up fix it needs when it still fails alone (e.g. pool < context)."""
    fixes = [
        (
            {"mamba_scheduler_strategy": "extra_buffer"},
            "spec decoding on a hybrid model with radix cache needs the extra_buffer Mamba strategy",
            0,
        ),
        ({"disable_radix_cache": True}, "or turn the radix cache off (1 Mamba slot per request)", 7),
    ]
    for changes, why, rank in fixes:
        if s.consider(changes, why, rank) is not None:
            continue
        fixed = copy.copy(s.args)
        for dest, value in changes.items():
            setattr(fixed, dest, value)
        cand = s.replan({}, fixed)
        if cand is None or cand.failure is None or cand.failure.kind == BAD_CONFIG:
            continue
        follow = recommendations(fixed, s.model_config, s.draft_config, s.gpu_mem_gib, cand, s.opts)
        if follow:
            first = follow[0]
            merged = {_flag(k, s.args): v for k, v in changes.items()}
            merged.update(first.flags)
            s.out.append(
                Recommendation(
                    merged,
                    first.max_total_num_tokens,
                    first.max_running_requests,
                    f"{why}; then {first.why}",
                    rank,
                )
            )


def _raise_mem_fraction(s: _Search) -> None:
    """The smallest --mem-fraction-static step up that fits, bounded by what the slack must still
    hold (never above SGLang's own default for this config: its reserve heuristic is the safety bound)."""
    base = s.base
    mfs_cap = max(base.default_mem_fraction_static, base.mem_fraction_static)
    best_partial = None
    step = round(base.mem_fraction_static + 0.01, 2)
    while step <= mfs_cap + 1e-9:
        cand = s.replan({"mem_fraction_static": step})
        if cand and cand.fits:
            if s.want is None or cand.max_running_requests >= s.want:
                s.consider(
                    {"mem_fraction_static": step},
                    f"raise the static pool; still leaves ~{(1 - step) * base.pre_gib:.1f} GiB slack",
                    1,
                )
                best_partial = None
                break
            best_partial = best_partial or step
        step = round(step + 0.01, 2)
    if best_partial is not None:
        s.consider(
            {"mem_fraction_static": best_partial},
            "raise the static pool (serves fewer requests than asked)",
            1,
        )


def _state_and_kv_dtypes(s: _Search) -> None:
    """A larger Mamba share (when the variant sizes the Mamba pool by it), bf16 SSM state, fp8 KV."""
    base = s.base
    if s.hybrid and capacity_variants.variant(base.accounting).recommend_mamba_share:
        for mfr in (1.5, 2.0, 3.0):
            if s.consider(
                {"mamba_full_memory_ratio": mfr}, "give the Mamba state a larger share of the budget", 2
            ):
                break
    if s.hybrid and base.mamba_ssm_dtype == "torch.float32":
        s.consider(
            {"mamba_ssm_dtype": "bfloat16"},
            "halve the Mamba SSM state (and the speculative intermediate states)",
            3,
        )
    if not base.kv_dtype.startswith("torch.float8") and s.kind in (
        POOL_SMALLER_THAN_CONTEXT,
        NOT_ENOUGH_MEMORY,
    ):
        s.consider({"kv_cache_dtype": "fp8_e4m3"}, "halve the KV cache per token", 4)


def _fewer_requests(s: _Search) -> None:
    """The largest request count below the one asked that fits (and is served in full, if any is)."""
    if not s.want:
        return
    first_fit = None
    for n in range(s.want - 1, 0, -1):
        cand = s.replan({"max_running_requests": n})
        if cand is None or not cand.fits:
            continue
        first_fit = first_fit or n
        if cand.max_running_requests >= n:
            first_fit = n
            break
    if first_fit is not None:
        s.consider(
            {"max_running_requests": first_fit},
            f"fewer concurrent requests ({first_fit}) shrink the speculative/Mamba reservation",
            5,
        )


def _narrower_verify(s: _Search) -> None:
    """Fewer tokens verified per step, through the flag the algorithm sizes its verify width by."""
    base = s.base
    if not base.spec_algorithm or base.num_draft_tokens <= 2:
        return
    width_flag = sglang_facts.spec_algorithm(base.spec_algorithm).verify_width_flag
    if width_flag == sglang_facts.FLAG_DFLASH_BLOCK_SIZE:
        d = base.num_draft_tokens // 2
        while d >= 2:
            if s.consider(
                {"speculative_dflash_block_size": d, "speculative_num_draft_tokens": None},
                f"smaller DFLASH block ({d}) verifies fewer tokens per step",
                6,
            ):
                break
            d //= 2
    if width_flag == sglang_facts.FLAG_DDTREE_BUDGET:
        b = (base.num_draft_tokens - 1) // 2
        while b >= 1:
            if s.consider({"speculative_ddtree_budget": b}, f"smaller DDTree budget ({b})", 6):
                break
            b //= 2
    if width_flag == sglang_facts.FLAG_NUM_DRAFT_TOKENS:
        s.consider(
            {"speculative_num_draft_tokens": max(2, base.num_draft_tokens // 2)}, "fewer draft tokens", 6
        )


def _no_radix_cache(s: _Search) -> None:
    if s.hybrid and not getattr(s.args, "disable_radix_cache", False):
        s.consider(
            {"disable_radix_cache": True},
            f"no prefix cache: 1 Mamba slot per request instead of {s.base.mamba_ratio}",
            7,
        )


def _more_gpus(s: _Search) -> None:
    """The smallest TP size (up to 8) whose weight shards leave room, with the weights re-divided."""
    base = s.base
    new_tp = base.tp_size * 2
    while s.kind == NOT_ENOUGH_MEMORY and new_tp <= 8:
        tp_opts = dict(s.opts)
        tp_opts["weights_gib"] = base.weights_gib * base.tp_size / new_tp
        if base.draft_weights_gib:
            tp_opts["draft_weights_gib"] = base.draft_weights_gib * base.tp_size / new_tp
        cand = _replan(s.args, {"tp_size": new_tp}, s.model_config, s.draft_config, s.gpu_mem_gib, tp_opts)
        if cand is not None and cand.fits:
            why = f"shard the weights over {new_tp} GPUs (needs {new_tp} GPUs of this kind)"
            s.out.append(
                Recommendation(
                    {"--tp-size": new_tp}, cand.max_total_num_tokens, cand.max_running_requests, why, 9
                )
            )
            return
        new_tp *= 2


def _shorter_context(s: _Search) -> None:
    if s.kind == POOL_SMALLER_THAN_CONTEXT and s.base.max_total_num_tokens > 1024:
        ctx = s.base.max_total_num_tokens // 1024 * 1024
        s.consider({"context_length": ctx}, "cap the context at what the KV pool holds", 8)


# the searches for a memory failure, in the order their candidates are tried
_SEARCHES = (
    _raise_mem_fraction,
    _state_and_kv_dtypes,
    _fewer_requests,
    _narrower_verify,
    _no_radix_cache,
    _more_gpus,
    _shorter_context,
)


def recommendations(
    args: argparse.Namespace,
    model_config: dict[str, Any],
    draft_config: dict[str, Any] | None,
    gpu_mem_gib: float,
    base: Plan,
    opts: dict[str, Any],
) -> list[Recommendation]:
    """Flag changes that make ``base`` fit, each re-planned; least disruptive first.

    Ranks (lower = less disruptive): scheduler strategy fix 0, --mem-fraction-static (within what the
    slack can give) 1, Mamba share 2, bf16 Mamba SSM state 3, fp8 KV 4, fewer running requests 5,
    smaller speculative block/budget 6, no radix cache 7, shorter context 8, more GPUs 9; an option
    that serves fewer requests than asked counts 5 ranks more.
    """
    want = base.requested_max_running_requests or (
        SPEC_DEFAULT_MAX_RUNNING_REQUESTS if base.spec_algorithm else None
    )
    s = _Search(args, model_config, draft_config, gpu_mem_gib, base, opts, want)
    if s.kind is None:
        return []
    if s.kind == CONTEXT_TOO_LONG:
        return _context_too_long_fix(s)
    if s.kind == BAD_CONFIG and s.hybrid:
        _bad_config_fixes(s)
    else:
        for search in _SEARCHES:
            search(s)
    return _ordered(s.out, want)


def _ordered(recs: list[Recommendation], want: int | None) -> list[Recommendation]:
    """Least disruptive first: the change's rank, plus 5 when it serves fewer requests than asked."""
    return sorted(recs, key=lambda r: r.rank + (0 if want is None or r.max_running_requests >= want else 5))


# --- explanation -----------------------------------------------------------------------------------


def explain(p: Plan) -> str:
    lines = [
        f"{p.model_class} ({p.attention}), TP{p.tp_size}, accounting variant {p.accounting}"
        + (f", {p.spec_algorithm} with {p.num_draft_tokens} draft tokens" if p.spec_algorithm else ""),
        f"GPU {p.gpu_mem_gib:.2f} GiB, free at start {p.pre_gib:.2f} GiB; mem_fraction_static "
        f"{p.mem_fraction_static:.4g} ({p.mem_fraction_static_source}"
        + (f", SGLang {p.defaults_rule} rule" if p.mem_fraction_static_source == "default" else "")
        + ")",
        f"  weights            {p.weights_gib:8.2f} GiB  ({p.weights_source})",
    ]
    if p.spec_algorithm and p.draft_weights_gib:
        where = "counted in the static pool" if _draft_in_static_pool(p) else "loaded later, from the slack"
        lines.append(
            f"  draft weights      {p.draft_weights_gib:8.2f} GiB  ({p.draft_weights_source}; {where})"
        )
    lines.append(f"  kept back (1-mfs)  {p.slack['reserved_by_mem_fraction_gib']:8.2f} GiB")
    lines.append(f"  KV+state budget    {p.rest_gib:8.2f} GiB")
    if p.spec_intermediate_reserved_gib:
        lines.append(
            f"    spec intermediate reservation {p.spec_intermediate_reserved_gib:7.2f} GiB "
            f"({p.mamba_per_req_bytes / MiB:.1f} MiB/state)"
        )
    if p.mamba_slots is not None:
        lines.append(
            f"    Mamba state        {p.mamba_budget_gib:7.2f} GiB -> {p.mamba_slots} slots "
            f"(ratio {p.mamba_ratio} per request)"
        )
    lines.append(
        f"    KV cache           {p.kv_budget_gib:7.2f} GiB / {p.cell_bytes} B per token "
        f"-> {p.max_total_num_tokens} tokens ({p.kv_dtype})"
    )
    lines.append(
        f"  max_running_requests {p.max_running_requests}"
        + (f" (asked {p.requested_max_running_requests})" if p.requested_max_running_requests else "")
        + f", context_len {p.context_len}"
    )
    lines.append(
        f"  slack left for activations ~{p.slack['left_for_activations_gib']:.2f} GiB "
        f"(after CUDA graphs ~{p.cuda_graph_gib:.2f} GiB"
        + (", draft weights and KV" if p.spec_algorithm and not _draft_in_static_pool(p) else "")
        + ")"
    )
    if p.failure:
        lines.append(f"FAILS: {p.failure.kind}: {p.failure.exception}: {p.failure.message}")
        if p.failure.explanation:
            lines.append(f"  why: {p.failure.explanation}")
    else:
        lines.append("FITS")
    for w in p.warnings:
        lines.append(f"warning: {w}")
    for n in p.notes:
        lines.append(f"note: {n}")
    lines.extend(_explain_flags(p))
    if p.recommendations:
        lines.append("recommendations (least disruptive first):")
        for r in p.recommendations:
            flags = " ".join(
                f"{k} {v}" if v not in (True, None) else k for k, v in r.flags.items() if v is not None
            )
            lines.append(
                f"  {flags}: {r.max_total_num_tokens} tokens, {r.max_running_requests} requests - {r.why}"
            )
    return "\n".join(lines)


def _draft_in_static_pool(p: Plan) -> bool:
    return capacity_variants.variant(p.accounting).draft_in_static_pool


def _explain_flags(p: Plan) -> list[str]:
    lines = []
    if p.sglang_release:
        accepted = p.accepted_by
        if len(accepted) > 1:
            lines.append(
                f"flags: accepted by SGLang {accepted[0]} to {accepted[-1]} ({len(accepted)} catalogued "
                "releases; name one with --sglang-version to check against it)"
            )
        else:
            lines.append(f"flags: checked against SGLang {p.sglang_release}")
    effect = p.flags_effect or {}
    for text in effect.get("assumed", []):
        lines.append(f"assumption: {text}")
    if effect.get("none"):
        lines.append("does not affect capacity (passed to the server unchanged): " + " ".join(effect["none"]))
    return lines


# --- from a command line -----------------------------------------------------------------------------


def resolve_model(
    ref: str, flag: str, revision: str | None = None, env: Mapping[str, str] | None = None
) -> hf_cache.ResolvedModel:
    """Where a model path is on this machine: a local path as given, a hub id (``org/name``) in the
    Hugging Face cache of ``env`` (default ``os.environ``; docs/capacity.md, "Hugging Face hub ids")."""
    try:
        return hf_cache.resolve(ref, revision, env)
    except hf_cache.NotCachedError as exc:
        raise PlanError(flag, exc.message) from None


def read_config(
    path: str | hf_cache.ResolvedModel,
    flag: str,
    revision: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``config.json`` of a model directory, a ``.json`` file or a cached hub id (:func:`resolve_model`)."""
    model = path if isinstance(path, hf_cache.ResolvedModel) else resolve_model(path, flag, revision, env)
    cfg_path = model.path if model.path.endswith(".json") else os.path.join(model.path, "config.json")
    try:
        with open(cfg_path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        if model.from_hub:
            raise PlanError(
                flag,
                f"no config.json in the cached snapshot of {model.describe()} (partial download?): run "
                f"`huggingface-cli download {model.ref}` on the host, or give a local directory",
            ) from None
        raise PlanError(flag, f"no config.json at {cfg_path}") from None
    except (OSError, ValueError) as exc:
        raise PlanError(flag, f"cannot read {cfg_path}: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(flag, f"{cfg_path} is not a JSON object")
    return data


def plan_command(
    argv: list[str],
    *,
    gpu: str | None = None,
    gpu_mem_gib: float | None = None,
    free_gib: float | None = None,
    weights_gib: float | None = None,
    draft_weights_gib: float | None = None,
    accounting: str | None = None,
    sglang_version: str | None = None,
    overlap: bool | None = None,
    dflash_cell_scaling: bool | None = None,
    env: Mapping[str, str] | None = None,
    sglang_catalog: Any = None,
    catalog_dir: str | None = None,
    platform: str = "cuda",
) -> Plan:
    """Plan an SGLang launch command line (flags only, e.g. ``["--model-path", dir, ...]``).

    The flags are checked against ``sglang_catalog`` (the installed release's own flags), else the
    catalog of ``sglang_version``, else every catalogued release (see ``sglang_args``).

    A model path that is a hub id is read from the Hugging Face cache of ``env`` (the server's environment;
    default ``os.environ``), at ``--revision`` / ``--speculative-draft-model-revision``.
    """
    try:
        args = sglang_args.parse_launch_args_or_raise(
            argv, sglang_version, catalog=sglang_catalog, catalog_dir=catalog_dir
        )
    except sglang_args.SglangArgsError as exc:
        raise PlanError("launch flags", str(exc)) from None
    if gpu_mem_gib is None:
        if gpu is None:
            raise PlanError("--gpu-mem-gib", "give the GPU memory (--gpu-mem-gib) or a GPU kind (--gpu NAME)")
        kind = gpus.find_gpu(gpu)
        if kind is None:
            raise PlanError(
                "--gpu",
                f"unknown GPU {gpu!r}; known: {', '.join(gpus.known_names())} (or give --gpu-mem-gib)",
            )
        gpu_mem_gib = kind.memory_gib
    acc = resolve_accounting(accounting, sglang_version)
    # hub ids (org/name) are read from the Hugging Face cache of ``env``; argv keeps the id
    model = resolve_model(args.model_path, "--model-path", getattr(args, "revision", None), env)
    model_cfg = read_config(model, "--model-path")
    draft: hf_cache.ResolvedModel | None = None
    draft_cfg = None
    if getattr(args, "speculative_draft_model_path", None):
        draft_flag = "--speculative-draft-model-path"
        draft_rev = getattr(args, "speculative_draft_model_revision", None)
        draft = resolve_model(args.speculative_draft_model_path, draft_flag, draft_rev, env)
        draft_cfg = read_config(draft, draft_flag)
    model_dir = model.path if os.path.isdir(model.path) else None
    draft_dir = draft.path if draft is not None and os.path.isdir(draft.path) else None
    p = plan(
        args,
        model_cfg,
        draft_cfg,
        gpu_mem_gib,
        free_gib=free_gib,
        weights_gib=weights_gib,
        draft_weights_gib=draft_weights_gib,
        accounting=acc,
        model_dir=model_dir,
        draft_model_dir=draft_dir,
        overlap=overlap,
        dflash_cell_scaling=dflash_cell_scaling,
        platform=platform,
    )
    p.notes[:0] = [
        f"{flag} {ref.describe()}"
        for flag, ref in (("--model-path", model), ("--speculative-draft-model-path", draft))
        if ref is not None and ref.from_hub
    ]
    if sglang_catalog is None and sglang_version and p.sglang_release not in (None, sglang_version):
        p.notes.insert(
            0,
            f"SGLang {sglang_version} is not catalogued: flags checked against {p.sglang_release}, the "
            "nearest older catalogued release (scripts/sglang_catalog.py adds a release)",
        )
    return p


__all__ = [
    "ACCOUNTING_VARIANTS",
    "BAD_CONFIG",
    "CONTEXT_TOO_LONG",
    "NOT_ENOUGH_MEMORY",
    "POOL_SMALLER_THAN_CONTEXT",
    "ZERO_REQUESTS",
    "Failure",
    "Plan",
    "PlanError",
    "Recommendation",
    "accounting_for_version",
    "accounting_from_source",
    "default_mem_fraction_static",
    "explain",
    "plan",
    "plan_command",
    "read_config",
    "recommendations",
    "resolve_accounting",
    "resolve_model",
]
