"""The planner's stages (hostlib/capacity.py): inputs, budget, pools, limits, failure, recommendations."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, capacity_variants, sglang_args

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
GiB = 1 << 30


def config(name: str) -> dict:
    return capacity.read_config(str(MODELS / name), "--model-path")


def inputs(
    argv: list[str], model: str, draft: str | None = None, acc: str = "C", gpu: float = 95.0, **kw
) -> tuple[argparse.Namespace, capacity.Inputs]:
    flags = ["--model-path", str(MODELS / model), *argv]
    if draft:
        flags += ["--speculative-draft-model-path", str(MODELS / draft)]
    args = sglang_args.parse_launch_args_or_raise(flags)
    sources = capacity.WeightSources(
        kw.pop("weights_gib", 16.0), kw.pop("draft_weights_gib", 1.0), None, None
    )
    configs = (config(model), config(draft) if draft else None)
    inp = capacity.resolve_inputs(
        args, configs, gpu, kw.pop("free_gib", None), sources, capacity_variants.variant(acc), **kw
    )
    return args, inp


def test_inputs_fill_sglang_defaults_and_the_speculative_request_default():
    _, inp = inputs(["--speculative-algorithm", "DFLASH"], "qwen3-8b", "qwen3-8b-dflash-b16")
    assert inp.launch.requested_mrr is None
    assert inp.launch.mrr == capacity.SPEC_DEFAULT_MAX_RUNNING_REQUESTS
    assert inp.memory.mfs_src == "default" and inp.memory.mfs == inp.memory.mfs_default
    assert inp.speculation.algo == "DFLASH" and inp.speculation.dflash_like
    assert inp.speculation.dgeo is not None and inp.speculation.draft_tokens > 0
    assert any("defaults to 48" in n for n in inp.notes)


def test_inputs_reject_bad_input_naming_the_flag():
    args, _ = inputs([], "qwen3-8b")
    args.mem_fraction_static = 1.5  # the flag parser rejects it too; the planner must not rely on that
    sources = capacity.WeightSources(16.0, None, None, None)
    with pytest.raises(capacity.PlanError) as exc:
        capacity.resolve_inputs(
            args, (config("qwen3-8b"), None), 95.0, None, sources, capacity_variants.variant("C")
        )
    assert exc.value.field == "--mem-fraction-static"
    with pytest.raises(capacity.PlanError) as exc:
        inputs([], "qwen3-8b", free_gib=200.0)
    assert exc.value.field == "--free-gib"


@pytest.mark.parametrize("acc", ["A", "B", "C"])
def test_budget_counts_the_draft_in_the_static_pool_only_where_the_variant_does(acc):
    _, inp = inputs(
        ["--mem-fraction-static", "0.8"], "qwen3-8b", acc=acc, free_gib=90.0, draft_weights_gib=2.0
    )
    b = capacity.budget(inp)
    draft = inp.memory.draft_weights if inp.variant.draft_in_static_pool else 0.0
    assert b.post == pytest.approx(90.0 - 16.0 - draft)
    assert b.reserved_by_mfs == pytest.approx(90.0 * 0.2)
    assert b.rest == pytest.approx(b.post - b.reserved_by_mfs)


@pytest.mark.parametrize("acc", ["A", "B", "C"])
def test_kv_cell_folds_a_dflash_draft_as_the_variant_says(acc):
    args, inp = inputs(["--speculative-algorithm", "DFLASH"], "qwen3-8b", "qwen3-8b-dflash-b16", acc=acc)
    cell = capacity.kv_cell(args, inp)
    assert cell.target == inp.geo.cell_bytes(inp.kv_bytes, inp.kv_dtype)
    if inp.cell_scaling:
        expect = inp.variant.dflash_cell(
            cell.target, cell.draft, inp.geo.kv_layers, inp.speculation.dgeo.num_layers
        )
        assert cell.folded == expect > cell.target
    else:
        assert cell.folded == cell.target


def test_mamba_pool_is_empty_for_models_without_linear_attention():
    args, inp = inputs([], "qwen3-8b")
    pool = capacity.mamba_pool(args, inp, 30.0)
    assert (pool.slots, pool.ratio, pool.kv_budget_gib, pool.failure) == (None, None, 30.0, None)


def test_mamba_pool_of_a_hybrid_model_leaves_the_rest_for_kv():
    args, inp = inputs(["--mamba-scheduler-strategy", "extra_buffer"], "qwen3.6-27b", weights_gib=51.0)
    pool = capacity.mamba_pool(args, inp, 30.0)
    assert pool.slots and pool.slots > 0 and pool.ratio == 5
    assert pool.budget_gib + pool.kv_budget_gib + pool.spec_reserved_gib == pytest.approx(30.0)


def test_kv_tokens_round_to_the_page_and_respect_max_total_tokens():
    args, inp = inputs(["--page-size", "64", "--max-total-tokens", "100000"], "qwen3-8b")
    cell = capacity.kv_cell(args, inp)
    tokens = capacity.kv_tokens(args, inp, cell, 30.0)
    assert tokens.total == 100000 // 64 * 64
    assert tokens.warnings == []
    args, inp = inputs(["--max-total-tokens", "10000000"], "qwen3-8b")
    tokens = capacity.kv_tokens(args, inp, capacity.kv_cell(args, inp), 30.0)
    assert tokens.total == int(30.0 * GiB) // inp.geo.cell_bytes(inp.kv_bytes)
    assert "above the profiled" in tokens.warnings[0]


def test_running_requests_are_capped_by_mamba_slots_and_warn():
    _, inp = inputs(["--max-running-requests", "64"], "qwen3-8b", acc="A")
    pool = capacity.MambaPool(slots=30, ratio=3)
    req = capacity.running_requests(inp, 500000, pool)
    assert req.n == 10
    assert "capped by Mamba state slots (30 // 3)" in req.warnings[0]
    assert capacity.running_requests(inp, 500000, capacity.MambaPool()).n == 64


def test_pools_size_k_and_v_from_the_tokens_plus_a_page():
    _, inp = inputs([], "qwen3-8b")
    tokens = capacity.Tokens(1000, None, None, [])
    p = capacity.pools(inp, tokens, capacity.MambaPool(), 4)
    g = inp.geo
    assert p.k * GiB == pytest.approx(1001 * g.kv_heads_per_rank * g.head_dim * g.kv_layers * inp.kv_bytes)
    assert p.req_to_token * GiB == pytest.approx(5 * (inp.launch.ctx + 4) * 4)
    assert p.draft_kv == 0.0 and p.mamba_conv == 0.0


@pytest.mark.parametrize("acc", ["A", "C"])
def test_slack_carries_the_draft_unless_the_static_pool_holds_it(acc):
    args, inp = inputs(
        ["--speculative-algorithm", "DFLASH"],
        "qwen3-8b",
        "qwen3-8b-dflash-b16",
        acc=acc,
        draft_weights_gib=2.0,
    )
    b = capacity.budget(inp)
    p = capacity.Pools(10.0, 10.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5)
    sl = capacity.slack(args, inp, b, p)
    in_static = inp.variant.draft_in_static_pool
    assert sl.breakdown["draft_weights_gib"] == (0.0 if in_static else 2.0)
    assert sl.breakdown["draft_kv_gib"] == (0.0 if in_static else 2.0)
    assert sl.pool_end == pytest.approx(b.post - 20.5 - (2.0 if in_static else 0.0))


def test_failure_order_context_before_memory():
    args, inp = inputs(["--context-length", "10000000", "--mem-fraction-static", "0.05"], "qwen3-8b")
    b = capacity.budget(inp)
    fail = capacity.failure(args, inp, b, capacity.MambaPool(kv_budget_gib=b.rest), 0, 0)
    assert fail is not None and fail.kind == capacity.CONTEXT_TOO_LONG
    args, inp = inputs(["--mem-fraction-static", "0.05"], "qwen3-8b")
    b = capacity.budget(inp)
    fail = capacity.failure(args, inp, b, capacity.MambaPool(kv_budget_gib=b.rest), 0, 0)
    assert fail is not None and fail.kind == capacity.NOT_ENOUGH_MEMORY
    assert "kept back" in fail.explanation  # the budget is spelled out for memory failures


def test_failure_zero_requests_comes_from_the_variant():
    args, inp = inputs([], "qwen3-8b", acc="A")
    b = capacity.budget(inp)
    fail = capacity.failure(
        args, inp, b, capacity.MambaPool(slots=2, ratio=5, kv_budget_gib=b.rest), 50000, 0
    )
    assert fail == capacity_variants.VariantA().zero_requests_failure(2, 5)


def test_a_new_accounting_variant_is_one_class(monkeypatch):
    """A future SGLang memory rework: one subclass registered in VARIANTS; the stages pick it up."""

    class VariantD(capacity_variants.VariantC):
        name = "D"
        since = (0, 9, 0)

        def running_requests(self, requested_per_rank: int, tokens: int, estimated: int) -> int:
            return min(requested_per_rank, tokens // 4)

    monkeypatch.setitem(capacity_variants.VARIANTS, "D", VariantD())
    assert capacity.accounting_for_version("0.9.1") == "D"
    assert capacity.resolve_accounting("d") == "D"
    args = sglang_args.parse_launch_args_or_raise(["--model-path", str(MODELS / "qwen3-8b")])
    args.max_running_requests = 10**6
    c = capacity.plan(args, config("qwen3-8b"), None, 95.0, weights_gib=16.0, accounting="C")
    d = capacity.plan(args, config("qwen3-8b"), None, 95.0, weights_gib=16.0, accounting="D")
    assert d.accounting == "D" and d.max_total_num_tokens == c.max_total_num_tokens
    assert d.max_running_requests == c.max_total_num_tokens // 4 < c.max_running_requests
