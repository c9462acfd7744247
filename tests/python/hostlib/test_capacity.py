"""Capacity planner: geometry per architecture family, accounting variants, defaults, errors, JSON."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, geometry, gpus, sglang_args

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
HF_HUB = str(Path(__file__).resolve().parents[2] / "fixtures" / "hf_cache" / "hub")
H100 = gpus.find_gpu("H100").memory_gib
PRO6000 = gpus.find_gpu("RTX PRO 6000").memory_gib


def cfg(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


def cfg_text(name: str) -> str:
    return (MODELS / name / "config.json").read_text()


def args(*flags: str, model: str = "llama-3.1-8b-instruct"):
    return sglang_args.parse_launch_args_or_raise(["--model-path", str(MODELS / model), *flags])


def plan(model: str, *flags: str, draft: str | None = None, gpu: float = H100, **kw) -> capacity.Plan:
    argv = list(flags)
    if draft:
        argv += ["--speculative-draft-model-path", str(MODELS / draft)]
    return capacity.plan(args(*argv, model=model), cfg(model), cfg(draft) if draft else None, gpu, **kw)


# --- geometry per family ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tp", "attention", "cell"),
    [
        ("llama-3.1-8b-instruct", 1, "mha", 131072),  # 32 layers x 8 kv x 256 x 2 B
        ("llama-3.1-8b-instruct", 8, "mha", 16384),  # 1 kv head per rank
        ("qwen3-8b", 1, "mha", 147456),
        ("mistral-7b-instruct-v0.3", 2, "mha", 65536),
        ("qwen3-30b-a3b", 1, "mha", 98304),  # MoE: only attention matters
        ("qwen3-30b-a3b", 8, "mha", 24576),  # 4 kv heads replicated: 1 per rank
        ("deepseek-v3", 1, "mla", 70272),  # (512 + 64) x 61 x 2
        ("deepseek-v3", 8, "mla", 70272),  # the latent is not split across TP
        ("qwen3-next-80b-a3b-instruct", 1, "hybrid_linear", 24576),  # 12 full layers
        ("qwen3.5-27b", 1, "hybrid_linear", 65536),  # nested text_config, 16 full layers
        ("qwen3.6-27b", 4, "hybrid_linear", 16384),
    ],
)
def test_kv_cell_per_family(model, tp, attention, cell):
    geo = geometry.geometry(cfg(model), tp)
    assert geo.attention == attention
    assert geo.cell_bytes(2.0) == cell


def test_gated_deltanet_state_per_request():
    # Qwen3.5/3.6-27B: 48 GDN layers x (10240 x 3 x 2 B conv + 48 x 128 x 128 x 4 B ssm)
    geo = geometry.geometry(cfg("qwen3.6-27b"), 1)
    assert geo.mamba.n_linear_layers == 48
    assert geo.mamba.per_req_bytes(4.0) == 153_944_064
    assert geo.mamba.per_req_bytes(2.0) == 48 * (61_440 + 1_572_864)
    # Qwen3-Next-80B: 36 GDN layers, linear 16 K / 32 V heads -> 73.7 MiB per request
    nxt = geometry.geometry(cfg("qwen3-next-80b-a3b-instruct"), 1)
    assert nxt.mamba.n_linear_layers == 36
    assert nxt.mamba.per_req_bytes(4.0) == 36 * (32 * 128 * 128 * 4 + 8192 * 3 * 2)
    # TP divides the state
    assert geometry.geometry(cfg("qwen3.6-27b"), 4).mamba.per_req_bytes(4.0) * 4 == 153_944_064


def test_layer_types_and_interval_agree_for_qwen35():
    with_types = cfg("qwen3.5-27b")
    without = copy.deepcopy(with_types)
    del without["text_config"]["layer_types"]
    a, b = geometry.geometry(with_types, 1), geometry.geometry(without, 1)
    assert (a.kv_layers, a.mamba) == (b.kv_layers, b.mamba)


def test_dflash_draft_geometry_notes_sliding_layers():
    geo = geometry.geometry(cfg("qwen3.6-27b-dflash"), 1, is_draft=True)
    assert geo.cell_bytes(2.0) == 20480  # 5 layers x 8 kv x 256 x 2 B, SWA counted as full
    assert any("sliding-window" in n for n in geo.notes)


def test_hybrid_swa_target_splits_full_and_window_tokens():
    swa = {
        "architectures": ["GptOssForCausalLM"],  # synthetic geometry, GPT-OSS-like layout
        "model_type": "gpt_oss",
        "num_hidden_layers": 4,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "max_position_embeddings": 4096,
        "vocab_size": 1000,
    }
    a = sglang_args.parse_launch_args_or_raise(["--model-path", "x", "--mem-fraction-static", "0.5"])
    p = capacity.plan(a, swa, None, 24.0, free_gib=23.0, weights_gib=1.0)
    assert p.attention == "hybrid_swa"
    assert p.swa_max_total_num_tokens == int(p.full_max_total_num_tokens * 0.8)
    # budget = F*nf + 0.8*S*ns per full token
    per = 2 * 128 * 2
    expected = int(p.kv_budget_gib * (1 << 30)) // (per * 2 + 0.8 * per * 2)
    assert p.max_total_num_tokens == pytest.approx(expected, abs=1)


def test_context_length_derivation():
    assert geometry.geometry(cfg("llama-3.1-8b-instruct")).context_len == 131072  # llama3 rope: no factor
    assert geometry.geometry(cfg("deepseek-v3")).context_len == 163840  # yarn with original length: no factor
    assert geometry.geometry(cfg("qwen3.6-27b")).context_len == 262144  # from text_config


def test_param_estimates_are_close_to_published_sizes():
    assert geometry.estimate_params(cfg("llama-3.1-8b-instruct")) == pytest.approx(8.03e9, rel=0.01)
    assert geometry.estimate_params(cfg("qwen3-30b-a3b")) == pytest.approx(30.5e9, rel=0.02)
    assert geometry.estimate_params(cfg("qwen3.6-27b")) == pytest.approx(27.36e9, rel=0.02)  # text + ViT
    assert geometry.estimate_params(cfg("qwen3.6-27b-dflash")) == pytest.approx(1.73e9, rel=0.02)
    assert geometry.estimate_params(cfg("deepseek-v3")) == pytest.approx(671e9, rel=0.02)


# --- defaults ------------------------------------------------------------------------------------


def test_default_mem_fraction_follows_sglang_heuristic():
    p = plan("llama-3.1-8b-instruct")
    # H100 81,559 MiB, no release named: the 0.5.10-0.5.19 rule. reserved = 512 + 8192*1.5 + 256*2 + 128
    # = 13,440 MiB, plus 8 MiB for each of the 58 piecewise-CUDA-graph capture sizes up to 8192 tokens
    # (8 + 14 + 8 + 8 + 12 + 8, server_args._generate_piecewise_cuda_graph_tokens) = 464 MiB
    assert p.mem_fraction_static == pytest.approx(round((81559 - 13440 - 464) / 81559, 3))
    assert (p.chunked_prefill_size, p.cuda_graph_max_bs) == (8192, 256)
    # speculative decoding turns the piecewise graphs off and reserves 4 GiB for the draft
    spec = plan("qwen3-8b", "--speculative-algorithm", "DFLASH", draft="qwen3-8b-dflash-b16")
    assert spec.mem_fraction_static == pytest.approx(round((81559 - 13440 - 4096) / 81559, 3))
    vlm = plan(
        "qwen3.6-27b",
        "--speculative-algorithm",
        "DFLASH",
        "--mamba-scheduler-strategy",
        "extra_buffer",
        draft="qwen3.6-27b-dflash",
        gpu=PRO6000,
    )
    assert vlm.mem_fraction_static == pytest.approx(
        0.821 * 0.95 * (1 - 0.1 * (24 * 1152**2 / (24 * 1024**2) - 1))
    )
    assert plan("llama-3.1-8b-instruct", "--mem-fraction-static", "0.7").mem_fraction_static_source == "flag"


def test_spec_defaults_max_running_requests_to_48_and_resolves_draft_tokens():
    p = plan("qwen3-8b", "--speculative-algorithm", "DFLASH", draft="qwen3-8b-dflash-b16")
    assert p.requested_max_running_requests is None
    assert p.max_running_requests == 48
    assert p.num_draft_tokens == 16  # from the draft config's block_size
    ddtree = plan(
        "qwen3-8b",
        "--speculative-algorithm",
        "DDTREE",
        "--speculative-ddtree-budget",
        "32",
        draft="qwen3-8b-dflash-b16",
    )
    assert ddtree.num_draft_tokens == 33
    eagle = plan("llama-3.1-8b-instruct", "--speculative-algorithm", "NGRAM")
    assert eagle.num_draft_tokens == 12


def test_max_running_requests_without_flag_is_bounded_by_tokens():
    p = plan("llama-3.1-8b-instruct", "--context-length", "8192")
    assert p.max_running_requests == min(
        4096, max(2048, p.max_total_num_tokens * 512 // 8192), p.max_total_num_tokens // 2
    )


def test_page_size_rounds_tokens_down():
    p1 = plan("llama-3.1-8b-instruct", "--mem-fraction-static", "0.8")
    p64 = plan("llama-3.1-8b-instruct", "--mem-fraction-static", "0.8", "--page-size", "64")
    assert p64.max_total_num_tokens % 64 == 0
    assert p1.max_total_num_tokens - 64 < p64.max_total_num_tokens <= p1.max_total_num_tokens


def test_kv_cache_dtype_fp8_doubles_tokens():
    base = plan("llama-3.1-8b-instruct", "--mem-fraction-static", "0.8", free_gib=78.0, weights_gib=15.0)
    fp8 = plan(
        "llama-3.1-8b-instruct",
        "--mem-fraction-static",
        "0.8",
        "--kv-cache-dtype",
        "fp8_e4m3",
        free_gib=78.0,
        weights_gib=15.0,
    )
    assert fp8.kv_dtype == "torch.float8_e4m3fn"
    assert fp8.max_total_num_tokens == pytest.approx(2 * base.max_total_num_tokens, abs=2)


def test_max_total_tokens_caps_the_pool():
    p = plan("llama-3.1-8b-instruct", "--max-total-tokens", "4096")
    assert p.max_total_num_tokens == 4096


# --- accounting variants --------------------------------------------------------------------------


def hybrid_nospec(acc: str) -> capacity.Plan:
    return plan(
        "qwen3-next-80b-a3b-instruct",
        "--tp-size",
        "4",
        "--mem-fraction-static",
        "0.85",
        free_gib=78.0,
        weights_gib=37.5,
        accounting=acc,
    )


def test_variants_differ_in_mamba_padding_slot_only_without_spec():
    a, b, c = hybrid_nospec("A"), hybrid_nospec("B"), hybrid_nospec("C")
    assert a.mamba_slots == b.mamba_slots
    assert c.mamba_slots == a.mamba_slots - 1  # V4 solves for K+1 slots
    assert a.mamba_ratio == 3  # radix cache + no_buffer


def test_variant_a_reserves_for_requested_requests_b_and_c_for_what_fits():
    common = (
        "--speculative-algorithm",
        "DFLASH",
        "--mamba-scheduler-strategy",
        "extra_buffer",
        "--mem-fraction-static",
        "0.75",
        "--max-running-requests",
        "8",
        "--context-length",
        "32768",
    )
    kw = dict(
        draft="qwen3.6-27b-dflash", gpu=PRO6000, free_gib=94.24, weights_gib=51.05, draft_weights_gib=3.22
    )
    a = plan("qwen3.6-27b", *common, accounting="A", **kw)
    b = plan("qwen3.6-27b", *common, accounting="B", **kw)
    c = plan("qwen3.6-27b", *common, accounting="C", **kw)
    P = 153_944_064 / (1 << 30)
    assert a.spec_intermediate_reserved_gib == pytest.approx(8 * 16 * P)
    assert b.spec_intermediate_reserved_gib < a.spec_intermediate_reserved_gib
    assert b.cell_bytes == -(-65536 * 21 // 16)  # DFLASH layer-ratio scaling (V2/V3)
    assert c.cell_bytes == 65536 + 20480  # exact draft cell (V4)
    assert c.rest_gib == pytest.approx(a.rest_gib - 3.22)  # V4 counts the draft weights
    assert a.max_running_requests == 0 and b.max_running_requests > 0 and c.max_running_requests > 0


def test_disable_radix_cache_sets_slots_to_requests():
    p = plan(
        "qwen3.6-27b",
        "--speculative-algorithm",
        "DFLASH",
        "--disable-radix-cache",
        "--max-running-requests",
        "4",
        "--mem-fraction-static",
        "0.75",
        "--context-length",
        "32768",
        draft="qwen3.6-27b-dflash",
        gpu=PRO6000,
        free_gib=94.24,
        weights_gib=51.05,
        accounting="A",
    )
    assert p.mamba_ratio == 1
    assert p.mamba_slots == 4
    assert p.max_running_requests == 4


@pytest.mark.parametrize(
    ("strategy", "extra", "ratio"),
    [
        ("no_buffer", (), 3),
        ("extra_buffer", (), 5),
        ("extra_buffer", ("--disable-overlap-schedule",), 4),
        ("extra_buffer_lazy", (), 4),
    ],
)
def test_mamba_ratio(strategy, extra, ratio):
    p = plan(
        "qwen3-next-80b-a3b-instruct",
        "--tp-size",
        "4",
        "--mamba-scheduler-strategy",
        strategy,
        *extra,
        free_gib=78.0,
        weights_gib=37.5,
    )
    assert p.mamba_ratio == ratio


def test_overlap_option_overrides_flags():
    p = plan(
        "qwen3-next-80b-a3b-instruct",
        "--tp-size",
        "4",
        "--mamba-scheduler-strategy",
        "extra_buffer",
        free_gib=78.0,
        weights_gib=37.5,
        overlap=False,
    )
    assert p.mamba_ratio == 4


def test_eagle_cell_scaling_only_in_v4():
    a = plan(
        "llama-3.1-8b-instruct",
        "--speculative-algorithm",
        "EAGLE3",
        draft="llama-3.1-8b-instruct",
        accounting="A",
        weights_gib=15,
        draft_weights_gib=1,
    )
    c = plan(
        "llama-3.1-8b-instruct",
        "--speculative-algorithm",
        "EAGLE3",
        draft="llama-3.1-8b-instruct",
        accounting="C",
        weights_gib=15,
        draft_weights_gib=1,
    )
    assert a.cell_bytes == 131072
    assert c.cell_bytes == 131072 * 2  # draft with as many layers as the target doubles the cell


def test_sglang_version_mapping():
    assert capacity.accounting_for_version("0.5.10.post1") == "A"
    assert capacity.accounting_for_version("v0.5.11") == "A"
    assert capacity.accounting_for_version("0.5.13") == "B"
    assert capacity.accounting_for_version("0.5.23") == "C"
    assert capacity.accounting_for_version("0.6") == "C"
    assert capacity.resolve_accounting("b") == "B"
    assert capacity.resolve_accounting(None, "0.5.10") == "A"
    with pytest.raises(capacity.PlanError) as err:
        capacity.accounting_for_version("latest")
    assert err.value.field == "--sglang-version"


# --- failures and their SGLang texts -----------------------------------------------------------------


def test_not_enough_memory_messages_per_variant():
    a = plan("llama-3.1-70b-instruct", "--mem-fraction-static", "0.9", accounting="A", weights_gib=131.4)
    c = plan("llama-3.1-70b-instruct", "--mem-fraction-static", "0.9", accounting="C", weights_gib=131.4)
    assert a.failure.kind == c.failure.kind == capacity.NOT_ENOUGH_MEMORY
    assert a.failure.message.startswith("Not enough memory. Please try to increase --mem-fraction-static.")
    assert c.failure.message.startswith("Loaded weights leave no GPU memory for the KV cache")
    assert "do not fit" in a.failure.explanation
    tp = [r for r in a.recommendations if "--tp-size" in r.flags]
    assert tp and tp[0].flags["--tp-size"] in (2, 4, 8)


def test_zero_requests_message_in_v3_v4_names_the_slots():
    # force the Mamba cap with an explicit tiny cache: 2 slots, ratio 3
    p = plan(
        "qwen3-next-80b-a3b-instruct",
        "--tp-size",
        "4",
        "--max-mamba-cache-size",
        "2",
        free_gib=78.0,
        weights_gib=37.5,
        accounting="B",
    )
    assert p.failure.kind == capacity.ZERO_REQUESTS
    assert p.failure.exception == "RuntimeError"
    assert "max_mamba_cache_size=2, mamba_ratio=3, resulting max_num_reqs=0" in p.failure.message
    assert p.recommendations
    assert all(r.max_running_requests > 0 for r in p.recommendations)


def test_spec_on_hybrid_with_radix_and_no_buffer_is_a_bad_config():
    small = ("--max-running-requests", "4", "--context-length", "32768")
    p = plan(
        "qwen3.6-27b",
        "--speculative-algorithm",
        "DFLASH",
        *small,
        draft="qwen3.6-27b-dflash",
        gpu=PRO6000,
        weights_gib=51.05,
        draft_weights_gib=3.22,
    )
    assert p.failure.kind == capacity.BAD_CONFIG
    assert "not compatible with radix cache" in p.failure.message
    # spelled for the newest release that accepts the command line (no --sglang-version given)
    assert p.recommendations[0].flags == {"--mamba-radix-cache-strategy": "extra_buffer"}
    # with SGLang's defaults (262k context, 48 requests) the strategy fix needs a follow-up fix
    big = plan(
        "qwen3.6-27b",
        "--speculative-algorithm",
        "DFLASH",
        draft="qwen3.6-27b-dflash",
        gpu=PRO6000,
        weights_gib=51.05,
        draft_weights_gib=3.22,
    )
    first = big.recommendations[0]
    assert first.flags["--mamba-radix-cache-strategy"] == "extra_buffer" and len(first.flags) == 2
    argv = ["--speculative-algorithm", "DFLASH"]
    for flag, value in first.flags.items():
        argv += [flag] if value is True else [flag, str(value)]
    again = plan(
        "qwen3.6-27b",
        *argv,
        draft="qwen3.6-27b-dflash",
        gpu=PRO6000,
        weights_gib=51.05,
        draft_weights_gib=3.22,
    )
    assert again.fits
    assert again.max_total_num_tokens == first.max_total_num_tokens


def test_pool_smaller_than_context_and_its_fixes():
    p = plan(
        "qwen3-32b",
        "--mem-fraction-static",
        "0.85",
        "--context-length",
        "40960",
        gpu=gpus.find_gpu("L40S").memory_gib,
        free_gib=43.5,
        weights_gib=30.6,
    )
    assert p.failure.kind == capacity.POOL_SMALLER_THAN_CONTEXT
    assert p.max_total_num_tokens < 40960
    flags = [tuple(r.flags) for r in p.recommendations]
    assert ("--kv-cache-dtype",) in flags
    assert ("--context-length",) in flags
    for r in p.recommendations:
        assert r.max_total_num_tokens > 0


def test_context_longer_than_model_fails_like_sglang():
    p = plan("qwen3-8b", "--context-length", "100000")
    assert p.failure.kind == capacity.CONTEXT_TOO_LONG
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in p.failure.message


# --- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda c: c.pop("num_hidden_layers"), "num_hidden_layers"),
        (lambda c: c.pop("architectures"), "architectures"),
        (lambda c: c.update(num_key_value_heads="eight"), "num_key_value_heads"),
        (
            # a Nemotron-H is planned from its layer pattern: without one the error names that field
            lambda c: c.update(architectures=["NemotronHForCausalLM"], model_type="nemotron_h"),
            "hybrid_override_pattern",
        ),
        (lambda c: c.update(layer_types=["full_attention"]), "layer_types"),
    ],
)
def test_bad_config_names_the_field(mutate, field):
    c = cfg("llama-3.1-8b-instruct")
    mutate(c)
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan(args(), c, None, H100)
    assert err.value.field == field


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b-instruct", 5), ("qwen3.6-27b", 16)])
def test_impossible_tp_names_the_flag(model, tp):
    with pytest.raises(capacity.PlanError) as err:
        plan(model, "--tp-size", str(tp))
    assert err.value.field == "--tp-size"
    assert str(tp) in err.value.message


def test_dflash_without_draft_config_is_an_error():
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan(
            args("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/x"),
            cfg("qwen3-8b"),
            None,
            H100,
        )
    assert err.value.field == "--speculative-draft-model-path"


def test_plan_command_errors():
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan_command(["--model-path", "/nonexistent"], gpu="H100")
    assert err.value.field == "--model-path"
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan_command(["--model-path", str(MODELS / "qwen3-8b")], gpu="TPU v5")
    assert err.value.field == "--gpu"
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan_command(["--model-path", str(MODELS / "qwen3-8b"), "--bogus-flag"], gpu="H100")
    assert "--bogus-flag" in err.value.message


# --- hub ids (org/name) from the Hugging Face cache ----------------------------------------------------


def test_plan_command_reads_a_hub_id_from_the_cache_and_says_where(hub_cache):
    local = capacity.plan_command(["--model-path", str(MODELS / "qwen3-8b")], gpu="H100")
    snapshot = hub_cache.add("Qwen/Qwen3-8B", {"config.json": cfg_text("qwen3-8b")})
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    p = capacity.plan_command(["--model-path", "Qwen/Qwen3-8B"], gpu="H100", env=env)
    assert p.max_total_num_tokens == local.max_total_num_tokens
    assert p.notes[0].startswith("--model-path Qwen/Qwen3-8B (revision main = commit ")
    assert str(snapshot) in p.notes[0] and "(from HF_HUB_CACHE)" in p.notes[0]
    assert p.to_dict()["notes"][0] == p.notes[0] and f"note: {p.notes[0]}" in p.explain()
    assert not any("Hugging Face" in n for n in local.notes)


def test_plan_command_honours_revision_flags_for_target_and_draft(hub_cache):
    hub_cache.add("Qwen/Qwen3-8B", {"config.json": '{"broken": true}'})  # main: not plannable
    good = hub_cache.add("Qwen/Qwen3-8B", {"config.json": cfg_text("qwen3-8b")}, revision="v1")
    draft = hub_cache.add("z-lab/Qwen3-8B-DFlash-b16", {"config.json": cfg_text("qwen3-8b-dflash-b16")})
    pinned = hub_cache.commit("draft pin")
    hub_cache.add(
        "z-lab/Qwen3-8B-DFlash-b16",
        {"config.json": cfg_text("qwen3-8b-dflash-b16")},
        revision=None,
        commit=pinned,
    )
    argv = [
        "--model-path",
        "Qwen/Qwen3-8B",
        "--revision",
        "v1",
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "z-lab/Qwen3-8B-DFlash-b16",
    ]
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    p = capacity.plan_command(argv, gpu="H100", env=env)
    assert p.notes[0].startswith(f"--model-path Qwen/Qwen3-8B (revision v1 = commit {good.name})")
    assert p.notes[1].startswith(
        f"--speculative-draft-model-path z-lab/Qwen3-8B-DFlash-b16 (revision main = commit {draft.name})"
    )
    pinned_plan = capacity.plan_command(
        [*argv, "--speculative-draft-model-revision", pinned], gpu="H100", env=env
    )
    assert f"(commit {pinned})" in pinned_plan.notes[1]


def test_plan_command_with_an_uncached_hub_id_names_the_flag_and_the_fix(hub_cache):
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan_command(["--model-path", "Qwen/Qwen3-8B"], gpu="H100", env=env)
    assert err.value.field == "--model-path"
    assert "Qwen/Qwen3-8B (revision main) is not in the Hugging Face cache" in err.value.message
    assert "huggingface-cli download Qwen/Qwen3-8B" in err.value.message
    hub_cache.add("Qwen/Qwen3-8B", {"config.json": cfg_text("qwen3-8b")})
    argv = ["--model-path", "Qwen/Qwen3-8B", "--speculative-algorithm", "DFLASH"]
    with pytest.raises(capacity.PlanError) as err:
        capacity.plan_command([*argv, "--speculative-draft-model-path", "z-lab/none"], gpu="H100", env=env)
    assert err.value.field == "--speculative-draft-model-path" and "z-lab/none" in err.value.message


def test_a_snapshot_without_config_json_asks_for_a_download(hub_cache):
    hub_cache.add("org/m", {"tokenizer.json": "{}"})
    with pytest.raises(capacity.PlanError) as err:
        capacity.read_config("org/m", "--model-path", env={"HF_HUB_CACHE": str(hub_cache.root)})
    assert "no config.json in the cached snapshot of org/m" in err.value.message
    assert "huggingface-cli download org/m" in err.value.message


def test_read_config_takes_a_path_or_a_resolved_model(hub_cache):
    hub_cache.add("Qwen/Qwen3-8B", {"config.json": cfg_text("qwen3-8b")})
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    resolved = capacity.resolve_model("Qwen/Qwen3-8B", "--model-path", None, env)
    assert capacity.read_config(resolved, "--model-path") == cfg("qwen3-8b")
    assert capacity.read_config("Qwen/Qwen3-8B", "--model-path", env=env) == cfg("qwen3-8b")
    assert capacity.read_config(str(MODELS / "qwen3-8b"), "--model-path") == cfg("qwen3-8b")


# --- JSON contract ----------------------------------------------------------------------------------

REQUIRED_KEYS = {
    "max_total_num_tokens",
    "max_running_requests",
    "mamba_slots",
    "kv_cache_gib",
    "mem_fraction_static",
    "accounting",
    "fits",
    "failure",
    "recommendations",
    "context_len",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "cuda_graph_max_bs",
    "page_size",
    "kv_dtype",
    "model_class",
    "pre_gib",
    "weights_gib",
    "draft_weights_gib",
    "avail_after_weights_gib",
    "k_size_gib",
    "v_size_gib",
    "draft_k_size_gib",
    "draft_v_size_gib",
    "mamba_conv_gib",
    "mamba_ssm_gib",
    "spec_intermediate_ssm_gib",
    "spec_intermediate_conv_gib",
    "pool_end_avail_gib",
    "cuda_graph_gib",
    "slack",
}


def test_to_dict_shape_and_json_roundtrip():
    ok = plan("llama-3.1-8b-instruct").to_dict()
    assert set(ok) >= REQUIRED_KEYS
    assert ok["mamba_slots"] is None
    assert ok["failure"] is None and ok["fits"] is True
    json.loads(json.dumps(ok))
    bad = plan(
        "qwen3-next-80b-a3b-instruct",
        "--tp-size",
        "4",
        "--max-mamba-cache-size",
        "2",
        free_gib=78.0,
        weights_gib=37.5,
        accounting="A",
    ).to_dict()
    assert set(bad["failure"]) >= {"kind", "message"}
    assert bad["failure"]["kind"] == "zero_requests"
    for rec in bad["recommendations"]:
        assert set(rec) >= {"flags", "max_total_num_tokens", "max_running_requests", "why"}
        assert all(k.startswith("--") for k in rec["flags"])


def test_explain_mentions_where_memory_goes():
    text = plan("qwen3-next-80b-a3b-instruct", "--tp-size", "4", free_gib=78.0, weights_gib=37.5).explain()
    for word in ("weights", "Mamba state", "KV cache", "slack", "FITS"):
        assert word in text


def test_dtype_flag_sets_kv_dtype_and_bad_values_name_the_flag():
    assert plan("llama-3.1-8b-instruct", "--dtype", "float16").kv_dtype == "torch.float16"
    with pytest.raises(sglang_args.SglangArgsError, match="--dtype: invalid choice: 'int3'"):
        plan("llama-3.1-8b-instruct", "--dtype", "int3")


def test_accounting_from_installed_source_markers():
    a = ['assert self.max_running_requests > 0, "max_running_request is zero"']
    b = [*a, 'raise RuntimeError("Hybrid (mamba/linear-attention) state cache is too small to serve any")']
    c = [*b, "class KVCacheConfigurator:\n    def _handle_max_mamba_cache(self, rest):"]
    assert [capacity.accounting_from_source(t) for t in (a, b, c, ["nothing"])] == ["A", "B", "C", None]


def test_runs_as_ansible_module_utils_with_stdlib_only(tmp_path):
    """On the GPU host only the shipped module_utils package exists: no sglbench package, no site-packages."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    mu = tmp_path / "ansible" / "module_utils"
    mu.mkdir(parents=True)
    (tmp_path / "ansible" / "__init__.py").write_text("")
    (mu / "__init__.py").write_text("")
    pkg = mu / "sglbench_hostlib"
    pkg.mkdir()
    names = ("__init__", "capacity", "geometry", "gpus", "checkpoint", "hf_cache", "sglang_args")
    names += ("sglang_catalog", "sglang_defaults", "sglang_facts", "capacity_variants")
    shipped = root / "plugins" / "module_utils" / "sglbench_hostlib"
    for name in names:
        (pkg / f"{name}.py").write_text((shipped / f"{name}.py").read_text())
    # no catalog files on the host: the module gets the release's flags from preflight as a document
    catalog = root / "python" / "sglbench" / "hostlib" / "sglang_catalogs" / "0.5.23.json"
    code = (
        "import json\n"
        "from ansible.module_utils.sglbench_hostlib import capacity as c, sglang_catalog as sc\n"
        f"cat = sc.catalog_from_dict(json.load(open({str(catalog)!r})))\n"
        f"m = {str(MODELS / 'qwen3-8b')!r}\n"
        "p = c.plan_command(['--model-path', m], gpu='H100', sglang_catalog=cat)\n"
        "print(p.max_total_num_tokens > 0, p.fits, p.sglang_release)\n"
        f"env = {{'HF_HUB_CACHE': {HF_HUB!r}}}\n"
        "h = c.plan_command(['--model-path', 'Qwen/Qwen3-8B'], gpu='H100', env=env, sglang_catalog=cat)\n"
        "print(h.max_total_num_tokens == p.max_total_num_tokens)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "0.5.23", "True"]
