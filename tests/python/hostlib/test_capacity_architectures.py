"""KV and state layouts of the architecture families beyond MHA/GQA, MLA and Gated DeltaNet.

Each expected figure is worked out by hand from SGLang's own code (0.5.10.post1 unless stated):
``configs/mamba_utils.py`` (``Mamba2StateShape.create``, ``KimiLinearStateShape.create``,
``BaseLinearStateParams.mamba_cache_per_req``), the per-family config classes in ``configs/``,
``model_runner_kv_cache_mixin.get_cell_size_per_token`` and ``configs/model_config.py``
(``is_hybrid_swa_model``, ``get_hybrid_layer_ids``, ``is_deepseek_nsa``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, geometry, sglang_args

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
GiB = 1 << 30


def cfg(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


def plan(name: str, *flags: str, free: float = 20.0, weights: float = 2.0, gpu: float = 24.0):
    args = sglang_args.parse_launch_args_or_raise(["--model-path", "x", *flags])
    return capacity.plan(args, cfg(name), None, gpu, free_gib=free, weights_gib=weights, accounting="A")


def test_nemotron_h_mamba2_state_and_attention_only_kv():
    geo = geometry.geometry(cfg("nemotron-h-8b"), 1)
    pattern = cfg("nemotron-h-8b")["hybrid_override_pattern"]
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (pattern.count("*"), pattern.count("M")) == (4, 24)
    # conv: (128 heads x 64 + 2 x 8 groups x 128 state) x (4 - 1); SSM: 128 heads x 64 x 128
    assert geo.mamba.conv_elems_per_layer == (128 * 64 + 2 * 8 * 128) * 3 == 30720
    assert geo.mamba.ssm_elems_per_layer == 128 * 64 * 128
    # per request: 24 layers x (30720 x 2 B bf16 conv + 1,048,576 x 4 B fp32 SSM)
    assert geo.mamba.per_req_bytes(4.0) == 24 * (30720 * 2 + 1048576 * 4) == 102_137_856
    # KV: 4 attention layers x 8 KV heads x (128 + 128) x 2 B (head_dim default 128, configs/nemotron_h.py)
    assert geo.cell_bytes(2.0) == 4 * 8 * 256 * 2 == 16384


def test_nemotron_h_tp_pads_groups_to_the_tp_size():
    # n_groups 8 divides TP 8: conv_dim 10240 / 8 x 3; heads 128 / 8 = 16 x 64 x 128
    geo = geometry.geometry(cfg("nemotron-h-8b"), 8)
    assert geo.mamba.conv_elems_per_layer == 10240 // 8 * 3
    assert geo.mamba.ssm_elems_per_layer == 16 * 64 * 128
    assert geo.kv_heads_per_rank == 1


def test_nemotron_h_plan_splits_the_budget_like_sglang():
    p = plan("nemotron-h-8b", "--mem-fraction-static", "0.8")
    rest = 20.0 - 2.0 - 20.0 * 0.2  # 14 GiB
    P = 102_137_856
    slots = int(
        rest * GiB * 0.9 / 1.9 // P
    )  # handle_max_mamba_cache ratio split, mamba_full_memory_ratio 0.9
    assert p.mamba_slots == slots
    assert p.max_total_num_tokens == int(int(rest * GiB - slots * P) // 16384)
    assert p.fits


def test_falcon_h1_has_attention_and_mamba_in_every_layer():
    geo = geometry.geometry(cfg("falcon-h1-tiny"), 1)
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (2, 2)
    # mamba_d_ssm 32 + 2 x 1 group x 16 state = 64 conv channels x 3; SSM 4 heads x 8 x 16
    assert geo.mamba.conv_elems_per_layer == 64 * 3
    assert geo.mamba.ssm_elems_per_layer == 4 * 8 * 16
    assert geo.cell_bytes(2.0) == 2 * 2 * (8 + 8) * 2


def test_falcon_h1_head_dim_auto_and_expand():
    c = cfg("falcon-h1-tiny")
    c.pop("mamba_d_ssm")
    c.update(mamba_expand=2, mamba_d_head="auto")  # intermediate = 2 x 32 = 64, head = 64 / 4 = 16
    geo = geometry.geometry(c, 1)
    assert geo.mamba.conv_elems_per_layer == (64 + 2 * 16) * 3
    assert geo.mamba.ssm_elems_per_layer == 4 * 16 * 16


def test_lfm2_keeps_only_a_conv_state():
    geo = geometry.geometry(cfg("lfm2-700m"), 1)
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (6, 10)
    # configs/lfm2.py: Mamba2StateShape with intermediate = hidden, state 0: conv (1536, 3 - 1), no SSM
    assert geo.mamba.conv_elems_per_layer == 1536 * 2
    assert geo.mamba.ssm_elems_per_layer == 0
    assert geo.mamba.per_req_bytes(4.0) == 10 * 1536 * 2 * 2 == 61440
    assert geo.cell_bytes(2.0) == 6 * 8 * (64 + 64) * 2


def test_kimi_linear_mla_full_layers_and_kda_state():
    geo = geometry.geometry(cfg("kimi-linear-tiny"), 1)
    assert geo.attention == "hybrid_linear" and geo.mla
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (1, 3)
    # KimiLinearStateShape: conv (kernel-1, proj + 2 proj_k) with proj = 4 x 16; SSM (4, 16, 16)
    assert geo.mamba.conv_elems_per_layer == 3 * (64 + 2 * 64)
    assert geo.mamba.ssm_elems_per_layer == 4 * 16 * 16
    # the one MLA layer: (kv_lora_rank 32 + rope 8) x 2 B
    assert geo.cell_bytes(2.0) == (32 + 8) * 2


def test_deepseek_v32_adds_the_indexer_key():
    v3 = geometry.geometry(cfg("deepseek-v3"), 8)
    v32 = geometry.geometry(cfg("deepseek-v3.2"), 8)
    # (512 + 64) x 2 B latent, plus (128 + 128 // 128 x 4) uint8 indexer key, per layer, 61 layers
    assert v3.cell_bytes(2.0) == 576 * 2 * 61 == 70272
    assert v32.cell_bytes(2.0) == 576 * 2 * 61 + 132 * 61 == 78324
    # fp8 KV on the flashmla layout: 512 fp8 + 512 // 128 x 4 scale bytes + 64 x 2 B rope
    assert v32.cell_bytes(1.0, "torch.float8_e4m3fn") == (512 + 16 + 128 + 132) * 61
    assert any("indexer" in n for n in v32.notes)


def test_gemma3_sliding_layers_keep_a_full_cache():
    p = plan("gemma-3-27b-it", "--mem-fraction-static", "0.9", free=79.0, weights=54.0, gpu=80.0)
    assert p.attention == "mha"
    # all 62 layers x 16 KV heads x (128 + 128) x 2 B
    assert p.cell_bytes == 62 * 16 * 256 * 2
    assert any("no separate sliding-window pool" in n for n in p.notes)


def test_llama4_chunked_layers_are_a_sliding_window_pool():
    geo = geometry.geometry(cfg("llama-4-maverick-17b-128e-instruct"), 8)
    # get_hybrid_layer_ids: every 4th layer is global, the rest chunked (window = attention_chunk_size)
    assert (geo.attention, geo.kv_layers, geo.swa_layers, geo.sliding_window) == ("hybrid_swa", 12, 36, 8192)


def test_gpt_oss_stays_a_sliding_window_pool():
    geo = geometry.geometry(cfg("gpt-oss-120b"), 1)
    assert (geo.attention, geo.kv_layers, geo.swa_layers) == ("hybrid_swa", 18, 18)


def test_approximated_family_plans_with_a_stated_uncertainty():
    c = cfg("deepseek-v3")
    c.update(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4")
    args = sglang_args.parse_launch_args_or_raise(["--model-path", "x", "--tp-size", "8"])
    p = capacity.plan(args, c, None, 141.0, free_gib=139.0, weights_gib=85.0)
    assert p.uncertainty and "DeepSeek-V4" in p.uncertainty
    assert p.warnings[0].startswith("approximate plan:")
    assert p.max_total_num_tokens > 0


@pytest.mark.parametrize("bad", ["M-X*", ""])
def test_nemotron_h_bad_pattern_names_the_field(bad):
    c = cfg("nemotron-h-8b")
    c["hybrid_override_pattern"] = bad
    with pytest.raises(geometry.GeometryError) as err:
        geometry.geometry(c, 1)
    assert err.value.field == "hybrid_override_pattern"


def test_granite_hybrid_uses_expand_times_hidden():
    # configs/granitemoehybrid.py: mamba_intermediate_size = mamba_expand x hidden; layer_types mamba/attn
    c = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "layer_types": ["mamba", "mamba", "mamba", "attention"],
        "mamba_expand": 2,
        "mamba_n_heads": 8,
        "mamba_d_head": 16,
        "mamba_n_groups": 1,
        "mamba_d_state": 32,
        "mamba_d_conv": 4,
        "max_position_embeddings": 4096,
    }
    geo = geometry.geometry(c, 1)
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (1, 3)
    assert geo.mamba.conv_elems_per_layer == (2 * 64 + 2 * 1 * 32) * 3
    assert geo.mamba.ssm_elems_per_layer == 8 * 16 * 32
    assert geo.cell_bytes(2.0) == 1 * 2 * (16 + 16) * 2


def test_granite_4_h_micro_published_geometry():
    # the docs' worked figure: 4 attention layers (8 KV heads x 64), 36 Mamba2 layers of 64 heads x 64 x 128
    geo = geometry.geometry(cfg("granite-4.0-h-micro"), 1)
    assert (geo.kv_layers, geo.mamba.n_linear_layers) == (4, 36)
    assert geo.cell_bytes(2.0) == 4 * 8 * (64 + 64) * 2 == 8192
    # conv: (2 x 2048 + 2 x 1 group x 128 state) x (4 - 1) bf16; SSM: 64 x 64 x 128 fp32
    assert geo.mamba.per_req_bytes(4.0) == 36 * ((4096 + 256) * 3 * 2 + 64 * 64 * 128 * 4) == 76_437_504
