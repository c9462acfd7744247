"""The pinned real SGLang as both suites that run it see it: where it lives, how it is started, its log lines.

Shared by the real tier (``tests/real/``) and the contract suite (``tests/contract/``, which holds the
stand-in to what the real server does); pytest puts ``tests/`` on ``sys.path`` (the directory of
``tests/conftest.py``), so both import it as ``real_sglang``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


# --- a real server started with serve.sh -----------------------------------------------------------


class NotReady(Exception):
    """serve.sh did not print READY (the server died, or was not ready within READY_TIMEOUT)."""


@dataclass(frozen=True)
class Stopped:
    """What a SIGTERM to the launcher did: the group before it, whether it emptied, serve.sh's exit code."""

    members: tuple[int, ...]  # the process group's live processes just before the signal
    names: tuple[str, ...]  # their /proc/<pid>/comm, sorted and unique
    gone: bool  # the group was empty within STOP_WITHIN
    seconds: float  # signal to empty group (or to STOP_WITHIN)
    exit_code: int  # serve.sh's, i.e. the launcher's


@dataclass
class Started:
    """A real server serve.sh started and reported ready."""

    url: str
    pid: int  # SGLang's launcher (python -m sglang.launch_server), leader of its own process group
    proc: subprocess.Popen[str]  # serve.sh
    log: Path
    seconds: float  # serve.sh start to READY
    stopped: Stopped | None = None

    def sigterm(self) -> Stopped:
        """SIGTERM to the launcher, then wait for its process group to empty. Done once: later calls
        return what the first one saw (a shared server is stopped once and checked by several tests)."""
        if self.stopped is None:
            self.stopped = sigterm_group(self.pid, self.proc)
        return self.stopped

    def stop(self) -> None:
        """Whatever is left goes: serve.sh passes SIGTERM on and SIGKILLs the group after its grace."""
        stop_launcher(self.proc, self.pid)


def stop_launcher(proc: subprocess.Popen[str], pgid: int) -> None:
    """SIGTERM to a launcher (serve.sh or the stand-in), SIGKILL to its group when it has not ended within
    60 s, then SIGKILL to the server's own process group ``pgid``, whatever is left of it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def sigterm_group(pid: int, proc: subprocess.Popen[str]) -> Stopped:
    """SIGTERM to ``pid`` (a process group leader), wait until its group is empty (at most STOP_WITHIN),
    then for ``proc`` (the launcher itself, or serve.sh, which exits with the launcher's code)."""
    members = tuple(group_members(pid))
    names = tuple(sorted({n for p in members if (n := _comm(p))}))
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while group_members(pid) and time.monotonic() - t0 < STOP_WITHIN:
        time.sleep(0.05)
    gone = not group_members(pid)
    seconds = round(time.monotonic() - t0, 1)
    return Stopped(members, names, gone, seconds, proc.wait(timeout=STOP_WITHIN))


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def start(log: Path, extra: Sequence[str] = (), env: dict[str, str] | None = None) -> Started:
    """serve.sh on a free port (``env``: variables added to this process's environment, e.g. SGLang's
    ``SGLANG_SIMULATE_ACC_LEN``); returns once it printed READY, raises NotReady (with its stderr) if not."""
    proc = subprocess.Popen(
        serve_command(free_port(), log, extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **env} if env else None,
    )
    line = read_line(proc, READY_TIMEOUT + 30)
    if not line.startswith("READY"):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # serve.sh stops what it started
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
        raise NotReady(f"real SGLang did not get ready: {line!r}\n{err[-3000:]}")
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return Started(fields["url"], int(fields["pid"]), proc, log, float(fields["seconds"]))


def stops_shared_server(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that stops the shared server: it runs after every other test of the modules that
    have such a test (the ordering is tests/real/conftest.py's)."""
    test.stops_shared_real_server = True  # type: ignore[attr-defined]
    return test


_shared: list[Started] = []
_shared_failed: list[str] = []  # why its start failed: a second module fails at once instead of retrying


def shared_server() -> Started:
    """The real server on serve.sh's own command line, one per pytest session.

    A real start costs ~22 s on a quiet 2-core machine and minutes on a loaded one, so the modules that
    check a server with these flags share it: tests/contract/test_contract_api.py (its real side) and
    tests/real/test_real_server.py. Each module's last test stops it with ``sigterm()``, which acts once;
    tests/real/conftest.py runs those tests after every other test of both modules. Whatever is still
    running when the session ends is stopped then."""
    if _shared_failed:
        raise NotReady(_shared_failed[0])
    if not _shared:
        log = Path(tempfile.mkdtemp(prefix="real-sglang-shared-")) / "server.log"
        try:
            _shared.append(start(log))
        except NotReady as err:
            _shared_failed.append(str(err))
            raise
        atexit.register(_shared[0].stop)
    return _shared[0]
