"""Helpers for tests that drive `sglbench run` against their own sim host container."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

from host_probes import bench_lock_argv

REPO = Path(__file__).resolve().parents[2]
LOAD = {"prompt_sets": ["math"], "concurrency": [1], "repeats": 2, "num_prompts": 1000, "duration_s": 2}
LOAD |= {"max_new_tokens": 16, "warmup": 0}
# One small config: a run renders, verifies and installs one unit instead of the sim inventory's eight.
MATRIX = [
    {"name": "qwen3-8b-ar", "model_path": "/models/qwen3-8b", "tp": [1], "args": {"context_length": 8192}}
]


def env(name: str, **extra: str) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "SGLBENCH_SIMHOST_NAME": name,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO / "python"),
        **extra,
    }


def sim_host(name: str) -> Iterator[str]:
    """Start the container (skip when the image or podman is missing), yield its name, remove it."""
    if not os.environ.get("SGLBENCH_SIMHOST_IMAGE"):
        pytest.skip("SGLBENCH_SIMHOST_IMAGE is not set (make test sets it after building the sim host image)")
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    up = subprocess.run(
        [str(REPO / "scripts" / "simhost.sh"), "up"],
        env=env(name),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if up.returncode != 0:
        pytest.skip(f"could not start the sim host container: {up.stderr.strip()[-300:]}")
    try:
        yield name
    finally:
        subprocess.run(
            [str(REPO / "scripts" / "simhost.sh"), "down"], env=env(name), capture_output=True, timeout=120
        )


def host(name: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command inside the sim host."""
    return subprocess.run(
        ["podman", "exec", name, *argv], env=env(name), capture_output=True, text=True, timeout=timeout
    )


def run_argv(
    name: str,
    results: Path,
    locks: Path,
    *extra: str,
    load: dict[str, Any] | None = None,
    matrix: list[dict[str, Any]] | None = None,
) -> list[str]:
    return [
        sys.executable, "-m", "sglbench", "run",
        "--inventory", str(REPO / "inventory" / "sim"), "--tp", "1",
        "--results", str(results), "--lock-dir", str(locks),
        "-e", f"ansible_host={name}",
        "-e", "sglbench_matrix=" + json.dumps(matrix or MATRIX),
        "-e", "sglbench_bench=" + json.dumps(load or LOAD),
        *extra,
    ]  # fmt: skip


def check_run(done: subprocess.CompletedProcess[str], run_dir: Path, failed: Collection[str] = ()) -> None:
    """A finished ``sglbench run`` whose every config attempt (``<config>-tp<N>``) under ``run_dir`` is ok but
    those named in ``failed``: exit 0, or 1 for what explains it, a failed attempt or a point the client
    self-check judged invalid (a busy machine starves the client)."""
    out = done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = {p.parent.name: json.loads(p.read_text())["outcome"] for p in run_dir.glob("*/*/record.json")}
    assert outcomes and {k for k, o in outcomes.items() if o != "ok"} == set(failed), (outcomes, out)
    docs = [json.loads(p.read_text()) for d in run_dir.glob("*/*/points") for p in point_files(d)]
    invalid = [d["summary"]["invalid_reasons"] for d in docs if d["summary"] and not d["summary"]["valid"]]
    allowed = {1} if failed else {0, 1} if invalid else {0}
    assert done.returncode in allowed, (done.returncode, invalid, out)


def start(argv: list[str], name: str, log: Path, **extra_env: str) -> subprocess.Popen[str]:
    fh = log.open("w")
    return subprocess.Popen(
        argv, cwd=REPO, env=env(name, **extra_env), stdout=fh, stderr=subprocess.STDOUT, text=True
    )


def point_files(points_dir: Path, pattern: str = "*") -> list[Path]:
    """The point files (``<key>.json``) of a ``points/`` directory, without the raw telemetry documents
    (``<key>.telemetry.json``) that lie beside them until the attempt is assembled."""
    return sorted(p for p in points_dir.glob(f"{pattern}.json") if not p.name.endswith(".telemetry.json"))


def point_files_below(directory: Path) -> list[Path]:
    """Every point file anywhere below ``directory`` (e.g. ``previous/``), raw telemetry left out."""
    if not directory.exists():
        return []
    return sorted(p for p in directory.rglob("*.json") if not p.name.endswith(".telemetry.json"))


def wait_for(
    cond: Callable[[], bool], timeout: float, what: str, log: Path | None = None, every: float = 0.2
) -> None:
    """Poll ``cond`` every ``every`` s (a look inside the host is a ``podman exec``: CPU the machine's
    other work needs, so looks that are in no hurry take a longer ``every``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def gpus_free(name: str) -> bool:
    """No compute process and no memory in use on any simulated GPU, and no SGLang unit active."""
    smi = host(name, "nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits")
    apps = host(name, "nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader")
    units = host(name, "systemctl", "list-units", "--state=active,activating", "--no-legend", "sglang-*")
    return (
        smi.returncode == 0
        and all(int(x or 0) == 0 for x in smi.stdout.split())
        and not apps.stdout.strip()
        and not units.stdout.strip()
    )


def bench_clients(name: str) -> list[str]:
    """Benchmark clients running on the host, as the holder lines of its bench lock (an orphan of a dead
    campaign or of a dropped connection shows up here)."""
    return [line for line in host(name, *bench_lock_argv()).stdout.splitlines() if line.strip()]


class Sampler:
    """Samples every process's argv on the controller and the sim host while a run goes on, and keeps
    every line holding ``needle``; also counts samples that saw an SGLang server (proof it ran).

    The host side is one long-lived ``ps`` loop inside the container (one ``podman exec`` streaming a
    sample every ``interval`` s, started again when it ends: the container may be killed and restarted
    mid-run), not one exec per sample: an exec costs ~0.1 CPU-s, which over a whole fault table took
    a sizeable share of a two-core machine from the campaigns under test."""

    MARK = "--sglbench-sample--"
    STOP = "/run/sglbench-sampler.stop"  # the host loop ends when it appears

    def __init__(self, name: str, needle: str, interval: float = 0.3) -> None:
        self.name, self.needle, self.interval = name, needle, interval
        self.hits: list[str] = []
        self.server_seen = 0
        self._stop = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._threads = [
            threading.Thread(target=self._host_loop, daemon=True),
            threading.Thread(target=self._controller_loop, daemon=True),
        ]

    def _host_loop(self) -> None:
        script = (
            f"rm -f {self.STOP}; while [ ! -e {self.STOP} ]; do ps -eww -o pid=,args=; echo {self.MARK}; "
            f"sleep {self.interval}; done; rm -f {self.STOP}"
        )
        while not self._stop.is_set():
            self._proc = subprocess.Popen(
                ["podman", "exec", self.name, "sh", "-c", script],
                env=env(self.name),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert self._proc.stdout is not None
            seen = False
            for line in self._proc.stdout:
                if line.startswith(self.MARK):
                    self.server_seen += seen
                    seen = False
                    continue
                seen = seen or "sglang.launch_server" in line
                if self.needle in line:
                    self.hits.append(f"host: {line.rstrip()}")
            self._proc.wait()
            self._stop.wait(self.interval)  # the container is down (or restarting): try again

    def _controller_loop(self) -> None:
        while not self._stop.is_set():
            ps_ctl = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True).stdout
            self.hits += [f"controller: {ln}" for ln in ps_ctl.splitlines() if self.needle in ln]
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            host(self.name, "touch", self.STOP, timeout=30)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        for t in self._threads:
            t.join(30)


def grep_host(name: str, key: str) -> list[str]:
    """World-readable files under /etc, /run and /var of the sim host holding ``key``, and journal lines.

    The key reaches grep through a 0600 file under /root (not searched), never through an argv that a
    :class:`Sampler` running at the same time would report as a leak."""
    needle = "/root/.sglbench-needle"
    find = "find /etc /run /var -xdev -type f -perm -o+r -print0 2>/dev/null"
    script = (
        f"umask 077; cat > {needle}; "
        f"{find} | xargs -0 -r grep -l -F -f {needle}; "
        f'echo "journal: $(journalctl -o cat --no-pager | grep -F -c -f {needle})"; rm -f {needle}'
    )
    done = subprocess.run(
        ["podman", "exec", "-i", name, "sh", "-c", script],
        env=env(name), input=key, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = done.stdout.split("\n")
    found = [ln for ln in lines if ln and not ln.startswith("journal: ")]
    journal = next((ln.split(": ", 1)[1] for ln in lines if ln.startswith("journal: ")), "")
    return found + ([f"journal: {journal} line(s)"] if journal not in ("", "0") else [])


def grep_tree(key: str, *roots: Path) -> list[str]:
    """Files under ``roots`` (results, lock dir) holding ``key``."""
    return [
        str(p) for root in roots for p in root.rglob("*") if p.is_file() and key.encode() in p.read_bytes()
    ]
