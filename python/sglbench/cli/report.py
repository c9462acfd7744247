"""`sglbench report`: the arguments; the report is built by `python/sglbench/report.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench.report import run_report


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "report",
        help="write one self-contained HTML report (tables + plots) of one or more runs",
        description="Write a self-contained HTML report (inline CSS, plots embedded as PNG data URIs, no "
        "network) of the given run(s), plus the PNGs beside it. Exit 0 written, 2 unreadable input or an "
        "unwritable -o (then nothing is written).",
    )
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    p.add_argument(
        "-o", "--out", type=Path, default=Path("report.html"), help="HTML file (default report.html)"
    )
    p.add_argument("--title", help="page title")
    p.set_defaults(func=run_report)
