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
    rc, out, _ = run(["--json", *argv, "--max-running-requests", "8"], capsys)
    assert json.loads(out)["accounting"] == "C"
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
