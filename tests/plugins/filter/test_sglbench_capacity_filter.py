"""The record's capacity block: predicted vs observed tokens, request slots and Mamba slots."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, sglang_logs

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "tests" / "fixtures" / "models"
_spec = importlib.util.spec_from_file_location(
    "sglbench_capacity_filter", REPO / "plugins/filter/sglbench_capacity.py"
)
assert _spec and _spec.loader
flt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flt)


def mission_plan(mrr: int) -> dict:
    flags = [
        "--model-path", str(MODELS / "qwen3.6-27b"),
        "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", str(MODELS / "qwen3.6-27b-dflash"),
        "--mem-fraction-static", "0.75", "--max-running-requests", str(mrr),
        "--context-length", "32768", "--speculative-dflash-block-size", "16",
        "--mamba-scheduler-strategy", "extra_buffer",
    ]  # fmt: skip
    return capacity.plan_command(flags, gpu_mem_gib=97887 / 1024, free_gib=94.24, accounting="A").to_dict()


def test_exact_prediction_matches() -> None:
    plan = mission_plan(4)
    info = {
        "max_total_num_tokens": plan["max_total_num_tokens"],
        "effective_max_running_requests": plan["max_running_requests"],
        "mamba": {"max_mamba_cache_size": plan["mamba_slots"]},
    }
    block = flt.capacity_compare(plan, info, None)
    assert block["match"] is True
    assert block["error_pct"] == {
        "max_total_num_tokens": 0.0,
        "max_running_requests": 0.0,
        "mamba_slots": 0.0,
    }
    assert block["observed"]["sources"] == {
        "max_total_num_tokens": "server_info",
        "max_running_requests": "server_info",
        "mamba_slots": "server_info",
    }
    assert block["predicted"]["fits"] is True and block["predicted"]["accounting"] == "A"


def test_error_is_signed_percent_of_observed() -> None:
    plan = mission_plan(4)
    observed = plan["max_total_num_tokens"] - 100
    block = flt.capacity_compare(plan, {"max_total_num_tokens": observed}, None)
    assert block["error_pct"]["max_total_num_tokens"] == pytest.approx(100 / observed * 100, abs=1e-3)
    assert block["match"] is False


def test_startup_log_fills_in_when_server_info_is_missing() -> None:
    # the mission's failing start (variant A): pools logged, then the assertion; no summary line
    log = (
        "[2026-05-20 10:00:00] Mamba Cache is allocated. max_mamba_cache_size: 4, conv_state size: 0.05GB, "
        "ssm_state size: 2.34GB intermediate_ssm_state_size: 18.35GB intermediate_conv_window_size: 0.32GB\n"
        "[2026-05-20 10:00:00] KV Cache is allocated. #tokens: 11893, K size: 0.73 GB, V size: 0.73 GB\n"
        "AssertionError: max_running_request is zero\n"
    )
    startup = sglang_logs.parse_startup_log(log)
    plan = mission_plan(8)
    block = flt.capacity_compare(plan, None, startup)
    assert block["observed"]["max_total_num_tokens"] == 11893
    assert block["observed"]["mamba_slots"] == 4
    assert block["observed"]["sources"]["max_total_num_tokens"] == "startup_log"
    assert block["predicted"]["failure"] == "zero_requests"
    assert block["error_pct"]["mamba_slots"] == 0.0


def test_skipped_config_has_no_observation_and_no_plan_gives_none() -> None:
    block = flt.capacity_compare(mission_plan(8), None, None)
    assert block["match"] is None and block["observed"]["max_total_num_tokens"] is None
    assert block["error_pct"]["max_total_num_tokens"] is None
    assert flt.capacity_compare(None) is None
    assert flt.capacity_compare({"decision": {"action": "start"}, "error": "x"}) is None


def test_zero_observed() -> None:
    assert flt.error_pct(0, 0) == 0.0
    assert flt.error_pct(3, 0) is None
    assert flt.FilterModule().filters()["sglbench_capacity_compare"] is flt.capacity_compare
