"""Test harness: start the SGLang stand-in as a subprocess on a free loopback port.

The stand-in runs from a bare interpreter with only PYTHONPATH=python (nothing installed), its log
goes to a file, and each test gets its own GPU state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PYTHON_SRC = REPO / "python"
MODELS = REPO / "tests" / "fixtures" / "models"
NVIDIA_SMI = PYTHON_SRC / "sglbench" / "sim" / "bin" / "nvidia-smi"
TIME_SCALE = "0.001"
# What the stand-in impersonates in these tests unless a test says otherwise: the sim inventory's
# setting (inventory/sim/group_vars/sglang_gpu/host.yml), i.e. the 0.5.23 DDTree build's flags with
# memory accounting A, the variant the mission's numbers were computed with. Pass "" for either to get
# the stand-in's own default (newest catalogued release; its version's accounting variant).
SGLANG_VERSION = "0.5.23+ddtree"
ACCOUNTING = "A"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def model(name: str) -> str:
    return str(MODELS / name)


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    state_dir: Path
    env: dict[str, str]
    extra_pids: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def request(
        self,
        path: str,
        body: object | None = None,
        *,
        method: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, bytes, dict[str, str]]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method or ("POST" if data else "GET"),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), dict(exc.headers)

    def json(self, path: str, body: object | None = None, **kw: object) -> tuple[int, object]:
        status, raw, _ = self.request(path, body, **kw)  # type: ignore[arg-type]
        return status, json.loads(raw) if raw else None

    def wait_exit(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_log(self, needle: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return True
            if self.proc.poll() is not None:
                return needle in self.log()
            time.sleep(0.02)
        return False

    def nvidia_smi(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, str(NVIDIA_SMI), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout

    def holders(self) -> dict[int, int]:
        """pid -> MiB from the nvidia-smi stand-in (compute apps)."""
        rows = self.nvidia_smi("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
        held: dict[int, int] = {}
        for line in rows.splitlines():
            pid, mib = (int(x) for x in line.split(","))
            held[pid] = held.get(pid, 0) + mib
        return held

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        # Any worker left behind (orphan tests, SIGKILLed mains): kill it by its registered pid.
        try:
            leftovers = list(self.holders())
        except subprocess.CalledProcessError:
            leftovers = []
        for pid in leftovers + self.extra_pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def sim_env(state_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLBENCH_SIM_")}
    env.update(
        {
            "PYTHONPATH": str(PYTHON_SRC),
            "SGLBENCH_SIM_TIME_SCALE": TIME_SCALE,
            "SGLBENCH_SIM_STATE_DIR": str(state_dir),
            "SGLBENCH_SIM_SGLANG_VERSION": SGLANG_VERSION,
            "SGLBENCH_SIM_ACCOUNTING": ACCOUNTING,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(extra)
    return env


def launch(
    tmp: Path,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    port: int | None = None,
    module: str = "sglbench.sim",
    **extra_env: str,
) -> Sim:
    tmp.mkdir(parents=True, exist_ok=True)
    state_dir = tmp / "state"
    port = port or free_port()
    full_env = env or sim_env(state_dir, **extra_env)
    log_path = tmp / f"sim-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args, "--port", str(port)],
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    sim = Sim(proc, port, log_path, state_dir, full_env)
    if wait_ready:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"stand-in exited with {proc.returncode}:\n{sim.log()}")
            if "The server is fired up and ready to roll!" in sim.log():
                break
            time.sleep(0.02)
        else:
            sim.stop()
            raise AssertionError(f"stand-in not ready after 20 s:\n{sim.log()}")
    return sim


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[object]:
    started: list[Sim] = []

    def _start(args: list[str], **kw: object) -> Sim:
        sim = launch(tmp_path / f"s{len(started)}", args, **kw)  # type: ignore[arg-type]
        started.append(sim)
        return sim

    yield _start
    for sim in started:
        sim.stop()


@pytest.fixture(scope="module")
def plain_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """Qwen3-8B, TP1, metrics on: the endpoint-shape tests share it."""
    sim = launch(
        tmp_path_factory.mktemp("plain"),
        [
            "--model-path",
            model("qwen3-8b"),
            "--enable-metrics",
            "--served-model-name",
            "qwen3-8b-sim",
            "--decode-log-interval",
            "5",
        ],
    )
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def spec_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """The mission's Qwen3.6-27B + DFLASH config with 4 running requests (the working variant)."""
    sim = launch(
        tmp_path_factory.mktemp("spec"),
        [
            "--model-path",
            model("qwen3.6-27b"),
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-draft-model-path",
            model("qwen3.6-27b-dflash"),
            "--mem-fraction-static",
            "0.75",
            "--max-running-requests",
            "4",
            "--context-length",
            "32768",
            "--mamba-radix-cache-strategy",
            "extra_buffer",
            "--decode-log-interval",
            "3",
        ],
        SGLBENCH_SIM_WEIGHTS_GIB="51.05",
    )
    yield sim
    sim.stop()


def sse_events(raw: bytes) -> list[str]:
    """Split an SSE body into its data payloads, asserting the framing (``data: ...\\n\\n``)."""
    text = raw.decode()
    assert text.endswith("\n\n"), text[-50:]
    events = text.split("\n\n")[:-1]
    payloads = []
    for event in events:
        assert event.startswith("data: "), event
        payloads.append(event[len("data: ") :])
    return payloads
