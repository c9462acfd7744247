#!/usr/bin/env python3
"""Reaction times of the health phase on the sim host (simulated; goal < 2 s each):

- ready:   stand-in logs "The server is fired up and ready to roll!" -> the playbook moves on
- failure: stand-in's main process exits (systemd) -> the playbook's rescue records the failure

Runs `bench.yml` against a running sim host container with two configs (a working one and the
mission's failing DFlash config, policy force so it really starts) and reads the attempt records.
The stand-in is time-scaled so a start (~5-20 s) outlasts Ansible's per-task overhead: otherwise the
event happens before the health phase even begins and the figure measures task start-up instead.

    scripts/simhost.sh up
    .venv/bin/python benchmarks/reaction_times.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MATRIX = [
    {"name": "react-ok", "model_path": "/models/qwen3-8b", "tp": [1], "args": {"context_length": 8192}},
    {
        "name": "react-fail",
        "model_path": "/models/qwen3.6-27b",
        "algorithm": "DFLASH",
        "draft_model_path": "/models/qwen3.6-27b-dflash",
        "tp": [1],
        "args": {
            "mem_fraction_static": 0.75,
            "max_running_requests": 8,
            "context_length": 32768,
            "speculative_dflash_block_size": 16,
            "mamba_scheduler_strategy": "extra_buffer",
        },
        "env": {"SGLANG_ENABLE_SPEC_V2": "1"},
    },
]


def run_once(container: str, scale: str, results: Path, run_id: str) -> list[dict]:
    extra = {
        "tp": "1",
        "run_id": run_id,
        "ansible_host": container,
        "sglbench_matrix": MATRIX,
        "sglbench_policy": "force",
        "sglbench_bench": {"enabled": False},
        "sglbench_results_dir": str(results),
        "sglbench_unit_environment": {"SGLBENCH_SIM_TIME_SCALE": scale},
    }
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = ["ansible-playbook", "bench.yml", "-i", "inventory/sim", "-e", json.dumps(extra)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit(f"bench.yml failed (rc={proc.returncode})")
    return [json.loads(p.read_text()) for p in sorted((results / run_id).glob("*/*/record.json"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--container", default=os.environ.get("SGLBENCH_SIMHOST_NAME", "sglbench-simhost"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-scale", default="0.1", help="SGLBENCH_SIM_TIME_SCALE of the units")
    args = parser.parse_args()
    ready_moved: list[float] = []
    ready_seen: list[float] = []
    fail_reported: list[float] = []
    fail_seen: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sglbench-react-") as tmp:
        for i in range(args.repeats):
            for rec in run_once(args.container, args.time_scale, Path(tmp), f"react{i}-{int(time.time())}"):
                t = rec["timings"]
                if rec["outcome"] == "ok" and t.get("ready_logged_at") and t.get("moved_on_at"):
                    ready_moved.append(t["moved_on_at"] - t["ready_logged_at"])
                    ready_seen.append(t["ready_seen_at"] - t["ready_logged_at"])
                elif rec["outcome"] == "failed" and t.get("exited_at") and t.get("failure_reported_at"):
                    fail_reported.append(t["failure_reported_at"] - t["exited_at"])
                    fail_seen.append(t["failure_seen_at"] - t["exited_at"])
                    failure = rec["failure"]
                    print(f"  {rec['instance']}: cause {failure['cause']} ({failure['wait_outcome']})")

    def show(label: str, values: list[float]) -> None:
        if values:
            med, top = statistics.median(values), max(values)
            print(f"{label:<52} n={len(values)}  median {med:.2f} s  max {top:.2f} s")
        else:
            print(f"{label:<52} no samples")

    print(f"Reaction times on the sim host (SIMULATED, time scale {args.time_scale}):")
    show("ready to roll -> health module saw 200", ready_seen)
    show("ready to roll -> playbook moved on (goal < 2 s)", ready_moved)
    show("stand-in exited -> health module noticed", fail_seen)
    show("stand-in exited -> failure recorded (goal < 2 s)", fail_reported)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
