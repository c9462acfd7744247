"""`sglbench plan`: exit codes, JSON output, readable output, bad input without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglbench import cli

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "fixtures" / "models"
HF_HUB = ROOT / "tests" / "fixtures" / "hf_cache" / "hub"
HF_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")

MISSION = [
    "--gpu",
    "RTX PRO 6000",
    "--free-gib",
    "94.24",
    "--weights-gib",
    "51.05",
    "--draft-weights-gib",
    "3.22",
    "--accounting",
    "A",
    "--",
    "--model-path",
    str(MODELS / "qwen3.6-27b"),
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    str(MODELS / "qwen3.6-27b-dflash"),
    "--speculative-dflash-block-size",
    "16",
    "--mem-fraction-static",
    "0.75",
    "--context-length",
    "32768",
    "--mamba-scheduler-strategy",
    "extra_buffer",
]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = cli.main(["plan", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_mission_case_json_predicts_zero_requests(capsys):
    rc, out, _ = run(["--json", *MISSION, "--max-running-requests", "8"], capsys)
    assert rc == 1
    d = json.loads(out)
    assert d["fits"] is False
    assert d["failure"]["kind"] == "zero_requests"
    assert d["failure"]["message"] == "max_running_request is zero"
    assert d["mamba_slots"] == 4 and d["max_running_requests"] == 0
    assert d["recommendations"] and all(r["max_running_requests"] > 0 for r in d["recommendations"])


def test_mission_case_with_four_requests_fits(capsys):
    rc, out, _ = run([*MISSION, "--max-running-requests", "4"], capsys)
    assert rc == 0
    assert "FITS" in out
    assert "spec intermediate reservation" in out and "weights" in out


def test_pasted_launch_server_prefix_is_ignored(capsys):
    i = MISSION.index("--")
    argv = [
        *MISSION[: i + 1],
        "python",
        "-m",
        "sglang.launch_server",
        *MISSION[i + 1 :],
        "--max-running-requests",
        "4",
    ]
    rc, _, _ = run(argv, capsys)
    assert rc == 0


def test_sglang_version_selects_the_variant(capsys):
    argv = [a if a != "A" else "C" for a in MISSION]
    argv[argv.index("--accounting") : argv.index("--accounting") + 2] = ["--sglang-version", "0.5.23"]
    rc, _, err = run(argv, capsys)
    assert rc == 2
    assert "--mamba-scheduler-strategy is not a flag of SGLang 0.5.23; it was renamed --mamba-radix" in err
    argv = [a if a != "--mamba-scheduler-strategy" else "--mamba-radix-cache-strategy" for a in argv]
    rc, out, _ = run(["--json", *argv, "--max-running-requests", "8"], capsys)
    plan = json.loads(out)
    assert (plan["accounting"], plan["sglang_release"]) == ("C", "0.5.23")
    assert rc == 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--gpu", "H100", "--", "--model-path", "/nonexistent/model"], "--model-path"),
        (
            ["--gpu", "H100", "--", "--model-path", str(MODELS / "qwen3.6-27b"), "--tp-size", "16"],
            "--tp-size",
        ),
        (
            ["--gpu", "H100", "--", "--model-path", str(MODELS / "qwen3-8b"), "--no-such-flag"],
            "--no-such-flag",
        ),
        (["--gpu", "Voodoo 5", "--", "--model-path", str(MODELS / "qwen3-8b")], "--gpu"),
        (["--", "--model-path", str(MODELS / "qwen3-8b")], "--gpu-mem-gib"),
        (["--gpu", "H100"], "--model-path"),
    ],
)
def test_bad_input_exits_2_naming_the_field(argv, needle, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert needle in err
    assert "Traceback" not in err + out


def test_bad_config_field_is_named(tmp_path, capsys):
    model = tmp_path / "m"
    model.mkdir()
    cfg = json.loads((MODELS / "qwen3-8b" / "config.json").read_text())
    del cfg["num_attention_heads"]
    (model / "config.json").write_text(json.dumps(cfg))
    rc, _, err = run(["--gpu", "H100", "--", "--model-path", str(model)], capsys)
    assert rc == 2
    assert "num_attention_heads" in err


def test_console_entry_point_has_no_traceback():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run(
        [sys.executable, "-m", "sglbench", "plan", "--gpu", "H100", "--", "--model-path", "/nope"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "no config.json" in proc.stderr


# --- Hugging Face hub ids -----------------------------------------------------------------------------


@pytest.fixture
def fixture_hub(monkeypatch: pytest.MonkeyPatch) -> Path:
    """HF_HUB_CACHE -> tests/fixtures/hf_cache/hub (Qwen/Qwen3-8B cached at refs/main)."""
    for name in HF_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(HF_HUB))
    return HF_HUB


def test_hub_id_is_planned_from_the_hugging_face_cache(fixture_hub, capsys):
    rc, out, err = run(["--gpu", "H100", "--", "--model-path", "Qwen/Qwen3-8B"], capsys)
    assert rc in (0, 1), err
    assert "Qwen3ForCausalLM" in out and "KV cache" in out
    commit = (fixture_hub / "models--Qwen--Qwen3-8B" / "refs" / "main").read_text()
    assert (
        f"note: --model-path Qwen/Qwen3-8B (revision main = commit {commit}) from the Hugging Face cache"
        in out
    )
    assert str(fixture_hub / "models--Qwen--Qwen3-8B" / "snapshots" / commit) in out
    local_rc, local_out, _ = run(
        ["--json", "--gpu", "H100", "--", "--model-path", str(MODELS / "qwen3-8b")], capsys
    )
    rc, out, _ = run(["--json", "--gpu", "H100", "--", "--model-path", "Qwen/Qwen3-8B"], capsys)
    hub, local = json.loads(out), json.loads(local_out)
    assert rc == local_rc and hub["max_total_num_tokens"] == local["max_total_num_tokens"]
    assert "Hugging Face cache" in hub["notes"][0]


def test_uncached_hub_id_exits_2_with_one_line_naming_the_id_and_the_fix(fixture_hub, capsys):
    rc, out, err = run(["--gpu", "H100", "--", "--model-path", "Qwen/Qwen3-235B-A22B"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("sglbench plan: error: --model-path: Qwen/Qwen3-235B-A22B (revision main)")
    assert f"looked in {fixture_hub} (from HF_HUB_CACHE)" in err
    assert "huggingface-cli download Qwen/Qwen3-235B-A22B" in err and "HF_HOME" in err


def test_console_entry_point_plans_a_hub_id():
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
    env.update(PYTHONPATH=str(ROOT / "python"), HF_HUB_CACHE=str(HF_HUB))
    argv = [sys.executable, "-m", "sglbench", "plan", "--gpu", "H100", "--", "--model-path", "Qwen/Qwen3-8B"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    assert "from the Hugging Face cache" in proc.stdout


@pytest.mark.parametrize("flag", ["--free-gib", "--weights-gib", "--draft-weights-gib", "--gpu-mem-gib"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308"])
def test_non_finite_gib_figures_exit_2_instead_of_invalid_json(flag, value, capsys):
    """`--free-gib nan` was accepted and `--json` printed NaN (invalid JSON)."""
    gpu = [] if flag == "--gpu-mem-gib" else ["--gpu", "H100"]
    rc, out, err = run(
        [*gpu, f"{flag}={value}", "--json", "--", "--model-path", str(MODELS / "qwen3-8b")], capsys
    )
    assert rc == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and err.startswith(
        f"sglbench plan: error: {flag} must be"
    )


def test_plan_json_is_strict_json(capsys):
    rc, out, _ = run(["--gpu", "H100", "--json", "--", "--model-path", str(MODELS / "qwen3-8b")], capsys)
    assert rc in (0, 1)
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def _record_from(tmp_path, argv: list[str], free_gib: float, weights_gib: float, gpu: str = "H100"):
    """A record as the controller writes it: the plan the host made (with the default free memory) and
    what the server really allocated (planned here with the true free memory)."""
    from sglbench.hostlib import capacity

    assumed = capacity.plan_command(argv, gpu=gpu, weights_gib=weights_gib)
    real = capacity.plan_command(argv, gpu=gpu, free_gib=free_gib, weights_gib=weights_gib)
    record = {
        "plan": assumed.to_dict(),
        "capacity": {
            "observed": {
                "max_total_num_tokens": real.max_total_num_tokens,
                "max_running_requests": real.max_running_requests,
                "mamba_slots": real.mamba_slots,
            }
        },
        "observed": {"server_info": {"memory_usage_gib": {"weight": weights_gib}}},
    }
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    return path, real


@pytest.mark.parametrize(
    ("model", "flags"),
    [
        ("llama-3.1-8b-instruct", ["--mem-fraction-static", "0.85"]),
        (
            "qwen3.6-27b",
            ["--mem-fraction-static", "0.85", "--max-running-requests", "16", "--context-length", "32768"],
        ),
    ],
)
def test_calibrate_recovers_the_free_memory_behind_a_logged_pool(tmp_path, capsys, model, flags):
    argv = ["--model-path", str(MODELS / model), *flags]
    record, real = _record_from(
        tmp_path, argv, free_gib=77.1, weights_gib=16.0 if "llama" in model else 51.05
    )
    rc, out, err = run(["--calibrate", str(record), "--json", "--", *argv], capsys)
    assert rc == 0, err
    p = json.loads(out)
    # the calibrated free memory re-plans the recorded config to the pool the server allocated
    assert p["pre_gib"] == pytest.approx(77.1, abs=0.01)
    assert p["max_total_num_tokens"] == pytest.approx(real.max_total_num_tokens, rel=2e-4)
    assert p["notes"][0].startswith(f"calibrated from {record}")


def test_calibrate_re_plans_a_neighbouring_config(tmp_path, capsys):
    argv = ["--model-path", str(MODELS / "llama-3.1-8b-instruct"), "--mem-fraction-static", "0.85"]
    record, _ = _record_from(tmp_path, argv, free_gib=77.1, weights_gib=16.0)
    neighbour = [*argv[:2], "--mem-fraction-static", "0.9"]
    rc, out, _ = run(["--calibrate", str(record), "--json", "--", *neighbour], capsys)
    p = json.loads(out)
    assert rc == 0 and p["mem_fraction_static"] == 0.9
    # the same host and weights: rest = 77.1 x 0.9 - 16.0 GiB over Llama-3.1-8B's 131,072 B per token
    assert p["max_total_num_tokens"] == int((77.1 * 0.9 - 16.0) * (1 << 30)) // 131072


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({}, "plan: the record has no capacity plan"),
        ({"plan": {"cell_bytes": 1}, "capacity": {"observed": {}}}, "capacity.observed.max_total_num_tokens"),
    ],
)
def test_calibrate_bad_record_exits_2_naming_the_field(tmp_path, capsys, record, needle):
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    argv = ["--calibrate", str(path), "--", "--model-path", str(MODELS / "llama-3.1-8b-instruct")]
    rc, out, err = run(["--gpu", "H100", *argv], capsys)
    assert rc == 2 and needle in err and "Traceback" not in err and out == ""
