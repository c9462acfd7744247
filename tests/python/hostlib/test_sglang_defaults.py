"""SGLang's memory defaults per release (hostlib/sglang_defaults.py), each figure worked out by hand
from the release's own ``_handle_gpu_memory_settings`` (0.5.6.post2, 0.5.10.post1 ``server_args.py``;
0.5.23 ``arg_groups/memory_hook.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, sglang_args, sglang_defaults

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
RTX_5080_MIB = 16303  # a 16 GB consumer GPU


def plan(model: str, release: str | None, gpu_mib: float, *flags: str) -> capacity.Plan:
    argv = ["--model-path", str(MODELS / model), *flags]
    args = sglang_args.parse_launch_args_or_raise(argv, release)
    cfg = json.loads((MODELS / model / "config.json").read_text())
    return capacity.plan(args, cfg, None, gpu_mib / 1024, free_gib=gpu_mib / 1024 - 1, weights_gib=1.0)


def test_capture_sizes_match_sglangs_list():
    # 4..32 step 4 (8), 48..256 step 16 (14), 288..512 step 32 (8), 576..1024 step 64 (8)
    assert len(sglang_defaults.pcg_capture_sizes(1024)) == 38
    assert sglang_defaults.pcg_capture_sizes(2048)[-4:] == [1280, 1536, 1792, 2048]
    assert len(sglang_defaults.pcg_capture_sizes(2048)) == 42


@pytest.mark.parametrize(
    ("release", "era"),
    [
        ("0.4.10", "0.4.8"),
        ("0.5.2", "0.4.8"),
        ("0.4.6", "0.4.6"),
        ("0.5.6.post2", "0.5.6"),
        ("0.5.10", "0.5.10"),
        ("0.5.19", "0.5.10"),
        ("0.5.23", "0.5.20"),
    ],
)
def test_release_picks_its_era(release, era):
    p = plan("llama-3.1-8b-instruct", release, 81559)
    assert p.defaults_rule == era


def test_16gb_gpu_default_fraction_by_release():
    # tier < 20 GB: chunk 2048, 8 decode graphs; reserve 512 + 2048*1.5 + 8*2 + 1*1/8*1024 = 3728 MiB
    old = plan("llama-3.1-8b-instruct", "0.5.6.post2", RTX_5080_MIB)
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs) == (2048, 8)
    assert old.mem_fraction_static == round((RTX_5080_MIB - 3728) / RTX_5080_MIB, 3) == 0.771
    # 0.5.10.post1: piecewise CUDA graphs on by default, 42 capture sizes up to 2048 x 8 MiB = 336 MiB more
    mid = plan("llama-3.1-8b-instruct", "0.5.10.post1", RTX_5080_MIB)
    assert mid.mem_fraction_static == round((RTX_5080_MIB - 3728 - 336) / RTX_5080_MIB, 3) == 0.751
    # --disable-piecewise-cuda-graph takes the term away again
    off = plan("llama-3.1-8b-instruct", "0.5.10.post1", RTX_5080_MIB, "--disable-piecewise-cuda-graph")
    assert off.mem_fraction_static == old.mem_fraction_static


def test_24gb_tier_changed_in_0520():
    rtx_4090 = 24564
    old = plan("llama-3.1-8b-instruct", "0.5.10.post1", rtx_4090)
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs) == (2048, 24)
    new = plan("llama-3.1-8b-instruct", "0.5.23", rtx_4090)
    assert (new.chunked_prefill_size, new.cuda_graph_max_bs) == (4096, 48)
    # 512 + 4096*1.5 + 128 + 48*2 decode graphs + 50 prefill capture sizes (up to 4096) x 8 MiB
    assert new.mem_fraction_static == round((rtx_4090 - 512 - 6144 - 128 - 96 - 400) / rtx_4090, 3)
    # a default decode graph size above --max-running-requests is capped to it
    capped = plan("llama-3.1-8b-instruct", "0.5.23", rtx_4090, "--max-running-requests", "16")
    assert capped.cuda_graph_max_bs == 16


def test_speculative_reserve_by_release():
    h100 = 81559
    base = 512 + 8192 * 1.5 + 256 * 2 + 128  # 13,440 MiB; no piecewise graphs with speculative decoding
    for release, extra in (("0.5.6.post2", 2048), ("0.5.10.post1", 4096), ("0.5.23", 0)):
        era = sglang_defaults.era_for(capacity._version_tuple(release))
        d = sglang_defaults.DefaultsInputs(h100, 1, 1, "EAGLE", False, False, 0, None, 16384, False, False)
        graphs = 58 * 8 if release == "0.5.23" else 0  # 0.5.23 keeps its prefill graph with a draft
        assert era.reserved_mib(8192, 256, d) == base + extra + graphs, release


def test_mla_prefill_graph_reserve_is_flat():
    d = sglang_defaults.DefaultsInputs(81559, 8, 1, None, True, False, 0, None, 16384, False, False)
    assert sglang_defaults.Era0510().prefill_graph_reserve_mib(8192, d) == 1536
    dsa = sglang_defaults.DefaultsInputs(
        81559, 8, 1, None, True, False, 0, None, 16384, False, False, "DeepseekV32ForCausalLM"
    )
    assert sglang_defaults.Era0510().prefill_graph_reserve_mib(8192, dsa) == 0  # disabled-model list


def test_04_rule_is_a_reserve_per_gpu_tier():
    # 0.4.10: 24 GB tier reserves (2.8 + 1/10) GiB at TP1; H100 (9.5 + 4/2) GiB at TP4
    p = plan("llama-3.1-8b-instruct", "0.4.10", 24564)
    assert (p.chunked_prefill_size, p.cuda_graph_max_bs) == (2048, 8)
    assert p.mem_fraction_static == round((24564 - 2.9 * 1024) / 24564, 3) == 0.879
    h100 = plan("llama-3.1-70b-instruct", "0.4.10", 81559, "--tp-size", "4")
    assert h100.mem_fraction_static == round((81559 - 11.5 * 1024) / 81559, 3)


def test_046_rule_is_a_constant_by_tp_size():
    assert plan("llama-3.1-8b-instruct", "0.4.6", 81559).mem_fraction_static == 0.88
    assert plan("llama-3.1-70b-instruct", "0.4.6", 81559, "--tp-size", "4").mem_fraction_static == 0.85
    h200 = plan("llama-3.1-8b-instruct", "0.4.6", 143771)
    assert h200.mem_fraction_static == pytest.approx((143771 - 13312) / 143771)
    small = plan("llama-3.1-8b-instruct", "0.4.6", 24564)
    assert (small.chunked_prefill_size, small.cuda_graph_max_bs) == (2048, 8)


def _plan_on(model: str, release: str | None, *flags: str, platform: str = "cuda") -> capacity.Plan:
    argv = ["--model-path", str(MODELS / model), *flags]
    args = sglang_args.parse_launch_args_or_raise(argv, release)
    cfg = json.loads((MODELS / model / "config.json").read_text())
    return capacity.plan(args, cfg, None, 288.0, free_gib=280.0, weights_gib=20.0, platform=platform)


def test_rocm_aiter_scales_the_fraction_above_8192_tokens():
    # server_args "AMD platforms backends": aiter (the MHA default on ROCm) and context_len > 8192 -> x 0.85
    rocm = _plan_on("qwen3-8b", "0.5.17", "--mem-fraction-static", "0.85", platform="rocm")
    assert rocm.mem_fraction_static == pytest.approx(0.85 * 0.85)
    assert any("aiter" in n for n in rocm.notes)
    assert _plan_on("qwen3-8b", "0.5.17", "--mem-fraction-static", "0.85").mem_fraction_static == 0.85
    triton = ("--mem-fraction-static", "0.85", "--attention-backend", "triton")
    assert _plan_on("qwen3-8b", "0.5.17", *triton, platform="rocm").mem_fraction_static == 0.85
    short = ("--mem-fraction-static", "0.85", "--context-length", "8192")
    assert _plan_on("qwen3-8b", "0.5.17", *short, platform="rocm").mem_fraction_static == 0.85
    mla = _plan_on(
        "deepseek-v3", "0.5.17", "--mem-fraction-static", "0.85", "--tp-size", "8", platform="rocm"
    )
    assert mla.mem_fraction_static == 0.85  # MLA models keep it (the Kimi-K2.5 MI355X log)


@pytest.mark.parametrize(
    ("release", "flags", "ratio"),
    [
        ("0.5.13", (), 3),  # auto = no_buffer up to 0.5.13
        ("0.5.14", (), 5),  # extra_buffer with the overlap scheduler: 3 + 2 ping-pong slots
        ("0.5.23", ("--disable-overlap-schedule",), 3),  # no overlap, page 1: no_buffer
        (
            "0.5.23",
            ("--disable-overlap-schedule", "--page-size", "64"),
            4,
        ),  # paging wants extra_buffer: 3 + 1
    ],
)
def test_auto_mamba_strategy_by_release(release, flags, ratio):
    p = _plan_on("qwen3.6-27b", release, "--mem-fraction-static", "0.8", *flags)
    assert p.mamba_ratio == ratio


def test_an_older_accounting_variant_caps_the_release_defaults():
    # variant A is the memory code of builds before 0.5.12: checked against 0.5.23's flags, such a build
    # still resolves auto to no_buffer (3 slots per request), as the mission's fork did
    argv = ["--model-path", str(MODELS / "qwen3.6-27b"), "--mem-fraction-static", "0.8"]
    args = sglang_args.parse_launch_args_or_raise(argv, "0.5.23")
    cfg = json.loads((MODELS / "qwen3.6-27b" / "config.json").read_text())
    old = capacity.plan(args, cfg, None, 96.0, free_gib=94.0, weights_gib=51.0, accounting="A")
    new = capacity.plan(args, cfg, None, 96.0, free_gib=94.0, weights_gib=51.0, accounting="C")
    assert (old.mamba_ratio, new.mamba_ratio) == (3, 5)
    assert capacity.defaults_release(args, capacity.capacity_variants.variant("A")) == (0, 5, 11)
