"""`sglbench migrate`: the arguments; the work is done by `python/sglbench/migrate.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench.migrate import run_migrate


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "migrate",
        help="write requests.parquet for attempts that have only requests.jsonl (older runs)",
        description="Give every attempt of the given runs a requests.parquet written from its "
        "requests.jsonl (kept), so commands read only the columns they need. Every command also reads "
        "JSONL-only runs without this; it is faster once migrated. Exit 0 when done, 2 on unreadable input.",
    )
    p.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="results/<run_id> (or a results root)"
    )
    p.add_argument(
        "--jsonl",
        action="store_true",
        help="also export requests.jsonl beside a requests.parquet that has none",
    )
    p.set_defaults(func=run_migrate)
