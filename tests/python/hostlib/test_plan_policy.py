"""Policy on a predicted failure: skip, autotune within bounds, force; flag edits on a command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglbench.hostlib import capacity, plan_policy

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
MISSION = [
    "--model-path", str(MODELS / "qwen3.6-27b"),
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", str(MODELS / "qwen3.6-27b-dflash"),
    "--mem-fraction-static", "0.75",
    "--max-running-requests", "8",
    "--context-length", "32768",
    "--speculative-dflash-block-size", "16",
    "--mamba-scheduler-strategy", "extra_buffer",
]  # fmt: skip


def mission_plan(flags: list[str]) -> dict:
    return capacity.plan_command(
        flags, gpu_mem_gib=97887 / 1024, free_gib=94.24, weights_gib=51.05, accounting="A"
    ).to_dict()


def test_apply_flags_replaces_appends_and_removes() -> None:
    argv = ["--model-path", "/m", "--max-running-requests", "8", "--disable-radix-cache", "--page-size=16"]
    out = plan_policy.apply_flags(
        argv,
        {
            "--max-running-requests": 4,
            "--mamba-ssm-dtype": "bfloat16",
            "--page-size": 1,
            "disable_radix_cache": False,
        },
    )
    assert out == [
        "--model-path",
        "/m",
        "--max-running-requests",
        "4",
        "--page-size=1",
        "--mamba-ssm-dtype",
        "bfloat16",
    ]
    assert plan_policy.apply_flags(out, {"--disable-radix-cache": True})[-1] == "--disable-radix-cache"
    assert plan_policy.apply_flags(["--mem-fraction-static", "0.75"], {"mem_fraction_static": 0.8}) == [
        "--mem-fraction-static",
        "0.8",
    ]


def test_apply_flags_drops_coupled_draft_token_count() -> None:
    argv = ["--speculative-dflash-block-size", "16", "--speculative-num-draft-tokens", "16"]
    assert plan_policy.apply_flags(argv, {"--speculative-dflash-block-size": 8}) == [
        "--speculative-dflash-block-size",
        "8",
    ]


def test_launch_flags_drops_interpreter_prefix() -> None:
    assert plan_policy.launch_flags(["/usr/bin/python3", "-m", "sglang.launch_server", "--port", "1"]) == [
        "--port",
        "1",
    ]


def test_skip_records_failure_and_recommendations() -> None:
    out = plan_policy.decide(mission_plan, MISSION, "skip")
    assert out.decision.action == "skip"
    assert "zero_requests" in out.decision.reason
    assert "--mamba-ssm-dtype bfloat16" in out.decision.reason
    assert out.plan["recommendations"] and out.flags == MISSION and out.original is None


def test_force_starts_the_failing_config_unchanged() -> None:
    out = plan_policy.decide(mission_plan, MISSION, "force")
    assert out.decision.action == "start"
    assert out.decision.reason.startswith("forced despite predicted zero_requests")
    assert out.flags == MISSION and not out.plan["fits"]


def test_autotune_takes_least_disruptive_fitting_change() -> None:
    out = plan_policy.decide(mission_plan, MISSION, "autotune")
    first = out.original["recommendations"][0]
    assert out.decision.action == "start"
    assert out.decision.tuned_flags == first["flags"]
    assert out.plan["fits"] and out.plan["max_total_num_tokens"] == first["max_total_num_tokens"]
    assert out.flags == plan_policy.apply_flags(MISSION, first["flags"])
    assert out.flags != MISSION


def test_autotune_respects_allowed_flags_and_result_bounds() -> None:
    out = plan_policy.decide(
        mission_plan,
        MISSION,
        "autotune",
        allowed=["max_running_requests", "speculative_dflash_block_size"],
        bounds={"--max-running-requests": {"min": 6}},
    )
    assert out.decision.action == "start"
    assert list(out.decision.tuned_flags) == ["--speculative-dflash-block-size"]
    rejected = {next(iter(r["flags"])): r["why"] for r in out.decision.rejected}
    assert "not in the allowed flags" in rejected["--mamba-ssm-dtype"]
    assert "below the minimum 6" in rejected["--max-running-requests"]
    assert out.plan["fits"] and out.plan["max_running_requests"] >= 6


def test_autotune_without_an_allowed_change_skips_with_reasons() -> None:
    out = plan_policy.decide(mission_plan, MISSION, "autotune", allowed=["mem_fraction_static"])
    assert out.decision.action == "skip"
    assert "autotune found no recommendation within bounds" in out.decision.reason
    assert len(out.decision.rejected) == len(out.plan["recommendations"])


def test_fitting_config_starts_under_every_policy() -> None:
    fits = plan_policy.apply_flags(MISSION, {"--max-running-requests": 4})
    for policy in plan_policy.POLICIES:
        out = plan_policy.decide(mission_plan, fits, policy)
        assert out.decision.action == "start" and out.decision.reason is None and out.original is None


@pytest.mark.parametrize(
    ("bounds", "fragment"),
    [
        ({"max_running_requests": 4}, "must be a mapping"),
        ({"max_running_requests": {"least": 4}}, "must be a mapping"),
        ({"max_running_requests": {"min": "four"}}, "is not a number"),
    ],
)
def test_bad_bounds_name_the_option(bounds: dict, fragment: str) -> None:
    with pytest.raises(plan_policy.PolicyError, match=fragment):
        plan_policy.decide(mission_plan, MISSION, "autotune", bounds=bounds)


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(plan_policy.PolicyError, match="policy: 'retry'"):
        plan_policy.decide(mission_plan, MISSION, "retry")
