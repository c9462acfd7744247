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


# Architectures SGLang gives a separate sliding-window KV pool (``configs/model_config.py``
# ``is_hybrid_swa_model``, 0.5.10.post1 and 0.5.23). Any other model with sliding layers (Gemma-2/3,
# Qwen2 with ``use_sliding_window``, Mistral) gets a full-length KV cache in every layer.
HYBRID_SWA_ARCHITECTURES = frozenset(
    {
        "Llama4ForConditionalGeneration",
        "GptOssForCausalLM",
        "MiMoV2FlashForCausalLM",
        "Step3p5ForCausalLM",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
    }
)

# DeepSeek sparse attention (DSA/NSA): these architectures with ``index_topk`` set keep an FP8
# indexer key per token and layer beside the MLA latent (``configs/model_config.py`` ``is_deepseek_nsa``).
DSA_ARCHITECTURES = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLMNextN",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
    }
)
# ``NSATokenToKVPool.quant_block_size`` (128): one fp32 scale per 128 indexer dims
DSA_QUANT_BLOCK = 128

# Families whose state layout is known to differ from every layout modelled here (compressed
# attention, lightning attention): planned from the nearest modelled layout, with a stated uncertainty.
APPROXIMATED_MODEL_TYPES = {
    "deepseek_v4": "DeepSeek-V4 compressed attention (C4/C128 state pools) is planned as plain attention",
    "minimax_m1": "MiniMax-M1 lightning-attention state is not modelled; planned as full attention",
    "minimax": "MiniMax lightning-attention state is not modelled; planned as full attention",
    "jamba": "Jamba's Mamba-1 state is not modelled; planned as full attention",
    "zamba2": "Zamba2's shared attention and Mamba2 state are not modelled; planned as full attention",
    "bailing_moe_v3": "Ling-3 linear attention state is not modelled; planned as full attention",
}


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
    indexer_head_dim: int = 0  # DeepSeek sparse attention: the indexer key per token and layer
    uncertainty: str | None = None  # set when the layout is an approximation of the real one

    @property
    def hybrid_mamba(self) -> bool:
        return self.mamba is not None

    @property
    def mla(self) -> bool:
        """The KV cache holds one latent per token and layer (MLA, also in MLA + linear hybrids)."""
        return self.kv_lora_rank > 0

    def indexer_bytes_per_layer(self) -> int:
        """DSA indexer key (uint8) with one 4-byte scale per 128 dims (``NSATokenToKVPool``)."""
        if not self.indexer_head_dim:
            return 0
        return self.indexer_head_dim + self.indexer_head_dim // DSA_QUANT_BLOCK * 4

    def mla_dim_bytes(self, kv_bytes: float, kv_dtype: str = "", dsa_scaled: bool = True) -> int:
        """Bytes of one token's latent in one layer. DSA with an FP8 cache stores the latent in fp8
        with a 4-byte scale per 128 values and the rope part in bf16
        (``model_runner_kv_cache_mixin.calculate_mla_kv_cache_dim``, flashmla backends); ``dsa_scaled``
        False gives the plain ``(kv_lora_rank + rope) x kv_bytes`` older releases size the pool by."""
        if self.indexer_head_dim and dsa_scaled and kv_dtype.startswith("torch.float8"):
            return self.kv_lora_rank + self.kv_lora_rank // DSA_QUANT_BLOCK * 4 + self.qk_rope_head_dim * 2
        return int((self.kv_lora_rank + self.qk_rope_head_dim) * kv_bytes)

    def cell_bytes(self, kv_bytes: float, kv_dtype: str = "", dsa_scaled: bool = True) -> int:
        """Bytes per token of ``max_total_num_tokens`` for this model alone (§2.4)."""
        fp4 = kv_dtype == "torch.float4_e2m1fn_x2"
        if self.mla:
            dim = self.kv_lora_rank + self.qk_rope_head_dim
            cell = self.mla_dim_bytes(kv_bytes, kv_dtype, dsa_scaled) * self.kv_layers
            if fp4:
                cell = cell // 2 + (dim // 16) * self.kv_layers * int(kv_bytes)
            return cell + self.indexer_bytes_per_layer() * self.kv_layers
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
            elif t in ("linear_attention", "mamba", "gated_deltanet", "conv", "short_conv"):
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


def _nemotron_h_kinds(tcfg: dict[str, Any]) -> list[str] | None:
    """Nemotron-H ``hybrid_override_pattern`` (M Mamba2, * attention, - MLP, E MoE) or its newer
    ``layers_block_type`` list (``configs/nemotron_h.py``): which layers keep KV, which Mamba state."""
    pattern = tcfg.get("hybrid_override_pattern")
    blocks = tcfg.get("layers_block_type")
    if isinstance(pattern, str) and pattern:
        table = {"M": "linear", "*": "full", "-": "none", "E": "none"}
        bad = sorted(set(pattern) - set(table))
        if bad:
            raise GeometryError("hybrid_override_pattern", f"unknown layer symbol(s) {bad} (M, *, -, E)")
        return [table[c] for c in pattern]
    if isinstance(blocks, list) and blocks:
        table = {"mamba": "linear", "attention": "full", "mlp": "none", "moe": "none"}
        bad = sorted({str(b) for b in blocks} - set(table))
        if bad:
            raise GeometryError("layers_block_type", f"unknown block type(s) {bad}")
        return [table[str(b)] for b in blocks]
    raise GeometryError("hybrid_override_pattern", "missing from a Nemotron-H config.json (the layer mix)")


def _state_kinds(tcfg: dict[str, Any], model_type: str, model_class: str, n_layers: int) -> list[str] | None:
    """Per-layer kind as SGLang's config classes list them: "full" (KV), "linear" (Mamba/conv/KDA
    state), "both" (Falcon-H1: attention and Mamba2 in every layer), "sliding", "none" (MLP only);
    None when every layer is a plain attention layer."""
    if model_type == "nemotron_h" or model_class == "NemotronHForCausalLM":
        return _nemotron_h_kinds(tcfg)
    if model_type == "falcon_h1" or model_class == "FalconH1ForCausalLM":
        return ["both"] * n_layers  # configs/falcon_h1.py: full_attention_layer_ids = linear_layer_ids = all
    if model_type == "kimi_linear" or model_class == "KimiLinearForCausalLM":
        lin = tcfg.get("linear_attn_config")
        if not isinstance(lin, dict) or not isinstance(lin.get("kda_layers"), list):
            raise GeometryError("linear_attn_config", "needs kda_layers (1-based KDA layer numbers)")
        kda = {
            int(i) for i in lin["kda_layers"]
        }  # configs/kimi_linear.py is_kda_layer: (i + 1) in kda_layers
        return ["linear" if i + 1 in kda else "full" for i in range(n_layers)]
    if model_class == "Llama4ForConditionalGeneration":
        # configs/model_config.py get_hybrid_layer_ids: chunked-attention layers are (i + 1) % 4 != 0
        return ["sliding" if (i + 1) % 4 else "full" for i in range(n_layers)]
    return _layer_kinds(tcfg, n_layers)


def _mamba2_state(
    tp: int, *, intermediate: int, n_groups: int, heads: int, head_dim: int, state: int, kernel: int
) -> tuple[int, int]:
    """(conv, SSM) elements per layer and rank: ``configs/mamba_utils.py`` ``Mamba2StateShape.create``
    (groups padded to TP, conv ``(conv_dim/tp, kernel-1)``, SSM ``(heads/tp, head_dim, state)``)."""
    if n_groups % tp:
        n_groups += tp - n_groups  # extra_groups_for_head_shards
    conv_dim = intermediate + 2 * n_groups * state
    if conv_dim % tp or heads % tp:
        raise GeometryError(
            "tp_size", f"--tp-size {tp} does not divide the Mamba heads ({heads}) / conv width"
        )
    return conv_dim // tp * (kernel - 1), heads // tp * head_dim * state


def _state_geometry(tcfg: dict[str, Any], model_type: str, n_linear: int, tp: int) -> MambaGeometry:
    """Per-request state of the linear layers, per rank, for each family SGLang serves."""
    if model_type == "nemotron_h" or "mamba_num_heads" in tcfg:
        heads, hd = _int_field(tcfg, "mamba_num_heads"), _int_field(tcfg, "mamba_head_dim")
        conv, ssm = _mamba2_state(
            tp,
            intermediate=heads * hd,
            n_groups=_int_field(tcfg, "n_groups", 8),
            heads=heads,
            head_dim=hd,
            state=_int_field(tcfg, "ssm_state_size", 128),
            kernel=_int_field(tcfg, "conv_kernel", 4),
        )
    elif model_type in ("falcon_h1", "granitemoehybrid") or "mamba_n_heads" in tcfg:
        hidden = _int_field(tcfg, "hidden_size")
        d_ssm = tcfg.get("mamba_d_ssm") if model_type != "granitemoehybrid" else None
        inter = _int_field(tcfg, "mamba_d_ssm") if d_ssm else _int_field(tcfg, "mamba_expand", 2) * hidden
        heads = _int_field(tcfg, "mamba_n_heads")
        hd = tcfg.get("mamba_d_head", "auto")
        hd = inter // heads if hd in (None, "auto") else _int_field(tcfg, "mamba_d_head")
        conv, ssm = _mamba2_state(
            tp,
            intermediate=inter,
            n_groups=_int_field(tcfg, "mamba_n_groups", 1),
            heads=heads,
            head_dim=hd,
            state=_int_field(tcfg, "mamba_d_state", 256),
            kernel=_int_field(tcfg, "mamba_d_conv", 4),
        )
    elif model_type in ("lfm2", "lfm2_moe") or "conv_L_cache" in tcfg:
        # configs/lfm2.py: ShortConv keeps only a conv state of the hidden width, no SSM state
        hidden = _int_field(tcfg, "hidden_size")
        conv, ssm = _mamba2_state(
            tp,
            intermediate=hidden,
            n_groups=1,
            heads=tp,
            head_dim=hidden,
            state=0,
            kernel=_int_field(tcfg, "conv_L_cache"),
        )
    elif model_type == "kimi_linear" or "linear_attn_config" in tcfg:
        # configs/mamba_utils.py KimiLinearStateShape: q/k/v short convs, a head_dim x head_dim state per head
        lin = tcfg["linear_attn_config"]
        heads, hd = _int_field(lin, "num_heads"), _int_field(lin, "head_dim")
        kernel = _int_field(lin, "short_conv_kernel_size", 4)
        if (heads * hd) % tp or heads % tp:
            raise GeometryError(
                "tp_size", f"--tp-size {tp} does not divide linear_attn_config.num_heads={heads}"
            )
        conv, ssm = (kernel - 1) * 3 * (heads * hd // tp), heads // tp * hd * hd
    else:
        return _mamba_geometry(tcfg, n_linear, tp)
    return MambaGeometry(n_linear_layers=n_linear, conv_elems_per_layer=conv, ssm_elems_per_layer=ssm)


def _apply_kinds(
    layout: _Layout,
    kinds: list[str] | None,
    ident: tuple[str, str],
    tcfg: dict[str, Any],
    tp: int,
    is_draft: bool,
    sliding_window: Any,
) -> None:
    """The layer mix on top of the attention layout: hybrid linear state, or a hybrid-SWA pool for the
    architectures SGLang gives one; other sliding layers keep a full-length cache."""
    if kinds is None:
        return
    model_class, model_type = ident
    n_full = kinds.count("full") + kinds.count("both")
    n_linear = kinds.count("linear") + kinds.count("both")
    if n_linear:
        if "sliding" in kinds:
            raise GeometryError("layer_types", "mixing linear and sliding-window layers is not supported")
        layout.attention = "hybrid_linear"
        layout.kv_layers = n_full
        layout.mamba = _state_geometry(tcfg, model_type, n_linear, tp)
        return
    layout.kv_layers = n_full if "none" in kinds else layout.kv_layers
    n_sliding = kinds.count("sliding")
    if not n_sliding:
        return
    if is_draft:
        layout.notes.append(
            f"draft has {n_sliding} sliding-window layers (window {sliding_window}); "
            "SGLang's DFLASH draft pool sizes them as full layers"
        )
    elif model_class in HYBRID_SWA_ARCHITECTURES:
        if not sliding_window:
            raise GeometryError(
                "sliding_window", "layer_types lists sliding layers but sliding_window is unset"
            )
        layout.attention = "hybrid_swa"
        layout.kv_layers = n_full
        layout.swa_layers = n_sliding
    else:
        layout.notes.append(
            f"{n_sliding} sliding-window layers keep a full-length KV cache: SGLang gives {model_class} "
            "no separate sliding-window pool (configs/model_config.py is_hybrid_swa_model)"
        )


def _mixed_layout(tcfg: dict[str, Any], h: _Heads, tp: int) -> _Layout:
    """MHA/GQA attention heads per rank (KV heads replicated when TP exceeds them)."""
    _check_tp_heads("num_attention_heads", h.n_heads, tp, allow_replication=False)
    _check_tp_heads("num_key_value_heads", h.kv_heads, tp, allow_replication=True)
    return _Layout("mha", h.n_layers, max(1, h.kv_heads // tp), h.head_dim)


def _dsa_indexer(model_class: str, tcfg: dict[str, Any]) -> int:
    """Indexer head dim of DeepSeek sparse attention (0 for other models)."""
    if model_class not in DSA_ARCHITECTURES or tcfg.get("index_topk") is None:
        return 0
    return _int_field(tcfg, "index_head_dim", 128)


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
    kinds = _state_kinds(tcfg, model_type, model_class, h.n_layers)
    if kinds is not None and len(kinds) != h.n_layers:
        h = _Heads(len(kinds), h.n_heads, h.kv_heads, h.head_dim)  # Nemotron-H: the pattern sets the depth
    if model_type == "nemotron_h" and tcfg.get("head_dim") is None:
        h = _Heads(h.n_layers, h.n_heads, h.kv_heads, 128)  # configs/nemotron_h.py: head_dim defaults to 128
    sliding_window = tcfg.get("sliding_window") if tcfg.get("use_sliding_window", True) else None
    if model_class == "Llama4ForConditionalGeneration":
        sliding_window = tcfg.get("attention_chunk_size") or sliding_window
    if tcfg.get("kv_lora_rank") is not None:
        layout = _mla_layout(tcfg, h, tp, is_draft)
    else:
        layout = _mixed_layout(tcfg, h, tp)
    _apply_kinds(layout, kinds, (model_class, model_type), tcfg, tp, is_draft, sliding_window)
    indexer = _dsa_indexer(model_class, tcfg)
    if indexer:
        layout.notes.append(
            f"DeepSeek sparse attention: {indexer}-dim FP8 indexer key per token and layer "
            "beside the latent; "
            "SGLang defaults the KV cache to fp8_e4m3 on SM>=10 (B200) and bf16 below "
            "(server_args._set_default_nsa_kv_cache_dtype); give --kv-cache-dtype to pin it"
        )
    uncertainty = APPROXIMATED_MODEL_TYPES.get(model_type)
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
        indexer_head_dim=indexer,
        uncertainty=uncertainty,
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
