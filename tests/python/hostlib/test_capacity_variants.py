"""The accounting variants (hostlib/capacity_variants.py): one class per SGLang memory era."""

from __future__ import annotations

import re

import pytest

from sglbench.hostlib import capacity, capacity_variants
from sglbench.hostlib.capacity_variants import (
    NOT_ENOUGH_MEMORY,
    ZERO_REQUESTS,
    MambaInputs,
    VariantA,
    VariantB,
    VariantC,
)

GiB = 1 << 30
P = 50 * (1 << 20)  # one Mamba slot: 50 MiB


def mamba_inputs(**over) -> MambaInputs:
    base = dict(
        rest_bytes=20.0 * GiB,
        per_req_bytes=P,
        ratio=5,
        full_memory_ratio=0.9,
        explicit_slots=None,
        max_running_requests=8,
        attn_dp=1,
        disable_radix=False,
        speculative=True,
        draft_tokens=16,
    )
    base.update(over)
    return MambaInputs(**base)


def test_registry_is_oldest_first_and_the_newest_is_the_default():
    names = list(capacity_variants.VARIANTS)
    assert names == ["A", "B", "C"]
    sinces = [v.since for v in capacity_variants.VARIANTS.values()]
    assert sinces == sorted(sinces)
    assert capacity_variants.DEFAULT == names[-1] == capacity.DEFAULT_ACCOUNTING
    assert tuple(names) == capacity.ACCOUNTING_VARIANTS


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ((0, 5, 10), "A"),
        ((0, 5, 11, 9), "A"),
        ((0, 5, 12), "B"),
        ((0, 5, 15), "B"),
        ((0, 5, 16), "C"),
        ((1,), "C"),
    ],
)
def test_version_maps_to_the_newest_variant_it_reaches(version, name):
    assert capacity_variants.for_version(version).name == name


def test_source_markers_pick_the_newest_variant_whose_markers_all_occur():
    assert capacity_variants.from_source("max_running_request is zero").name == "A"
    assert capacity_variants.from_source("state cache is too small").name == "B"
    blob = "state cache is too small; class KVCacheConfigurator: def _handle_max_mamba_cache"
    assert capacity_variants.from_source(blob).name == "C"
    # C's configurator names without B's guard text are not C
    assert capacity_variants.from_source("KVCacheConfigurator _handle_max_mamba_cache") is None


def test_fixed_slots_explicit_size_wins_and_is_divided_over_attention_dp():
    m = mamba_inputs(explicit_slots=40, disable_radix=True, max_running_requests=8, attn_dp=2)
    assert m.fixed_slots() == 20
    assert mamba_inputs(disable_radix=True, max_running_requests=8, attn_dp=2).fixed_slots() == 4
    assert mamba_inputs().fixed_slots() is None
    assert mamba_inputs(max_running_requests=None).requests_per_rank is None


@pytest.mark.parametrize("variant", [VariantA(), VariantB(), VariantC()], ids=lambda v: v.name)
@pytest.mark.parametrize("speculative", [True, False])
def test_every_split_accounts_for_the_whole_budget(variant, speculative):
    m = mamba_inputs(speculative=speculative, draft_tokens=16 if speculative else 0)
    split = variant.mamba_split(m)
    used = (split.spec_reserved_gib + split.mamba_budget_gib) * GiB + split.kv_budget_bytes
    assert used == pytest.approx(m.rest_bytes, rel=1e-12)
    assert split.slots > 0 and split.failure is None
    assert (split.spec_reserved_gib > 0) == speculative


def test_variant_a_reserves_for_the_requested_count_then_splits_by_the_mamba_share():
    m = mamba_inputs()
    split = VariantA().mamba_split(m)
    reserved = P * 8 * 16
    assert split.spec_reserved_gib * GiB == reserved
    assert split.slots == int((m.rest_bytes - reserved) * 0.9 / 1.9 // P)
    assert split.mamba_budget_gib * GiB == split.slots * P


def test_variant_b_solves_slots_and_reservation_jointly_within_the_share():
    m = mamba_inputs(max_running_requests=None)
    split = VariantB().mamba_split(m)
    K, r, D = split.slots, m.ratio, m.draft_tokens
    share = m.rest_bytes * 0.9 / 1.9
    assert split.spec_reserved_gib * GiB == P * (K // r) * D  # reservation for min(mrr, K // r)
    assert K * P + (K // r) * D * P <= share < (K + 1) * P * (1 + D / r)


def test_variant_c_pads_one_slot_and_so_never_gets_more_than_b():
    m = mamba_inputs()
    b, c = VariantB().mamba_split(m), VariantC().mamba_split(m)
    assert c.mamba_budget_gib * GiB == (c.slots + 1) * P
    assert c.slots <= b.slots


@pytest.mark.parametrize("variant", [VariantB(), VariantC()], ids=lambda v: v.name)
def test_b_and_c_fail_when_no_mamba_slot_fits(variant):
    split = variant.mamba_split(mamba_inputs(rest_bytes=float(P)))
    assert split.slots == 0
    assert split.failure is not None and split.failure.kind == NOT_ENOUGH_MEMORY
    # SGLang prints the solved count before any clamping: zero or negative
    printed = re.search(r"max_mamba_cache_size=(-?\d+)", split.failure.message)
    assert printed is not None and int(printed.group(1)) <= 0
    assert VariantA().mamba_split(mamba_inputs(rest_bytes=float(P))).failure is None


def test_draft_cell_folding_per_variant():
    target, draft, T, d = 36864.0, 4096, 16, 5
    scaled = -(-int(target) * (T + d) // T)
    assert VariantA().dflash_cell(target, draft, T, d) == scaled
    assert VariantB().dflash_cell(target, draft, T, d) == scaled
    assert VariantC().dflash_cell(target, draft, T, d) == target + draft
    assert VariantA().layer_ratio_cell(target, T, 1) is None
    assert VariantB().layer_ratio_cell(target, T, 1) is None
    assert VariantC().layer_ratio_cell(target, T, 1) == int(target * (1 + 1 / T))
    assert [v.default_dflash_cell_scaling for v in (VariantA(), VariantB(), VariantC())] == [
        False,
        True,
        True,
    ]


def test_only_c_counts_the_draft_in_the_static_pool_and_guards_the_kv_budget():
    assert VariantA().static_draft_weights_gib(3.0) == VariantB().static_draft_weights_gib(3.0) == 0.0
    assert VariantC().static_draft_weights_gib(3.0) == 3.0
    assert VariantB().kv_budget_failure(-1.0, 10.0, 90.0, 0.8) is None
    assert VariantC().kv_budget_failure(0.5, 10.0, 90.0, 0.8) is None
    fail = VariantC().kv_budget_failure(-1.0, 10.0, 90.0, 0.8)
    assert fail is not None and fail.exception == "ValueError"
    assert f"above {1 - 10.0 / 90.0:.3f}" in fail.message


def test_request_cap_per_variant():
    for v in (VariantA(), VariantB()):
        assert v.running_requests(100, 50, 2048) == 100
        assert v.running_requests(5000, 50, 2048) == 2048
    assert VariantC().running_requests(100, 50, 2048) == 25


def test_zero_request_failure_texts():
    a = VariantA().zero_requests_failure(3, 5)
    assert (a.kind, a.exception, a.message) == (
        ZERO_REQUESTS,
        "AssertionError",
        "max_running_request is zero",
    )
    for v in (VariantB(), VariantC()):
        f = v.zero_requests_failure(3, 5)
        assert f.exception == "RuntimeError"
        assert "max_mamba_cache_size=3, mamba_ratio=5" in f.message


def test_failure_record_is_shared_with_capacity():
    assert capacity.Failure is capacity_variants.Failure
    assert capacity.NOT_ENOUGH_MEMORY == NOT_ENOUGH_MEMORY
