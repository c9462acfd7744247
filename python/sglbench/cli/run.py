"""`sglbench run`: the arguments; the campaign is run by `python/sglbench/runner.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench.lock import default_lock_dir
from sglbench.runner import POLICIES, run_cli


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "run",
        help="run the campaign (playbooks/bench.yml) with live progress, locks and a summary",
        description="Run playbooks/bench.yml through ansible-runner with live per-host progress, a lock per "
        "GPU host, artifacts kept under <results>/<run_id>/_runner/, and the summary at the end. Exit 0: "
        "every point completed; 1: some configs failed or were skipped; 2: the run could not proceed "
        "(unreachable host, failed preflight, bad inventory, host busy, results not writable); 130: "
        "interrupted (the SGLang units were stopped; the run stays resumable). Secrets are never taken on "
        "the command line: export SGLBENCH_API_KEY / HF_TOKEN, or use the inventory (ansible-vault).",
    )
    p.add_argument("--inventory", "-i", type=Path, help="inventory (default: the one in ansible.cfg)")
    p.add_argument("--tp", default="all", help="TP phase: 1, 4, 8 or all (default all)")
    p.add_argument("--configs", default="", help="comma-separated config names (default: every config)")
    p.add_argument("--policy", choices=POLICIES, help="capacity policy for configs predicted not to start")
    p.add_argument("--fresh", action="store_true", help="start a new run even if the last one did not finish")
    p.add_argument("--results", type=Path, help="results root (default $SGLBENCH_RESULTS_DIR or ./results)")
    p.add_argument("--run-id", help="use (or resume) this run id instead of a new UTC timestamp")
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for busy GPU hosts (default 0: exit 2 naming the holder)",
    )
    p.add_argument("--lock-dir", type=Path, help=f"lock directory (default {default_lock_dir()})")
    p.add_argument("--project-dir", type=Path, help="sglbench checkout holding playbooks/ (default: found)")
    p.add_argument(
        "-e",
        "--extra-var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra playbook variable (repeatable; VALUE may be JSON)",
    )
    p.set_defaults(func=run_cli)
