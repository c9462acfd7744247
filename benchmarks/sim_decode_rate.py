"""Print the SGLang stand-in's decode rates (simulated seconds) and how far it falls behind (CPU-bound).

Starts ``python -m sglbench.sim`` on a free loopback port for a few configs, sends concurrent
streaming ``/generate`` requests and prints, per config and concurrency: tokens per simulated
second (wall time / SGLBENCH_SIM_TIME_SCALE) and the stand-in's reported lag. Expected anchor:
Qwen3.6-27B BF16 (51.05 GiB), TP1, RTX PRO 6000, concurrency 1 -> ~26.5 tok/s.

    PYTHONPATH=python python3 benchmarks/sim_decode_rate.py [--time-scale 0.05] [--tokens 256]

Numbers only; no pass/fail (speed targets are not unit tests).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "fixtures" / "models"

CONFIGS = {
    "qwen3.6-27b AR": ["--model-path", str(MODELS / "qwen3.6-27b"), "--context-length", "32768"],
    "qwen3.6-27b DFLASH b16": [
        "--model-path",
        str(MODELS / "qwen3.6-27b"),
        "--context-length",
        "32768",
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        str(MODELS / "qwen3.6-27b-dflash"),
        "--mem-fraction-static",
        "0.75",
        "--max-running-requests",
        "4",
        "--mamba-scheduler-strategy",
        "extra_buffer",
    ],
    "qwen3-8b AR": ["--model-path", str(MODELS / "qwen3-8b")],
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, object]) -> bytes:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return resp.read()


def run(name: str, args: list[str], scale: float, tokens: int, concurrencies: list[int]) -> None:
    port = _port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "python"),
        "SGLBENCH_SIM_TIME_SCALE": str(scale),
        "SGLBENCH_SIM_STATE_DIR": tempfile.mkdtemp(prefix="simbench-"),
        "SGLBENCH_SIM_WEIGHTS_GIB": "51.05" if "27b" in name else "",
    }
    env = {k: v for k, v in env.items() if v != ""}
    log_path = Path(tempfile.mkdtemp(prefix="simbench-")) / "sim.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sglbench.sim", *args, "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        deadline = time.monotonic() + 300
        while "fired up" not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                print(f"{name}: failed to start, see {log_path}")
                return
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        for conc in concurrencies:
            body = {
                "text": "benchmark prompt " * 20,
                "stream": True,
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
            }
            threads = [
                threading.Thread(target=_post, args=(url + "/generate", {**body, "rid": str(i)}))
                for i in range(conc)
            ]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            info = json.loads(urllib.request.urlopen(url + "/server_info", timeout=30).read())
            sim_s = wall / scale
            print(
                f"{name:24s} conc={conc:4d}  {conc * tokens / sim_s:9.1f} tok/s total  "
                f"{tokens / sim_s:7.2f} tok/s per request  lag={info['sglbench_sim']['lag_seconds']:.2f}s"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 32])
    ns = parser.parse_args()
    for name, args in CONFIGS.items():
        run(name, args, ns.time_scale, ns.tokens, ns.concurrency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
