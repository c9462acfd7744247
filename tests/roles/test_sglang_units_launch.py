"""roles/sglang_units/files/sglbench-launch: the API key reaches the server, in no argv and no output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "roles" / "sglang_units" / "files" / "sglbench-launch"
KEY = "sk-launch-test-Zq9'\"x"  # quotes: the repr() and JSON forms differ from the raw key

FAKE_SERVER = textwrap.dedent(
    """
    import json, os, sys, time
    key = sys.argv[sys.argv.index("--api-key") + 1]
    cmdline = open("/proc/self/cmdline", "rb").read().decode()
    environ = open("/proc/self/environ", "rb").read().decode()
    print("server_args=ServerArgs(api_key=%r, port=1)" % key, flush=True)
    print(json.dumps({"api_key": key}), file=sys.stderr, flush=True)
    print("raw " + key + " end", flush=True)
    print("key in cmdline: %s; key in environ: %s; argv0: %s" % (
        key in cmdline, key in environ, os.path.basename(sys.argv[0])), flush=True)
    mode = os.environ.get("FAKE_MODE", "")
    if mode == "exit3":
        sys.exit(3)
    if mode == "wait":
        print("ready", flush=True)
        time.sleep(60)
    """
)


def _setup(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fakesglang").mkdir()
    (tmp_path / "fakesglang" / "__init__.py").write_text("")
    (tmp_path / "fakesglang" / "launch_server.py").write_text(FAKE_SERVER)
    return {**os.environ, "PYTHONPATH": str(tmp_path), "SGLBENCH_API_KEY": KEY}


def _argv() -> list[str]:
    return [
        sys.executable, str(LAUNCH), "--key-env", "SGLBENCH_API_KEY", "--",
        sys.executable, "-m", "fakesglang.launch_server", "--port", "1",
    ]  # fmt: skip


def test_the_key_reaches_the_server_but_no_argv_no_environment_and_no_output_line(tmp_path: Path) -> None:
    env = _setup(tmp_path)
    proc = subprocess.run(_argv(), env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "key in cmdline: False; key in environ: False; argv0: launch_server.py" in out
    assert "server_args=ServerArgs(api_key='<redacted>', port=1)" in out
    assert '{"api_key": "<redacted>"}' in out and "raw <redacted> end" in out
    for form in (KEY, repr(KEY)[1:-1], "Zq9"):
        assert form not in out, out


def test_exit_status_and_signals_are_the_servers(tmp_path: Path) -> None:
    env = _setup(tmp_path)
    assert (
        subprocess.run(_argv(), env={**env, "FAKE_MODE": "exit3"}, capture_output=True, timeout=60).returncode
        == 3
    )
    proc = subprocess.Popen(
        _argv(), env={**env, "FAKE_MODE": "wait"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "ready" not in (proc.stdout.readline() or "ready"):
        pass
    proc.send_signal(signal.SIGTERM)  # forwarded to the server, which dies of it; so does the launcher
    assert proc.wait(30) == -signal.SIGTERM


@pytest.mark.parametrize(
    ("args", "env_key", "expected"),
    [
        (["--key-env", "SGLBENCH_API_KEY", "--", "python3", "-m", "x"], "", "SGLBENCH_API_KEY is not set"),
        (["--oops"], KEY, "bad arguments"),
    ],
)
def test_bad_use_is_one_line_and_exit_2(tmp_path: Path, args: list[str], env_key: str, expected: str) -> None:
    env = {**os.environ, "SGLBENCH_API_KEY": env_key}
    proc = subprocess.run(
        [sys.executable, str(LAUNCH), *args], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr
