"""scripts/real-sglang/serve.sh's command line for speculative decoding and model weights, on a fake env.

The env's python is a stand-in that writes the launcher's argv to a file and exits, so no SGLang runs:
serve.sh then reports a server that died before it was ready (exit 1), and the argv shows what it would
have started. A failed check of the env's pure-torch sgl_kernel ops (cpu-spec-ops.txt) makes it refuse
speculative flags with exit 3 and that line, before starting anything.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SERVE = Path(__file__).resolve().parents[2] / "scripts" / "real-sglang" / "serve.sh"
OK = "ok: 13 pure-torch sgl_kernel CPU ops for sglang 0.5.23, sglang-kernel 0.4.10"


def fake_env(root: Path, verdict: str) -> Path:
    """An env with a recording python, tiny-qwen2 with weights, tiny-dflash-qwen3 without."""
    (root / "venv" / "bin").mkdir(parents=True)
    argv = root / "argv"
    py = root / "venv" / "bin" / "python"
    # The launcher (-m) records its argv; serve.sh's readiness check (-) waits for that record, then
    # fails, so serve.sh stops the launcher only after it has written.
    py.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -m ]; then printf "%s\\n" "$@" > "{argv}.tmp" && mv "{argv}.tmp" "{argv}"; exit 1; fi\n'
        f'for i in $(seq 100); do [ -f "{argv}" ] && break; sleep 0.1; done\n'
        "exit 1\n"
    )
    py.chmod(0o755)
    for name, weights in (("tiny-qwen2", True), ("tiny-qwen2-draft", True), ("tiny-dflash-qwen3", False)):
        (root / "models" / name).mkdir(parents=True)
        (root / "models" / name / "config.json").write_text("{}")
        if weights:
            (root / "models" / name / "model.safetensors").write_bytes(b"")
    (root / "env.sh").write_text("true\n")
    (root / "cpu-spec-ops.txt").write_text(verdict + "\n")
    return argv


def serve(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"SGLBENCH_REAL_SGLANG_HOME": str(root), "TMPDIR": str(root)}
    return subprocess.run(
        [str(SERVE), "--port", "39999", "--timeout", "30", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_plain_start_loads_the_weights_and_adds_no_speculative_flags(tmp_path: Path) -> None:
    argv_file = fake_env(tmp_path, OK)
    assert serve(tmp_path, "--model", "tiny-qwen2").returncode == 1
    argv = argv_file.read_text().split("\n")
    assert flag(argv, "--load-format") == "auto"
    assert flag(argv, "--attention-backend") == "torch_native"
    assert "--prefill-attention-backend" not in argv and "--decode-attention-backend" not in argv


def test_a_model_without_weights_is_dummy_loaded(tmp_path: Path) -> None:
    argv_file = fake_env(tmp_path, OK)
    assert serve(tmp_path, "--model", "tiny-dflash-qwen3").returncode == 1
    assert flag(argv_file.read_text().split("\n"), "--load-format") == "dummy"


@pytest.mark.parametrize(
    ("draft", "draft_load"), [("tiny-qwen2-draft", None), ("tiny-dflash-qwen3", "dummy")]
)
def test_speculative_flags_get_the_cpu_attention_and_the_draft_by_name(
    tmp_path: Path, draft: str, draft_load: str | None
) -> None:
    argv_file = fake_env(tmp_path, OK)
    spec = ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", draft]
    assert serve(tmp_path, "--model", "tiny-qwen2", "--", *spec).returncode == 1
    argv = argv_file.read_text().split("\n")
    assert flag(argv, "--attention-backend") == "torch_native"
    assert flag(argv, "--prefill-attention-backend") == "intel_amx"
    assert flag(argv, "--decode-attention-backend") == "intel_amx"
    assert flag(argv, "--speculative-draft-model-path") == str(tmp_path / "models" / draft)
    assert flag(argv, "--speculative-draft-load-format") == draft_load


def test_a_failed_ops_check_refuses_speculative_flags_with_its_line(tmp_path: Path) -> None:
    line = "sgl_kernel CPU ops: fill_bonus_tokens_cpu has a real op in sglang 0.5.23, sglang-kernel 0.4.11"
    argv_file = fake_env(tmp_path, line)
    proc = serve(tmp_path, "--model", "tiny-qwen2", "--", "--speculative-algorithm", "NGRAM")
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [
        f"serve.sh: speculative decoding cannot run on this env: {line}"
    ]
    assert not argv_file.exists()  # nothing was started
    assert serve(tmp_path, "--model", "tiny-qwen2").returncode == 1  # a plain start still goes ahead
    assert argv_file.exists()
