"""The pinned real SGLang as both suites that run it see it: where it lives, how it is started, its log lines.

Shared by the real tier (``tests/real/``) and the contract suite (``tests/contract/``, which holds the
stand-in to what the real server does); pytest puts ``tests/`` on ``sys.path`` (the directory of
``tests/conftest.py``), so both import it as ``real_sglang``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV_SCRIPT = REPO / "scripts" / "real-sglang-env.sh"
SERVE = REPO / "scripts" / "real-sglang" / "serve.sh"
VERSION = re.search(r"^SGLANG_VERSION=(\S+)", ENV_SCRIPT.read_text(), re.M)[1]
ROOT = Path(os.environ.get("SGLBENCH_REAL_SGLANG_HOME", f"/var/cache/sglbench/real-sglang-{VERSION}"))
HAVE_ENV = (ROOT / "env.sh").is_file() and (ROOT / "venv" / "bin" / "python").exists()
NO_REAL_ENV = f"real SGLang {VERSION} CPU env not found at {ROOT}: run `make real-sglang` first"
RECORD = os.environ.get("SGLBENCH_REAL_SGLANG_RECORD") == "1"
MODEL = "tiny-qwen2"
CONTEXT_LENGTH = 2048  # the tiny models' context (scripts/real-sglang/make_tiny_models.py)
# Both bound a failure only (serve.sh ends at once when the server dies), so they are sized for a 2-core
# machine many times slower than a quiet one, not for the typical case (docs/real-sglang.md, "Measured"):
READY_TIMEOUT = 900.0  # serve.sh start to READY: ~22 s quiet, 188 s at load average 22
STOP_WITHIN = 120.0  # seconds from SIGTERM to an empty process group (seen: 2-8 s quiet)

LOG_LINES = {  # the 0.5.23 lines the project's log reader (hostlib/sglang_logs.py) looks for, and a few more
    "load_weight_begin": r"Load weight begin\.",
    "load_weight_end": r"Load weight end\.",
    "kv_cache_allocated": r"KV Cache is allocated\.",
    "memory_pool_end": r"Memory pool end\.",
    "summary": r"max_total_num_tokens=",
    "startup_timings": r"Engine startup timings",
    "uvicorn": r"Uvicorn running on",
    "ready": r"The server is fired up and ready to roll!",
    "prefill_batch": r"Prefill batch",
    "decode_batch": r"Decode batch",
    "http_error": r"\[http_server\] Error",
}


def serve_command(port: int, log: Path, extra: Sequence[str] = ()) -> list[str]:
    """``serve.sh`` starting the real server on ``port`` (SGLang flags after ``--``), waiting for ready."""
    cmd = [str(SERVE), "--port", str(port), "--model", MODEL, "--log", str(log)]
    cmd += ["--timeout", str(READY_TIMEOUT)]
    return [*cmd, "--", *extra] if extra else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            pids.append(int(d.name))
    return pids


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The next line of ``proc``'s stdout, or "" when none comes within ``timeout`` seconds."""
    box: list[str] = []
    reader = threading.Thread(
        target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True
    )
    reader.start()
    reader.join(timeout)
    return box[0] if box else ""
