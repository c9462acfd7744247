"""Capacity planner: predict what SGLang will allocate for a launch command, before launching it.

Standard library only: shipped to the GPU host as ``module_utils/sglbench_hostlib/capacity.py`` and used by
the SGLang stand-in to produce its log numbers and failures.

Given the launch flags (an ``argparse.Namespace`` from ``sglang_args.parse_launch_args_or_raise``),
the target (and draft) ``config.json``, and the GPU's memory, :func:`plan` replays SGLang's startup
memory accounting (docs/capacity.md has every formula and where it comes from):

1. defaults: ``mem_fraction_static`` (incl. the multimodal factor), ``chunked_prefill_size``,
   ``cuda_graph_max_bs``, context length, KV dtype, speculative draft-token count;
2. ``rest = (free_after_weights) - pre * (1 - mem_fraction_static)``;
3. hybrid linear-attention models: Mamba state slots and the speculative intermediate-state
   reservation, in one of three historical **accounting variants**:

   - ``A``: builds before 2026-05-27 (0.5.10.x and the May-2026 main/forks): the intermediate
     reservation uses the *requested* ``--max-running-requests``; the Mamba slot count comes from
     ``--mamba-full-memory-ratio``; a zero request count ends in ``AssertionError: max_running_request
     is zero``. The DFLASH draft KV is not folded into the target cell (observed, see docs).
   - ``B``: June-2026 main (V3): joint solve, cap by the Mamba share, ``RuntimeError`` guards, DFLASH
     cell scaled by ``(T + draft_layers) / T``.
   - ``C``: Aug-2026+ (V4, 0.5.2x): like B plus a padding slot, draft weights counted against
     ``--mem-fraction-static``, DFLASH cell = target cell + exact draft cell.

4. KV tokens ``= rest // cell`` (page-rounded, capped by ``--max-total-tokens``);
5. ``max_running_requests`` resolution and the failure SGLang would hit, with its exact text;
6. recommendations: flag changes, each re-planned and shown to fit, least disruptive first.
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

from . import checkpoint, geometry, gpus, hf_cache, sglang_args, sglang_facts

GiB = 1 << 30
MiB = 1 << 20
ACCOUNTING_VARIANTS = ("A", "B", "C")
DEFAULT_ACCOUNTING = "C"

# --- failure kinds -------------------------------------------------------------------------------
ZERO_REQUESTS = "zero_requests"
NOT_ENOUGH_MEMORY = "not_enough_memory"
POOL_SMALLER_THAN_CONTEXT = "pool_smaller_than_context"
BAD_CONFIG = "bad_config"
CONTEXT_TOO_LONG = "context_too_long"

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
class Failure:
    kind: str
    message: str  # SGLang's own error text for this variant (what the server would print)
    exception: str = "RuntimeError"
    explanation: str = ""


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
    ``0.5.12 … 0.5.15`` → B (June/July 2026 main), ``>= 0.5.16`` → C (V4 configurator).
    Release dates between 0.5.10 and 0.5.19 are inferred; when in doubt grep the installed tree
    (``state cache is too small`` → B/C; ``_handle_max_mamba_cache`` in KVCacheConfigurator → C).
    """
    v = _version_tuple(version)
    v = v + (0,) * (3 - len(v))
    if v[:3] < (0, 5, 12):
        return "A"
    if v[:3] < (0, 5, 16):
        return "B"
    return "C"


def accounting_from_source(texts: list[str]) -> str | None:
    """Pick the variant from the installed SGLang's own source (more reliable than its version).

    ``texts``: contents of the installed ``srt`` files worth grepping (e.g.
    ``model_runner_kv_cache_mixin.py``, ``mem_cache/kv_cache_configurator.py``,
    ``managers/tp_worker.py``). None when no marker is found.
    """
    blob = "\n".join(texts)
    if "state cache is too small" in blob:
        return "C" if ("KVCacheConfigurator" in blob and "_handle_max_mamba_cache" in blob) else "B"
    if "max_running_request is zero" in blob:
        return "A"
    return None


def resolve_accounting(accounting: str | None, sglang_version: str | None = None) -> str:
    if accounting:
        acc = accounting.strip().upper()
        if acc not in ACCOUNTING_VARIANTS:
            raise PlanError("--accounting", f"must be one of A, B, C, got {accounting!r}")
        return acc
    if sglang_version:
        return accounting_for_version(sglang_version)
    return DEFAULT_ACCOUNTING


# --- SGLang defaults (§2.2) ----------------------------------------------------------------------


def default_chunked_prefill_and_graph_bs(gpu_mem_mib: float | None, tp: int) -> tuple[int, int]:
    if gpu_mem_mib is None:
        return 4096, 160
    g = gpu_mem_mib
    if g < 20 * 1024:
        return 2048, 8
    if g < 35 * 1024:
        return 2048, (24 if tp < 4 else 80)
    if g < 60 * 1024:
        return 4096, (32 if tp < 4 else 160)
    if g < 160 * 1024:
        return 8192, (256 if tp < 4 else 512)
    return 16384, 512


def sglang_reserved_mib(
    gpu_mem_mib: float, cps: int, cgmb: int, tp: int, pp: int, max_prefill_tokens: int, spec: str | None
) -> float:
    reserved = 512.0
    reserved += max(cps if cps > 0 else max_prefill_tokens, 2048) * 1.5
    reserved += cgmb * 2
    reserved += tp * pp / 8 * 1024
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    reserved += sglang_facts.startup_reserve_mib(spec)
    return reserved


def vlm_factor(geo: geometry.Geometry) -> float:
    if not geo.multimodal:
        return 1.0
    hidden = geo.vit_hidden or 1152
    c = geo.vit_layers * hidden * hidden / (24 * 1024 * 1024)
    return 0.95 * min(max(1 - 0.1 * (c - 1), 0.8), 1.05)


def default_mem_fraction_static(
    gpu_mem_mib: float | None,
    cps: int,
    cgmb: int,
    tp: int,
    pp: int,
    max_prefill_tokens: int,
    spec: str | None,
    geo: geometry.Geometry,
) -> float:
    if gpu_mem_mib is None:
        mfs = 0.88
    else:
        reserved = sglang_reserved_mib(gpu_mem_mib, cps, cgmb, tp, pp, max_prefill_tokens, spec)
        mfs = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    return mfs * vlm_factor(geo)


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


def _zero_requests_failure(acc: str, slots: int, ratio: int) -> Failure:
    if acc == "A":
        return Failure(
            ZERO_REQUESTS,
            "max_running_request is zero",
            "AssertionError",
            f"the Mamba state pool has {slots} slot(s) and each running request needs {ratio}; "
            f"{slots} // {ratio} = 0 request slots (TpModelWorker assertion, after the pools are allocated)",
        )
    return Failure(
        ZERO_REQUESTS,
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        f"max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs=0. "
        "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
        "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.",
        "RuntimeError",
        f"{slots} Mamba slot(s) // {ratio} slots per request = 0",
    )


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
    acc = resolve_accounting(accounting)
    if gpu_mem_gib is None or not 0 < gpu_mem_gib < math.inf:  # NaN included
        raise PlanError("--gpu-mem-gib", f"must be a positive GiB figure, got {gpu_mem_gib!r}")
    tp = int(_arg(args, "tp_size", 1))
    pp = int(_arg(args, "pp_size", 1))
    dp = int(_arg(args, "dp_size", 1))
    dp_attn = bool(_arg(args, "enable_dp_attention", False))
    attn_dp = dp if dp_attn else 1
    if tp < 1:
        raise PlanError("--tp-size", f"must be >= 1, got {tp}")
    notes: list[str] = []
    warnings: list[str] = []
    geo = _geo(model_config, tp, is_draft=False, what="target model")
    if dp_attn and dp > 1:
        notes.append("dp-attention: heads are divided by tp/dp (attention TP); planned with full TP")
    if pp > 1:
        notes.append(f"pp_size={pp}: layers and weights divided evenly across {pp} stages (approximation)")

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
    dflash_like = spec is not None and spec.kv_fold == sglang_facts.KV_FOLD_DRAFT_CELL
    dgeo: geometry.Geometry | None = None
    if spec is not None and spec.uses_draft_model and (draft_config or not spec.mtp_fallback):
        if draft_config is None:
            raise PlanError(
                "--speculative-draft-model-path",
                f"--speculative-algorithm {algo} needs the draft model's config.json",
            )
        dgeo = _geo(draft_config, tp, is_draft=True, what="draft model")
    D = _spec_tokens(args, algo, draft_config, geo.model_class)

    requested_mrr = getattr(args, "max_running_requests", None)
    mrr = requested_mrr
    if algo and mrr is None:
        mrr = SPEC_DEFAULT_MAX_RUNNING_REQUESTS
        notes.append(f"speculative decoding: --max-running-requests defaults to {mrr}")

    gpu_mem_mib = gpu_mem_gib * 1024.0
    cps_def, cgmb_def = default_chunked_prefill_and_graph_bs(gpu_mem_mib, tp)
    cps = int(_arg(args, "chunked_prefill_size", cps_def))
    cgmb = int(_arg(args, "cuda_graph_max_bs", cgmb_def))
    max_prefill = int(_arg(args, "max_prefill_tokens", 16384))
    page = int(_arg(args, "page_size", 1)) or 1
    mfs_flag = getattr(args, "mem_fraction_static", None)
    mfs_default = default_mem_fraction_static(gpu_mem_mib, cps, cgmb, tp, pp, max_prefill, algo, geo)
    if mfs_flag is not None:
        mfs = float(mfs_flag)
        mfs_src = "flag"
        if not 0 < mfs < 1:
            raise PlanError("--mem-fraction-static", f"must be in (0, 1), got {mfs}")
    else:
        mfs = mfs_default
        mfs_src = "default"

    ctx_flag = getattr(args, "context_length", None)
    ctx = int(ctx_flag) if ctx_flag else geo.context_len
    failure: Failure | None = None
    if (
        ctx_flag
        and int(ctx_flag) > geo.context_len
        and os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() not in ("1", "true")
    ):
        failure = Failure(
            CONTEXT_TOO_LONG,
            f"User-specified context_length ({ctx}) is greater than the derived context_length "
            f"({geo.context_len}). This may lead to incorrect model outputs or CUDA errors. To allow "
            "overriding, please set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
            "ValueError",
        )

    model_dtype = _model_dtype(getattr(args, "dtype", None), geo)
    kv_dtype = _kv_dtype(getattr(args, "kv_cache_dtype", None), geo, model_dtype)
    kv_bytes = geometry.dtype_bytes(kv_dtype)

    # Mamba state dtype: env > flag > config > float32
    ssm_dtype: str | None = None
    if geo.hybrid_mamba:
        ssm_dtype = (
            os.environ.get("SGLANG_MAMBA_SSM_DTYPE")
            or _arg(args, "mamba_ssm_dtype")
            or geo.mamba_ssm_dtype_config
            or "float32"
        )
        ssm_dtype = str(ssm_dtype).replace("torch.", "")
        if ssm_dtype not in _SSM_DTYPE_BYTES:
            raise PlanError("mamba_ssm_dtype", f"unknown dtype {ssm_dtype!r} (float32, bfloat16, float16)")

    # memory at startup and weights
    pre = float(free_gib) if free_gib is not None else gpus.default_free_gib(gpu_mem_gib, tp)
    if not 0 < pre <= gpu_mem_gib + 1e-6:  # NaN included
        raise PlanError("--free-gib", f"must be in (0, gpu memory {gpu_mem_gib:.2f}], got {pre}")
    model_dtype_bytes = geometry.dtype_bytes(model_dtype)
    w_gib, w_src = _weights(
        weights_gib,
        model_dir,
        model_config,
        geo,
        tp * pp,
        model_dtype_bytes,
        keep_mtp=spec is not None and spec.mtp_fallback and draft_config is None,
    )
    dw_gib, dw_src = 0.0, "none"
    if spec is not None and spec.uses_draft_model:
        dw_gib, dw_src = _weights(
            draft_weights_gib, draft_model_dir, draft_config, dgeo, tp, model_dtype_bytes, keep_mtp=False
        )
    if w_src == "estimate":
        notes.append(
            "target weights are an ESTIMATE from config geometry (no checkpoint on disk); "
            "pass --weights-gib for a firm figure"
        )
    if dw_src == "estimate":
        notes.append("draft weights are an ESTIMATE from config geometry; pass --draft-weights-gib")

    post = pre - w_gib - (dw_gib if acc == "C" else 0.0)
    reserved_by_mfs = pre * (1 - mfs)
    rest = post - reserved_by_mfs

    # per-token cell
    target_cell = geo.cell_bytes(kv_bytes, kv_dtype)
    if geo.attention == "hybrid_swa":
        ratio_swa = float(_arg(args, "swa_full_tokens_ratio", 0.8))
        per = geo.full_layer_bytes_per_token(kv_bytes)
        target_cell_f = per * geo.kv_layers + ratio_swa * per * geo.swa_layers
    else:
        ratio_swa = 0.0
        target_cell_f = float(target_cell)
    if pp > 1:
        target_cell_f /= pp
    draft_cell = dgeo.cell_bytes(kv_bytes, kv_dtype) if dgeo is not None else 0
    if dgeo is not None and dgeo.attention == "mla":
        draft_cell = 0  # MTP-like drafts share the target's latent layout; counted by layer ratio
    cell_f = target_cell_f
    scaling = dflash_cell_scaling if dflash_cell_scaling is not None else acc != "A"
    if dflash_like and dgeo is not None and scaling:
        if acc == "C":
            cell_f = target_cell_f + draft_cell
        else:
            T = geo.kv_layers
            cell_f = float(geometry.ceil_div(int(target_cell_f) * (T + dgeo.num_layers), T))
    elif spec is not None and spec.kv_fold == sglang_facts.KV_FOLD_LAYER_RATIO and acc == "C":
        draft_layers = dgeo.num_layers if dgeo is not None else 1
        cell_f = float(int(target_cell_f * (1 + draft_layers / geo.kv_layers)))
    if dflash_like and not scaling:
        notes.append(
            "DFLASH draft KV is not folded into the target cell (variant A as observed); "
            "it is allocated from the slack"
        )

    # hybrid Mamba split (§2.5)
    mamba_slots: int | None = None
    P = 0
    ratio: int | None = None
    spec_reserved = 0.0
    mamba_budget = 0.0
    overlap_on = (
        (not bool(_arg(args, "disable_overlap_schedule", False))) if overlap is None else bool(overlap)
    )
    disable_radix = bool(_arg(args, "disable_radix_cache", False))
    strategy = str(_arg(args, "mamba_scheduler_strategy", "auto"))
    spec_cap: int | None = None
    if geo.hybrid_mamba and geo.mamba is not None:
        ssm_bytes = _SSM_DTYPE_BYTES[ssm_dtype or "float32"]
        P = geo.mamba.per_req_bytes(ssm_bytes)
        if pp > 1:
            P = P // pp
        ratio = _mamba_ratio(disable_radix, strategy, overlap_on)
        if algo and not disable_radix and strategy in ("auto", "no_buffer") and failure is None:
            failure = Failure(
                BAD_CONFIG,
                f"Speculative decoding for {geo.model_class} is not compatible with radix cache when using "
                "--mamba-scheduler-strategy no_buffer. To use radix cache with speculative decoding, please "
                "use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.",
                "ValueError",
            )
        mfr = float(_arg(args, "mamba_full_memory_ratio", 0.9))
        explicit_k = getattr(args, "max_mamba_cache_size", None)
        mrr_dp = (mrr // attn_dp) if mrr is not None else None
        Dm = D if algo else 0
        rest_bytes = rest * GiB
        if acc == "A":
            if algo:
                spec_reserved = P * (mrr_dp or 0) * Dm / GiB
                rest_bytes -= P * (mrr_dp or 0) * Dm
            if explicit_k is not None:
                K = int(explicit_k) // attn_dp
            elif disable_radix and mrr is not None:
                K = mrr // attn_dp
            else:
                K = int((rest_bytes * mfr / (1 + mfr)) // P) if rest_bytes > 0 else 0
            rest_bytes -= K * P
            mamba_budget = K * P / GiB
        else:
            budget = rest_bytes * mfr / (1 + mfr)
            pad = 1 if acc == "C" else 0
            if explicit_k is not None:
                K = int(explicit_k) // attn_dp
                spec_cap = min(mrr_dp if mrr_dp is not None else K // ratio, K // ratio) if algo else None
            elif disable_radix and mrr is not None:
                K = mrr // attn_dp
                spec_cap = K if algo else None
            elif algo:
                K = int((budget - pad * P * (1 + Dm)) // (P * (1 + Dm / ratio))) if budget > 0 else 0
                spec_cap = min(mrr_dp if mrr_dp is not None else K // ratio, K // ratio)
            else:
                K = int((budget - pad * P) // P) if budget > 0 else 0
            K = max(K, 0)
            if algo and spec_cap is not None:
                spec_reserved = P * (spec_cap + pad) * Dm / GiB
                rest_bytes -= P * (spec_cap + pad) * Dm
            if K <= 0 and failure is None:
                failure = Failure(
                    NOT_ENOUGH_MEMORY,
                    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                    f"max_mamba_cache_size={K}. Try: (1) reduce --max-running-requests, (2) increase "
                    "--mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) use GPUs "
                    "with more memory.",
                    "RuntimeError",
                )
            rest_bytes -= (K + pad) * P
            mamba_budget = (K + pad) * P / GiB
        mamba_slots = K
        kv_budget = rest_bytes / GiB
    else:
        kv_budget = rest

    if acc == "C" and kv_budget <= 0 and failure is None:
        need = 1 - post / pre
        failure = Failure(
            NOT_ENOUGH_MEMORY,
            f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs:g}. "
            f"Raise --mem-fraction-static above {need:.3f} "
            f"(minimum viable = 1 - available/pre = {need:.3f}). "
            "If using speculative decoding, draft weights are now counted.",
            "ValueError",
        )

    # tokens
    tokens = int(int(kv_budget * GiB) // cell_f) if kv_budget > 0 else 0
    full_tokens = swa_tokens = None
    if geo.attention == "hybrid_swa":
        full_tokens = tokens // page * page
        swa_tokens = int(full_tokens * ratio_swa) // page * page
    max_total_tokens = getattr(args, "max_total_tokens", None)
    if max_total_tokens is not None and tokens > 0:
        if max_total_tokens > tokens:
            warnings.append(
                f"--max-total-tokens {max_total_tokens} is above the profiled {tokens}; "
                "SGLang uses the profiled value"
            )
        tokens = min(tokens, int(max_total_tokens))
    tokens = tokens // page * page
    if tokens <= 0 and failure is None:
        failure = Failure(
            NOT_ENOUGH_MEMORY,
            f"Not enough memory. Please try to increase --mem-fraction-static. Current value: "
            f"mem_fraction_static={mfs:g}",
            "RuntimeError",
        )

    # max_running_requests (§2.7)
    estimated = min(max(int(tokens / ctx * 512), 2048), 4096) if ctx > 0 else 2048
    if mrr is not None:
        n = min(mrr // attn_dp, tokens // 2) if acc == "C" else min(mrr // attn_dp, estimated)
    else:
        n = min(estimated, tokens // 2)
    if mamba_slots is not None and ratio is not None:
        n = min(n, mamba_slots // ratio)
    n = max(n, 0)
    if tokens > 0 and n <= 0 and failure is None:
        failure = _zero_requests_failure(acc, mamba_slots or 0, ratio or 1)
    if failure is None and tokens > 0 and min(ctx, tokens) - 6 <= 0:
        failure = Failure(NOT_ENOUGH_MEMORY, "Memory pool size is too small", "AssertionError")
    if failure is None and 0 < tokens < ctx:
        failure = Failure(
            POOL_SMALLER_THAN_CONTEXT,
            f"KV pool holds {tokens} tokens, fewer than context_len={ctx}: SGLang starts, but rejects "
            f"requests longer than {min(ctx, tokens) - 6} tokens (max_req_input_len)",
            "none",
            "SGLang itself starts; a request needing the full context cannot be served",
        )
    if mrr is not None and 0 < n < mrr:
        why = (
            f"Mamba state slots ({mamba_slots} // {ratio})"
            if (mamba_slots is not None and ratio and n == mamba_slots // ratio)
            else "token capacity"
        )
        warnings.append(f"max_running_requests resolves to {n}, below the requested {mrr} (capped by {why})")

    if failure is not None and failure.kind == NOT_ENOUGH_MEMORY and not failure.explanation:
        failure.explanation = (
            f"after the weights {post:.2f} GiB are free; (1 - mem_fraction_static) x {pre:.2f} = "
            f"{reserved_by_mfs:.2f} GiB is kept back, leaving {rest:.2f} GiB for KV and state"
            + (" (the weights alone do not fit at this TP size)" if post <= 0 else "")
        )

    # allocated pools (what the log lines print)
    pg = tokens + page
    if geo.attention == "mla":
        k_size = pg * (geo.kv_lora_rank + geo.qk_rope_head_dim) * geo.kv_layers * kv_bytes / GiB
        v_size = 0.0
    else:
        full_pg = (full_tokens if full_tokens is not None else tokens) + page
        k_size = full_pg * geo.kv_heads_per_rank * geo.head_dim * geo.kv_layers * kv_bytes / GiB
        v_size = full_pg * geo.kv_heads_per_rank * geo.v_head_dim * geo.kv_layers * kv_bytes / GiB
        if swa_tokens is not None:
            swa_pg = swa_tokens + page
            k_size += swa_pg * geo.kv_heads_per_rank * geo.head_dim * geo.swa_layers * kv_bytes / GiB
            v_size += swa_pg * geo.kv_heads_per_rank * geo.v_head_dim * geo.swa_layers * kv_bytes / GiB
        if pp > 1:
            k_size /= pp
            v_size /= pp
    dk = dv = 0.0
    if dgeo is not None and dgeo.attention != "mla":
        dk = pg * dgeo.kv_heads_per_rank * dgeo.head_dim * dgeo.num_layers * kv_bytes / GiB
        dv = pg * dgeo.kv_heads_per_rank * dgeo.v_head_dim * dgeo.num_layers * kv_bytes / GiB
    elif dgeo is not None:
        dk = pg * (dgeo.kv_lora_rank + dgeo.qk_rope_head_dim) * kv_bytes / GiB
    conv_g = ssm_g = iss = icv = 0.0
    if mamba_slots is not None and geo.mamba is not None:
        conv_req = geo.mamba.conv_bytes_per_req(2.0)
        ssm_req = geo.mamba.ssm_bytes_per_req(_SSM_DTYPE_BYTES[ssm_dtype or "float32"])
        conv_g = (mamba_slots + 1) * conv_req / GiB
        ssm_g = (mamba_slots + 1) * ssm_req / GiB
        if algo:
            iss = (n + 1) * D * ssm_req / GiB
            icv = (n + 1) * D * conv_req / GiB
    req_to_token = (n + 1) * (ctx + 4 + D) * 4 / GiB
    target_pools = k_size + v_size + conv_g + ssm_g + iss + icv + req_to_token
    if acc == "C":
        target_pools += dk + dv
    pool_end = post - target_pools
    cuda_graph = 0.0 if _arg(args, "disable_cuda_graph", False) else cgmb * 2 / 1024 * (2 if algo else 1)
    activation_reserve = max(cps if cps > 0 else max_prefill, 2048) * 1.5 / 1024
    draft_from_slack = (dw_gib if acc != "C" else 0.0) + (dk + dv if acc != "C" else 0.0)
    unused = max(
        rest - (k_size + v_size + conv_g + ssm_g + iss + icv) - (dk + dv if acc == "C" else 0.0), 0.0
    )
    left = reserved_by_mfs + unused - draft_from_slack - req_to_token - cuda_graph
    slack = {
        "reserved_by_mem_fraction_gib": reserved_by_mfs,
        "unallocated_budget_gib": unused,
        "draft_weights_gib": dw_gib if acc != "C" else 0.0,
        "draft_kv_gib": dk + dv if acc != "C" else 0.0,
        "req_to_token_gib": req_to_token,
        "cuda_graph_gib": cuda_graph,
        "left_for_activations_gib": left,
        "sglang_activation_heuristic_gib": activation_reserve,
    }
    if left < 1.0 and failure is None and tokens > 0:
        warnings.append(
            f"only {left:.2f} GiB left for activations after draft weights/KV and CUDA graphs: expect an OOM "
            "during CUDA-graph capture or the first large prefill; lower --mem-fraction-static"
        )
    available_after = pool_end - (draft_from_slack if acc != "C" else 0.0) - cuda_graph

    p = Plan(
        accounting=acc,
        model_class=geo.model_class,
        attention=geo.attention,
        tp_size=tp,
        gpu_mem_gib=gpu_mem_gib,
        pre_gib=pre,
        mem_fraction_static=mfs,
        mem_fraction_static_source=mfs_src,
        default_mem_fraction_static=mfs_default,
        context_len=ctx,
        chunked_prefill_size=cps,
        max_prefill_tokens=max_prefill,
        cuda_graph_max_bs=cgmb,
        page_size=page,
        kv_dtype=kv_dtype,
        mamba_ssm_dtype=f"torch.{ssm_dtype}" if ssm_dtype else None,
        spec_algorithm=algo,
        num_draft_tokens=D,
        requested_max_running_requests=requested_mrr,
        mamba_ratio=ratio,
        overlap=overlap_on,
        weights_gib=w_gib,
        weights_source=w_src,
        draft_weights_gib=dw_gib,
        draft_weights_source=dw_src,
        avail_after_weights_gib=pre - w_gib,
        rest_gib=rest,
        cell_bytes=round(cell_f),
        target_cell_bytes=round(target_cell_f),
        draft_cell_bytes=draft_cell,
        mamba_per_req_bytes=P,
        spec_intermediate_reserved_gib=spec_reserved,
        mamba_budget_gib=mamba_budget,
        kv_budget_gib=kv_budget,
        max_total_num_tokens=max(tokens, 0),
        max_running_requests=n,
        mamba_slots=mamba_slots,
        full_max_total_num_tokens=full_tokens,
        swa_max_total_num_tokens=swa_tokens,
        kv_cache_gib=k_size + v_size,
        k_size_gib=k_size,
        v_size_gib=v_size,
        draft_k_size_gib=dk,
        draft_v_size_gib=dv,
        mamba_conv_gib=conv_g,
        mamba_ssm_gib=ssm_g,
        spec_intermediate_ssm_gib=iss,
        spec_intermediate_conv_gib=icv,
        req_to_token_gib=req_to_token,
        pool_end_avail_gib=pool_end,
        cuda_graph_gib=cuda_graph,
        available_gpu_mem_gib=available_after,
        slack=slack,
        fits=failure is None,
        failure=failure,
        warnings=warnings,
        notes=notes + geo.notes + (dgeo.notes if dgeo else []),
        sglang_release=getattr(args, "_sglbench_release", None),
        accepted_by=list(getattr(args, "_sglbench_accepted_by", [])),
        flags_effect=sglang_args.capacity_effect(args),
    )
    if recommend and failure is not None:
        p.recommendations = recommendations(
            args,
            model_config,
            draft_config,
            gpu_mem_gib,
            p,
            dict(
                free_gib=pre,
                weights_gib=w_gib,
                draft_weights_gib=dw_gib,
                accounting=acc,
                overlap=overlap,
                dflash_cell_scaling=dflash_cell_scaling,
            ),
        )
    return p


# --- recommendations -------------------------------------------------------------------------------


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
    kind = base.failure.kind if base.failure else None
    if kind is None or kind == CONTEXT_TOO_LONG:
        if kind == CONTEXT_TOO_LONG:
            geo_ctx = geometry.derive_context_length(geometry.text_config(model_config))
            cand = _replan(args, {"context_length": geo_ctx}, model_config, draft_config, gpu_mem_gib, opts)
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
    want = base.requested_max_running_requests or (
        SPEC_DEFAULT_MAX_RUNNING_REQUESTS if base.spec_algorithm else None
    )
    out: list[Recommendation] = []
    seen: set[str] = set()

    def consider(changes: dict[str, Any], why: str, rank: int) -> Plan | None:
        cand = _replan(args, changes, model_config, draft_config, gpu_mem_gib, opts)
        if cand is None or not cand.fits:
            return None
        flags = {_flag(k, args): v for k, v in changes.items() if v is not None}
        key = json.dumps(flags, sort_keys=True, default=str)
        if key in seen:
            return cand
        seen.add(key)
        out.append(Recommendation(flags, cand.max_total_num_tokens, cand.max_running_requests, why, rank))
        return cand

    hybrid = base.mamba_slots is not None
    if kind == BAD_CONFIG and hybrid:
        fixes = [
            (
                {"mamba_scheduler_strategy": "extra_buffer"},
                "spec decoding on a hybrid model with radix cache needs the extra_buffer Mamba strategy",
                0,
            ),
            ({"disable_radix_cache": True}, "or turn the radix cache off (1 Mamba slot per request)", 7),
        ]
        for changes, why, rank in fixes:
            if consider(changes, why, rank) is not None:
                continue
            # the fix alone still fails (e.g. pool < context): add the follow-up fix it needs
            fixed = copy.copy(args)
            for dest, value in changes.items():
                setattr(fixed, dest, value)
            cand = _replan(fixed, {}, model_config, draft_config, gpu_mem_gib, opts)
            if cand is None or cand.failure is None or cand.failure.kind == BAD_CONFIG:
                continue
            follow = recommendations(fixed, model_config, draft_config, gpu_mem_gib, cand, opts)
            if follow:
                first = follow[0]
                merged = {_flag(k, args): v for k, v in changes.items()}
                merged.update(first.flags)
                out.append(
                    Recommendation(
                        merged,
                        first.max_total_num_tokens,
                        first.max_running_requests,
                        f"{why}; then {first.why}",
                        rank,
                    )
                )
        return _ordered(out, want)

    # --mem-fraction-static: smallest step up that fits, bounded by what the slack must still hold
    # (never above SGLang's own default for this config: its reserve heuristic is the safety bound)
    mfs_cap = max(base.default_mem_fraction_static, base.mem_fraction_static)
    best_partial = None
    step = round(base.mem_fraction_static + 0.01, 2)
    while step <= mfs_cap + 1e-9:
        cand = _replan(args, {"mem_fraction_static": step}, model_config, draft_config, gpu_mem_gib, opts)
        if cand and cand.fits:
            if want is None or cand.max_running_requests >= want:
                consider(
                    {"mem_fraction_static": step},
                    f"raise the static pool; still leaves ~{(1 - step) * base.pre_gib:.1f} GiB slack",
                    1,
                )
                best_partial = None
                break
            best_partial = best_partial or step
        step = round(step + 0.01, 2)
    if best_partial is not None:
        consider(
            {"mem_fraction_static": best_partial},
            "raise the static pool (serves fewer requests than asked)",
            1,
        )

    if hybrid and base.accounting in ("B", "C"):
        for mfr in (1.5, 2.0, 3.0):
            if consider(
                {"mamba_full_memory_ratio": mfr}, "give the Mamba state a larger share of the budget", 2
            ):
                break
    if hybrid and base.mamba_ssm_dtype == "torch.float32":
        consider(
            {"mamba_ssm_dtype": "bfloat16"},
            "halve the Mamba SSM state (and the speculative intermediate states)",
            3,
        )
    if not base.kv_dtype.startswith("torch.float8") and kind in (
        POOL_SMALLER_THAN_CONTEXT,
        NOT_ENOUGH_MEMORY,
    ):
        consider({"kv_cache_dtype": "fp8_e4m3"}, "halve the KV cache per token", 4)
    if want:
        first_fit = None
        for n in range(want - 1, 0, -1):
            cand = _replan(args, {"max_running_requests": n}, model_config, draft_config, gpu_mem_gib, opts)
            if cand is None or not cand.fits:
                continue
            first_fit = first_fit or n
            if cand.max_running_requests >= n:
                first_fit = n
                break
        if first_fit is not None:
            consider(
                {"max_running_requests": first_fit},
                f"fewer concurrent requests ({first_fit}) shrink the speculative/Mamba reservation",
                5,
            )
    width_flag = (
        sglang_facts.spec_algorithm(base.spec_algorithm).verify_width_flag if base.spec_algorithm else None
    )
    if width_flag == sglang_facts.FLAG_DFLASH_BLOCK_SIZE and base.num_draft_tokens > 2:
        d = base.num_draft_tokens // 2
        while d >= 2:
            if consider(
                {"speculative_dflash_block_size": d, "speculative_num_draft_tokens": None},
                f"smaller DFLASH block ({d}) verifies fewer tokens per step",
                6,
            ):
                break
            d //= 2
    if width_flag == sglang_facts.FLAG_DDTREE_BUDGET and base.num_draft_tokens > 2:
        b = (base.num_draft_tokens - 1) // 2
        while b >= 1:
            if consider({"speculative_ddtree_budget": b}, f"smaller DDTree budget ({b})", 6):
                break
            b //= 2
    if width_flag == sglang_facts.FLAG_NUM_DRAFT_TOKENS and base.num_draft_tokens > 2:
        consider(
            {"speculative_num_draft_tokens": max(2, base.num_draft_tokens // 2)}, "fewer draft tokens", 6
        )
    if hybrid and not getattr(args, "disable_radix_cache", False):
        consider(
            {"disable_radix_cache": True},
            f"no prefix cache: 1 Mamba slot per request instead of {base.mamba_ratio}",
            7,
        )
    new_tp = base.tp_size * 2
    while kind == NOT_ENOUGH_MEMORY and new_tp <= 8:
        tp_opts = dict(opts)
        tp_opts["weights_gib"] = base.weights_gib * base.tp_size / new_tp
        if base.draft_weights_gib:
            tp_opts["draft_weights_gib"] = base.draft_weights_gib * base.tp_size / new_tp
        cand = _replan(args, {"tp_size": new_tp}, model_config, draft_config, gpu_mem_gib, tp_opts)
        if cand is not None and cand.fits:
            why = f"shard the weights over {new_tp} GPUs (needs {new_tp} GPUs of this kind)"
            out.append(
                Recommendation(
                    {"--tp-size": new_tp}, cand.max_total_num_tokens, cand.max_running_requests, why, 9
                )
            )
            break
        new_tp *= 2
    if kind in (POOL_SMALLER_THAN_CONTEXT,) and base.max_total_num_tokens > 1024:
        ctx = base.max_total_num_tokens // 1024 * 1024
        consider({"context_length": ctx}, "cap the context at what the KV pool holds", 8)
    return _ordered(out, want)


def _ordered(recs: list[Recommendation], want: int | None) -> list[Recommendation]:
    """Least disruptive first: the change's rank, plus 5 when it serves fewer requests than asked."""
    return sorted(recs, key=lambda r: r.rank + (0 if want is None or r.max_running_requests >= want else 5))


# --- explanation -----------------------------------------------------------------------------------


def explain(p: Plan) -> str:
    lines = [
        f"{p.model_class} ({p.attention}), TP{p.tp_size}, accounting variant {p.accounting}"
        + (f", {p.spec_algorithm} with {p.num_draft_tokens} draft tokens" if p.spec_algorithm else ""),
        f"GPU {p.gpu_mem_gib:.2f} GiB, free at start {p.pre_gib:.2f} GiB; mem_fraction_static "
        f"{p.mem_fraction_static:.4g} ({p.mem_fraction_static_source})",
        f"  weights            {p.weights_gib:8.2f} GiB  ({p.weights_source})",
    ]
    if p.spec_algorithm and p.draft_weights_gib:
        where = "counted in the static pool" if p.accounting == "C" else "loaded later, from the slack"
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
        + (", draft weights and KV" if p.spec_algorithm and p.accounting != "C" else "")
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
