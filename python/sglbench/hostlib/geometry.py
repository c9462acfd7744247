"""Model geometry from a Hugging Face ``config.json``, as SGLang's memory accounting sees it.

Standard library only: this module ships to the GPU host as ``module_utils/sglbench_hostlib/geometry.py``.

It answers, for one model and one tensor-parallel size, the questions the KV/Mamba budget needs
(see docs/capacity.md and the fact sheet §2.4-§2.5):

- which attention flavour the KV cache uses (MHA/GQA, MLA latent, hybrid sliding-window),
- how many layers keep a per-token KV cache, KV heads per rank (divided, or replicated when
  ``tp > kv heads``), head dims,
- for hybrid linear-attention models (Qwen3-Next, Qwen3.5/3.6 Gated DeltaNet) the per-request
  conv/SSM state shapes,
- the context length SGLang derives, the model dtype, multimodal (vision tower) details,
- an estimate of the parameter count when no checkpoint is on disk.

Bad input raises :class:`GeometryError` naming the config field (or the flag) at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# SGLang derives the context length from the first of these keys that is set
# (``hf_transformers_utils.CONTEXT_LENGTH_KEYS``), scaled by a rope factor for some rope types.
CONTEXT_LENGTH_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)

# element sizes in bytes and the torch dtype string SGLang logs ("Using KV cache dtype: ...")
DTYPE_BYTES = {
    "torch.float32": 4.0,
    "torch.bfloat16": 2.0,
    "torch.float16": 2.0,
    "torch.float8_e4m3fn": 1.0,
    "torch.float8_e5m2": 1.0,
    "torch.float4_e2m1fn_x2": 1.0,  # packed 2 values/byte; cell formula halves it
}

_CONFIG_DTYPE_TO_TORCH = {
    "float32": "torch.float32",
    "float": "torch.float32",
    "fp32": "torch.float32",
    "bfloat16": "torch.bfloat16",
    "bf16": "torch.bfloat16",
    "float16": "torch.float16",
    "fp16": "torch.float16",
    "half": "torch.float16",
}


# Families whose cache layout the planner does not model (Mamba2/SSM hybrids, KDA, compressed
# attention). Planning them with the generic formulas would give confident wrong numbers.
UNSUPPORTED_MODEL_TYPES = frozenset(
    {
        "nemotron_h",
        "falcon_h1",
        "jamba",
        "mamba",
        "mamba2",
        "bailing_moe_v3",
        "kimi_linear",
        "deepseek_v4",
        "minimax_m1",
        "lfm2",
        "granitemoehybrid",
        "zamba2",
    }
)
UNSUPPORTED_ARCHITECTURES = frozenset({"NemotronHForCausalLM", "FalconH1ForCausalLM", "JambaForCausalLM"})


class GeometryError(ValueError):
    """A config.json field (or a flag checked against it) makes the model unplannable."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class MambaGeometry:
    """Per-request linear-attention (Gated DeltaNet) state, per TP rank, before dtype."""

    n_linear_layers: int
    conv_elems_per_layer: int  # conv_dim/tp * (kernel-1)
    ssm_elems_per_layer: int  # v_heads/tp * v_head_dim * k_head_dim

    def conv_bytes_per_req(self, conv_bytes: float = 2.0) -> int:
        return int(self.conv_elems_per_layer * conv_bytes) * self.n_linear_layers

    def ssm_bytes_per_req(self, ssm_bytes: float) -> int:
        return int(self.ssm_elems_per_layer * ssm_bytes) * self.n_linear_layers

    def per_req_bytes(self, ssm_bytes: float, conv_bytes: float = 2.0) -> int:
        """SGLang's ``mamba_cache_per_req`` (conv + temporal state over all linear layers)."""
        return self.conv_bytes_per_req(conv_bytes) + self.ssm_bytes_per_req(ssm_bytes)


@dataclass(frozen=True)
class Geometry:
    """What the KV/Mamba budget needs to know about one model at one TP size."""

    model_class: str
    model_type: str
    attention: str  # "mha" | "mla" | "hybrid_linear" | "hybrid_swa"
    num_layers: int
    kv_layers: int  # layers that keep a per-token KV cache (full attention for hybrids)
    swa_layers: int  # sliding-window layers (hybrid_swa only; counted in kv_layers=full only)
    kv_heads_total: int
    kv_heads_per_rank: int
    head_dim: int
    v_head_dim: int
    kv_lora_rank: int  # MLA only
    qk_rope_head_dim: int  # MLA only
    sliding_window: int | None
    context_len: int
    model_dtype: str  # torch dtype string
    kv_quant_fp8: bool  # checkpoint says kv_cache_quant_algo=FP8
    quant_method: str | None
    multimodal: bool
    vit_layers: int  # as SGLang reads them (vision_config.num_hidden_layers, default 24)
    vit_hidden: int
    mamba: MambaGeometry | None = None
    mamba_ssm_dtype_config: str | None = None
    param_count_estimate: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def hybrid_mamba(self) -> bool:
        return self.mamba is not None

    def cell_bytes(self, kv_bytes: float, kv_dtype: str = "") -> int:
        """Bytes per token of ``max_total_num_tokens`` for this model alone (§2.4)."""
        fp4 = kv_dtype == "torch.float4_e2m1fn_x2"
        if self.attention == "mla":
            dim = self.kv_lora_rank + self.qk_rope_head_dim
            cell = int(dim * self.kv_layers * kv_bytes)
            if fp4:
                cell = cell // 2 + (dim // 16) * self.kv_layers * int(kv_bytes)
            return cell
        per_layer = self.kv_heads_per_rank * (self.head_dim + self.v_head_dim)
        cell = int(per_layer * (self.kv_layers + self.swa_layers) * kv_bytes)
        if fp4:
            cell = (
                cell // 2 + int(self.kv_heads_per_rank * self.head_dim * self.kv_layers * 2 * kv_bytes) // 16
            )
        return cell

    def full_layer_bytes_per_token(self, kv_bytes: float) -> int:
        return int(self.kv_heads_per_rank * (self.head_dim + self.v_head_dim) * kv_bytes)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config: nested ``text_config``/``llm_config`` merged over the top."""
    for key in ("text_config", "llm_config", "language_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub:
            merged = {
                k: v for k, v in cfg.items() if k not in ("text_config", "llm_config", "language_config")
            }
            merged.update(sub)
            return merged
    return cfg


def _int_field(cfg: dict[str, Any], name: str, default: int | None = None) -> int:
    value = cfg.get(name, default)
    if value is None:
        raise GeometryError(name, "missing from config.json (needed to size the KV cache)")
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise GeometryError(name, f"expected an integer in config.json, got {value!r}")
    if int(value) < 0:
        raise GeometryError(name, f"must not be negative, got {value!r}")
    return int(value)


def config_dtype(cfg: dict[str, Any]) -> str:
    """The torch dtype SGLang runs the model in for ``--dtype auto`` (float32 configs run as bf16)."""
    raw = cfg.get("torch_dtype") or cfg.get("dtype")
    if raw is None and isinstance(cfg.get("text_config"), dict):
        raw = cfg["text_config"].get("torch_dtype") or cfg["text_config"].get("dtype")
    if raw is None:
        return "torch.bfloat16"
    name = str(raw).replace("torch.", "").lower()
    torch_name = _CONFIG_DTYPE_TO_TORCH.get(name)
    if torch_name is None:
        raise GeometryError("torch_dtype", f"unknown dtype {raw!r} (expected bfloat16, float16 or float32)")
    # SGLang/vLLM `_get_and_verify_dtype`: auto + float32 checkpoint -> bfloat16
    return "torch.bfloat16" if torch_name == "torch.float32" else torch_name


def derive_context_length(tcfg: dict[str, Any]) -> int:
    """SGLang ``get_context_length``: first known key, times the rope factor unless the rope type
    already states the original length (llama3, or ``original_max_position_embeddings`` present)."""
    rope = tcfg.get("rope_scaling") or None
    factor = 1.0
    if isinstance(rope, dict):
        factor = float(rope.get("factor", 1) or 1)
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1.0
    for key in CONTEXT_LENGTH_KEYS:
        val = tcfg.get(key)
        if isinstance(val, int | float) and not isinstance(val, bool) and val > 0:
            return int(factor * val)
    return 2048


def _layer_kinds(tcfg: dict[str, Any], n_layers: int) -> list[str] | None:
    """Per-layer kind: "full", "linear" or "sliding"; None when the config declares no mix."""
    types = tcfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            raise GeometryError(
                "layer_types",
                f"expected a list of {n_layers} entries (num_hidden_layers), got "
                f"{len(types) if isinstance(types, list) else type(types).__name__}",
            )
        kinds = []
        for i, t in enumerate(types):
            t = str(t)
            if t in ("full_attention", "attention", "global_attention"):
                kinds.append("full")
            elif t in ("linear_attention", "mamba", "gated_deltanet"):
                kinds.append("linear")
            elif t in ("sliding_attention", "sliding_window_attention", "local_attention"):
                kinds.append("sliding")
            else:
                raise GeometryError(f"layer_types[{i}]", f"unknown layer type {t!r}")
        return kinds
    interval = tcfg.get("full_attention_interval")
    if interval is not None and "linear_num_value_heads" in tcfg:
        step = _int_field(tcfg, "full_attention_interval")
        if step <= 0:
            raise GeometryError("full_attention_interval", "must be a positive integer")
        # transformers configuration_qwen3_next/qwen3_5: full attention iff (i+1) % interval == 0
        return ["full" if (i + 1) % step == 0 else "linear" for i in range(n_layers)]
    return None


def _check_tp_heads(name: str, heads: int, tp: int, allow_replication: bool) -> None:
    if heads <= 0:
        raise GeometryError(name, f"must be positive, got {heads}")
    if heads % tp == 0:
        return
    if allow_replication and tp % heads == 0:
        return
    raise GeometryError(
        "tp_size",
        f"--tp-size {tp} does not divide {name}={heads}"
        + (" (and is not a multiple of it, so heads cannot be replicated)" if allow_replication else "")
        + "; pick a TP size that divides it",
    )


def _model_identity(cfg: dict[str, Any], tp: int) -> tuple[str, dict[str, Any], str]:
    """(model class, text config, model type); rejects configs and families the planner cannot plan."""
    if not isinstance(cfg, dict):
        raise GeometryError("config.json", "expected a JSON object")
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise GeometryError(
            "architectures", "missing or empty in config.json (SGLang picks the model class from it)"
        )
    if tp < 1:
        raise GeometryError("tp_size", f"must be >= 1, got {tp}")
    model_class = archs[0]
    tcfg = text_config(cfg)
    model_type = str(tcfg.get("model_type") or cfg.get("model_type") or "")
    if model_type in UNSUPPORTED_MODEL_TYPES or model_class in UNSUPPORTED_ARCHITECTURES:
        raise GeometryError(
            "architectures",
            f"{model_class} (model_type {model_type!r}) is not modelled by the capacity planner "
            "(its KV/state layout differs from MHA/GQA, MLA, sliding-window and Gated-DeltaNet hybrids); "
            "give the numbers from a real startup log instead",
        )
    return model_class, tcfg, model_type


@dataclass(frozen=True)
class _Heads:
    """Layer count and attention head shapes from the text config."""

    n_layers: int
    n_heads: int
    kv_heads: int
    head_dim: int


def _heads(tcfg: dict[str, Any]) -> _Heads:
    n_layers = _int_field(tcfg, "num_hidden_layers")
    if n_layers == 0:
        raise GeometryError("num_hidden_layers", "must be positive")
    hidden = _int_field(tcfg, "hidden_size")
    n_heads = _int_field(tcfg, "num_attention_heads")
    if n_heads == 0:
        raise GeometryError("num_attention_heads", "must be positive")
    kv_heads = _int_field(tcfg, "num_key_value_heads", n_heads)
    head_dim = tcfg.get("head_dim")
    head_dim = _int_field(tcfg, "head_dim") if head_dim is not None else hidden // n_heads
    return _Heads(n_layers, n_heads, kv_heads, head_dim)


@dataclass
class _Layout:
    """The KV cache layout: attention flavour, layers that keep KV, heads per rank, state shapes."""

    attention: str
    kv_layers: int
    kvh_rank: int
    v_head_dim: int
    swa_layers: int = 0
    kv_lora_rank: int = 0
    qk_rope: int = 0
    mamba: MambaGeometry | None = None
    notes: list[str] = field(default_factory=list)


def _mla_layout(tcfg: dict[str, Any], h: _Heads, tp: int, is_draft: bool) -> _Layout:
    """MLA (DeepSeek-style latent KV): one latent per token and layer, not split across TP."""
    kv_lora_rank = _int_field(tcfg, "kv_lora_rank")
    qk_rope = _int_field(tcfg, "qk_rope_head_dim")
    v_head_dim = _int_field(tcfg, "v_head_dim", h.head_dim)
    _check_tp_heads("num_attention_heads", h.n_heads, tp, allow_replication=False)
    layout = _Layout("mla", h.n_layers, 1, v_head_dim, kv_lora_rank=kv_lora_rank, qk_rope=qk_rope)
    if not is_draft and tcfg.get("num_nextn_predict_layers"):
        layout.notes.append("MTP (nextn) layers are not in the target KV pool")
    return layout


def _mamba_geometry(tcfg: dict[str, Any], n_linear: int, tp: int) -> MambaGeometry:
    """Per-request Gated DeltaNet state per rank (conv state and SSM state of each linear layer)."""
    k_heads = _int_field(tcfg, "linear_num_key_heads")
    v_heads = _int_field(tcfg, "linear_num_value_heads")
    k_dim = _int_field(tcfg, "linear_key_head_dim")
    v_dim = _int_field(tcfg, "linear_value_head_dim")
    kernel = _int_field(tcfg, "linear_conv_kernel_dim")
    if v_heads % tp:
        raise GeometryError("tp_size", f"--tp-size {tp} does not divide linear_num_value_heads={v_heads}")
    n_groups = k_heads if k_heads % tp == 0 else k_heads + (tp - k_heads % tp)
    conv_dim = v_dim * v_heads + 2 * n_groups * k_dim
    return MambaGeometry(
        n_linear_layers=n_linear,
        conv_elems_per_layer=(conv_dim // tp) * (kernel - 1),
        ssm_elems_per_layer=(v_heads // tp) * v_dim * k_dim,
    )


def _mixed_layout(tcfg: dict[str, Any], h: _Heads, tp: int, is_draft: bool, sliding_window: Any) -> _Layout:
    """MHA/GQA, with the hybrid linear-attention or sliding-window mix the config declares."""
    _check_tp_heads("num_attention_heads", h.n_heads, tp, allow_replication=False)
    _check_tp_heads("num_key_value_heads", h.kv_heads, tp, allow_replication=True)
    layout = _Layout("mha", h.n_layers, max(1, h.kv_heads // tp), h.head_dim)
    kinds = _layer_kinds(tcfg, h.n_layers)
    if kinds is not None and "linear" in kinds:
        layout.attention = "hybrid_linear"
        layout.kv_layers = kinds.count("full")
        layout.mamba = _mamba_geometry(tcfg, kinds.count("linear"), tp)
        if "sliding" in kinds:
            raise GeometryError("layer_types", "mixing linear and sliding-window layers is not supported")
    elif kinds is not None and "sliding" in kinds and not is_draft:
        if not sliding_window:
            raise GeometryError(
                "sliding_window", "layer_types lists sliding layers but sliding_window is unset"
            )
        layout.attention = "hybrid_swa"
        layout.kv_layers = kinds.count("full")
        layout.swa_layers = kinds.count("sliding")
    elif kinds is not None and "sliding" in kinds and is_draft:
        layout.notes.append(
            f"draft has {kinds.count('sliding')} sliding-window layers (window {sliding_window}); "
            "SGLang's DFLASH draft pool sizes them as full layers"
        )
    return layout


def _vision(cfg: dict[str, Any], is_draft: bool) -> tuple[bool, int, int]:
    """(multimodal, vision layers, vision hidden size) as SGLang reads them."""
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), dict) else None
    multimodal = bool(vision) and not cfg.get("language_model_only", False) and not is_draft
    vit_layers = int(vision.get("num_hidden_layers", 24)) if vision else 0
    vit_hidden = int(vision.get("hidden_size", 0)) if vision else 0
    return multimodal, vit_layers, vit_hidden


def _quantization(cfg: dict[str, Any], tcfg: dict[str, Any]) -> tuple[str | None, bool]:
    """(quant_method, the checkpoint asks for an FP8 KV cache)."""
    quant = cfg.get("quantization_config") or tcfg.get("quantization_config") or {}
    quant_method = (
        str(quant.get("quant_method")) if isinstance(quant, dict) and quant.get("quant_method") else None
    )
    kv_quant_fp8 = isinstance(quant, dict) and str(quant.get("kv_cache_quant_algo", "")).upper() == "FP8"
    return quant_method, kv_quant_fp8


def geometry(cfg: dict[str, Any], tp: int = 1, *, is_draft: bool = False) -> Geometry:
    """Parse ``config.json`` (dict) into :class:`Geometry` for TP size ``tp``."""
    model_class, tcfg, model_type = _model_identity(cfg, tp)
    h = _heads(tcfg)
    sliding_window = tcfg.get("sliding_window") if tcfg.get("use_sliding_window", True) else None
    if tcfg.get("kv_lora_rank") is not None:
        layout = _mla_layout(tcfg, h, tp, is_draft)
    else:
        layout = _mixed_layout(tcfg, h, tp, is_draft, sliding_window)
    mamba_dtype = tcfg.get("mamba_ssm_dtype")
    multimodal, vit_layers, vit_hidden = _vision(cfg, is_draft)
    quant_method, kv_quant_fp8 = _quantization(cfg, tcfg)
    return Geometry(
        model_class=model_class,
        model_type=model_type,
        attention=layout.attention,
        num_layers=h.n_layers,
        kv_layers=layout.kv_layers,
        swa_layers=layout.swa_layers,
        kv_heads_total=h.kv_heads,
        kv_heads_per_rank=layout.kvh_rank,
        head_dim=h.head_dim,
        v_head_dim=layout.v_head_dim,
        kv_lora_rank=layout.kv_lora_rank,
        qk_rope_head_dim=layout.qk_rope,
        sliding_window=int(sliding_window) if sliding_window else None,
        context_len=derive_context_length(tcfg),
        model_dtype=config_dtype(cfg),
        kv_quant_fp8=kv_quant_fp8,
        quant_method=quant_method,
        multimodal=multimodal,
        vit_layers=vit_layers,
        vit_hidden=vit_hidden,
        mamba=layout.mamba,
        mamba_ssm_dtype_config=str(mamba_dtype) if mamba_dtype else None,
        param_count_estimate=estimate_params(cfg, is_draft=is_draft),
        notes=layout.notes,
    )


# --- parameter count estimate ------------------------------------------------------------------------


def _ival(cfg: dict[str, Any], key: str, default: int = 0) -> int:
    """A config integer for the estimate, lenient: unset or 0 gives ``default``."""
    return int(cfg.get(key) or default)


def _embedding_params(cfg: dict[str, Any], tcfg: dict[str, Any], hidden: int) -> float:
    """Embeddings (+ an untied LM head); a DFlash draft has none but projects the tapped target layers."""
    arch = str((cfg.get("architectures") or [""])[0])
    if "DFlash" in arch or "dflash_config" in cfg:
        taps = (cfg.get("dflash_config") or {}).get("target_layer_ids") or []
        return float(len(taps) * hidden * hidden)
    tied = tcfg.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    return float(_ival(tcfg, "vocab_size") * hidden * (1 if tied else 2))


def _attention_params(tcfg: dict[str, Any], hidden: int) -> int:
    """One full-attention layer's projections (MHA/GQA with an optional output gate, or MLA)."""
    n_heads = _ival(tcfg, "num_attention_heads", 1)
    kv_heads = _ival(tcfg, "num_key_value_heads", n_heads)
    head_dim = _ival(tcfg, "head_dim", hidden // max(n_heads, 1))
    if tcfg.get("kv_lora_rank") is None:
        gate = 2 if tcfg.get("attn_output_gate") else 1
        return (
            hidden * n_heads * head_dim * gate
            + 2 * hidden * kv_heads * head_dim
            + n_heads * head_dim * hidden
        )
    q_lora = _ival(tcfg, "q_lora_rank")
    nope = _ival(tcfg, "qk_nope_head_dim")
    rope = _ival(tcfg, "qk_rope_head_dim")
    v_dim = _ival(tcfg, "v_head_dim", head_dim)
    kvr = int(tcfg["kv_lora_rank"])
    qdim = n_heads * (nope + rope)
    q = hidden * q_lora + q_lora * qdim if q_lora else hidden * qdim
    return q + hidden * (kvr + rope) + kvr * n_heads * (nope + v_dim) + n_heads * v_dim * hidden


def _linear_attention_params(tcfg: dict[str, Any], hidden: int) -> int:
    """One Gated DeltaNet layer: in_proj_qkvz + in_proj_ba + conv1d + out_proj (+ small A_log/dt/norm)."""
    if "linear_num_value_heads" not in tcfg:
        return 0
    vh = _ival(tcfg, "linear_num_value_heads")
    key_dim = _ival(tcfg, "linear_num_key_heads") * _ival(tcfg, "linear_key_head_dim")
    val_dim = vh * _ival(tcfg, "linear_value_head_dim")
    conv = _ival(tcfg, "linear_conv_kernel_dim", 4)
    lin = hidden * (2 * key_dim + 2 * val_dim) + hidden * 2 * vh + (2 * key_dim + val_dim) * conv
    return lin + val_dim * hidden


def _mlp_params(tcfg: dict[str, Any], hidden: int) -> tuple[int, int, int, int]:
    """(dense MLP, MoE MLP incl. router and shared experts, routed experts, leading dense layers)."""
    n_experts = _ival(tcfg, "num_experts") or _ival(tcfg, "n_routed_experts")
    moe_inter = _ival(tcfg, "moe_intermediate_size")
    shared_inter = _ival(tcfg, "shared_expert_intermediate_size")
    dense_mlp = 3 * hidden * _ival(tcfg, "intermediate_size")
    moe_mlp = 3 * hidden * moe_inter * n_experts + hidden * n_experts
    moe_mlp += 3 * hidden * (shared_inter or moe_inter * _ival(tcfg, "n_shared_experts"))
    return dense_mlp, moe_mlp, n_experts, _ival(tcfg, "first_k_dense_replace")


def _vision_params(cfg: dict[str, Any], hidden: int) -> tuple[int, int]:
    """(vision tower blocks, patch merger) parameters; (0, 0) without a vision tower."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, dict):
        return 0, 0
    vh = _ival(vision, "hidden_size")
    vdepth = _ival(vision, "depth") or _ival(vision, "num_hidden_layers")
    vinter = _ival(vision, "intermediate_size", 4 * vh)
    out = _ival(vision, "out_hidden_size", hidden)
    merge = _ival(vision, "spatial_merge_size", 2) ** 2
    return vdepth * (4 * vh * vh + 2 * vh * vinter), (vh * merge) ** 2 + vh * merge * out


def estimate_params(cfg: dict[str, Any], *, is_draft: bool = False) -> float:
    """Rough parameter count from geometry (used only when no checkpoint is on disk).

    Counts embeddings (+ untied LM head), attention projections (MHA/GQA, MLA, gated DeltaNet),
    dense or MoE MLPs and a vision tower. Norms and biases are ignored (<0.1%).
    DFlash drafts have no embedding/LM head of their own (they reuse the target's) but an input
    projection from the tapped target layers.
    """
    tcfg = text_config(cfg)
    hidden = _ival(tcfg, "hidden_size")
    n_layers = _ival(tcfg, "num_hidden_layers")
    total = _embedding_params(cfg, tcfg, hidden)
    try:
        kinds = _layer_kinds(tcfg, n_layers)
    except GeometryError:
        kinds = None
    mha = _attention_params(tcfg, hidden)
    lin = _linear_attention_params(tcfg, hidden)
    dense_mlp, moe_mlp, n_experts, first_dense = _mlp_params(tcfg, hidden)
    for i in range(n_layers):
        kind = kinds[i] if kinds else "full"
        total += lin if kind == "linear" and lin else mha
        total += moe_mlp if (n_experts and i >= first_dense) else dense_mlp
    if not is_draft:
        tower, merger = _vision_params(cfg, hidden)
        total += tower
        total += merger
    return float(total)


def dtype_bytes(torch_dtype: str) -> float:
    try:
        return DTYPE_BYTES[torch_dtype]
    except KeyError:
        raise GeometryError("dtype", f"unknown torch dtype {torch_dtype!r}") from None


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def gib(nbytes: float) -> float:
    return nbytes / float(1 << 30)


__all__ = [
    "CONTEXT_LENGTH_KEYS",
    "DTYPE_BYTES",
    "Geometry",
    "GeometryError",
    "MambaGeometry",
    "ceil_div",
    "config_dtype",
    "derive_context_length",
    "dtype_bytes",
    "estimate_params",
    "geometry",
    "gib",
    "text_config",
]
