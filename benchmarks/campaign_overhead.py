#!/usr/bin/env python3
"""A campaign's own overhead per config on the sim host over SSH: the time of an attempt that is neither
the server's start nor the load it was asked to send (``python/sglbench/overhead.py``).

Runs ``ansible-playbook bench.yml -i inventory/sim -e tp=1`` of one or two checkouts (``--repo``, e.g.
this one and a worktree of an older commit) against the running sim host (``scripts/simhost.sh up``;
its SSH config under the checkout's ``build/ssh/``), a few configs of the demo matrix each time, runs
alternating when there are two checkouts, then reads every run's records with this checkout's
``sglbench.overhead`` and prints per run the mean overhead per config and its split by phase.

The first config of a run pays the run's first connection and fact set-up; ``--skip-first`` leaves it out
of the mean (it is printed either way). Records written before a point carried ``load_s`` count only its
measured window as load: for an older checkout the warm-up and cache flushes are overhead. ``--window``
counts only the measured windows as load for every run, so both checkouts are compared alike. Records
with ``server_stop_s`` leave the server's own stop (SGLang's drain and exit, in the final stop) out of the
overhead; older ones count it, and ``--with-stop`` also prints every run's figure counting it.

Not a test: figures depend on the machine and its load. Example::

    git worktree add /tmp/before 2d6462a
    PYTHONPATH=python python benchmarks/campaign_overhead.py --repo . --repo /tmp/before --runs 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from sglbench import overhead, records  # noqa: E402

CONFIGS = ("qwen3-8b-ar", "qwen3-8b-dflash", "qwen27b-ar", "qwen27b-dflash")


def run_once(repo: Path, results: Path, run_id: str, configs: list[str], host: str) -> float:
    extra = {
        "tp": "1",
        "sglbench_run_id": run_id,
        "sglbench_results_dir": str(results),
        "ansible_host": host,
        "sglang_cycle_configs": configs,
        # the sim host's SSH config is this checkout's (scripts/simhost.sh up), whichever playbook runs
        "ansible_ssh_common_args": f"-F {REPO / 'build' / 'ssh' / host / 'config'}",
    }
    env = {**os.environ, "ANSIBLE_CONFIG": str(repo / "ansible.cfg")}
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "bench.yml", "-i", "inventory/sim", "-e", json.dumps(extra)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 2):
        sys.exit(f"{repo}: ansible-playbook exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return time.monotonic() - t0


def window_only(rec: records.AttemptRecord) -> records.AttemptRecord:
    """The record with each point's load the measured window alone (as records without load_s)."""
    benches = [replace(b, points=[replace(p, load_s=None) for p in b.points]) for b in rec.benchmarks]
    return replace(rec, benchmarks=benches)


def with_stop(rec: records.AttemptRecord) -> records.AttemptRecord:
    """The record with the server's own stop counted as overhead (as records without server_stop_s)."""
    return replace(rec, timings=replace(rec.timings, server_stop_s=None))


def figures(
    run_dir: Path, skip_first: bool, window: bool, stop: bool = False
) -> tuple[float, dict[str, float | None], int]:
    recs = [records.load_record(f) for f in records.find_record_files(run_dir)]
    recs.sort(key=lambda r: r.timings.started_at or 0.0)
    recs = [window_only(r) for r in recs] if window else recs
    recs = [with_stop(r) for r in recs] if stop else recs
    rows = [o for o in overhead.campaign_overhead(recs) if o.total_s is not None]
    rows = rows[1:] if skip_first and len(rows) > 1 else rows
    mean = math.fsum(o.total_s or 0.0 for o in rows) / len(rows)
    phases = {}
    for key in overhead.LABELS:
        known = [o.phases[key] for o in rows if o.phases[key] is not None]
        phases[key] = math.fsum(known) / len(known) if known else None
    return mean, phases, len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", action="append", type=Path, help="a checkout whose playbook runs (repeatable)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--host", default="sglbench-simhost", help="the sim host container")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglbench-overhead"))
    ap.add_argument("--skip-first", action="store_true", help="leave each run's first config out of the mean")
    ap.add_argument("--window", action="store_true", help="count only the measured windows as load")
    ap.add_argument(
        "--with-stop", action="store_true", help="also print the figure counting the server's own stop"
    )
    a = ap.parse_args()
    repos = [r.resolve() for r in a.repo or [REPO]]
    configs = [c for c in a.configs.split(",") if c]
    print(f"configs {configs}, {a.runs} run(s) per checkout, sim host {a.host}")
    for n in range(a.runs):
        for i, repo in enumerate(repos):
            run_id = f"overhead-{i}-{n}-{int(time.time())}"
            wall = run_once(repo, a.work, run_id, configs, a.host)
            mean, phases, count = figures(a.work / run_id, a.skip_first, a.window)
            split = ", ".join(f"{overhead.LABELS[k]} {v:.2f}" for k, v in phases.items() if v is not None)
            name = repo.name or str(repo)
            print(f"{name}: run {n + 1}: {mean:.2f} s per config over {count} ({split}); wall {wall:.0f} s")
            if a.with_stop:
                mean_stop, _phases, _count = figures(a.work / run_id, a.skip_first, a.window, stop=True)
                print(f"{name}: run {n + 1}: {mean_stop:.2f} s per config counting the server's own stop")


if __name__ == "__main__":
    main()
