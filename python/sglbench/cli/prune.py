"""`sglbench prune`: the arguments; retention is `python/sglbench/prune.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench import prune
from sglbench.prune import run_prune


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "prune",
        help="delete old run directories beyond the newest N (and older than D days)",
        description=prune.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--results", type=Path, help="results root (default $SGLBENCH_RESULTS_DIR or ./results)")
    p.add_argument("--keep", type=int, required=True, help="keep the newest N runs")
    p.add_argument(
        "--keep-days", type=float, default=0.0, help="also keep runs younger than D days (default 0)"
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.set_defaults(func=run_prune)
