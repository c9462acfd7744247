"""`sglbench compare`: the arguments; the comparison is `python/sglbench/compare.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench import bootstrap, compare
from sglbench.compare import DEFAULT_MIN_EFFECT, DEFAULT_NO_CI_THRESHOLD, run_compare


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "compare",
        help="what changed between two campaigns; regressions beyond noise flagged (exit 1)",
        description=(compare.__doc__ or "").split("\n\n", 1)[1].replace("%", "%%"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="the reference run dir")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the run to check")
    p.add_argument("--format", choices=("md", "csv"), default="md")
    p.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT,
        help="smallest relative change flagged when the CI excludes 1 (default 0.02)",
    )
    p.add_argument(
        "--no-ci-threshold",
        type=float,
        default=DEFAULT_NO_CI_THRESHOLD,
        help="relative change flagged when there is no CI (default 0.10)",
    )
    p.add_argument("--seed", type=int, default=bootstrap.DEFAULT_SEED, help="bootstrap seed (default 0)")
    p.set_defaults(func=run_compare)
