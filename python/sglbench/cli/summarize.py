"""`sglbench summarize`: the arguments; the tables are built by `python/sglbench/summarize.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench import bootstrap
from sglbench.hostlib import result_schema
from sglbench.summarize import run_summarize


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "summarize",
        help="per-TP tables of a run: tok/s, speedup with CI, latency, acceptance, capacity, outcome",
        description="Load every record.json of one or more runs (several hosts merge) and print, per TP "
        "phase, config x concurrency -> output tok/s and speedup over the autoregressive baseline with "
        "95% bootstrap intervals, "
        + ", ".join(m.header for m in result_schema.table_metrics())
        + ", acceptance length, KV tokens predicted vs observed "
        "and the outcome; first the deployment answer (which config up to which load per TP, the "
        "break-even of each speculative config with its 95% CI), after the tables each config's limit and "
        "the per-GPU Pareto frontier. Writes breakeven.json, frontier.json and limits.json into each run "
        "directory (docs/deploy.md). Exit 0 when every attempt is ok, 1 when some failed or were skipped, "
        "2 on unreadable input or an unwritable -o.",
    )
    p.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="results/<run_id> (or a results root)"
    )
    p.add_argument(
        "--format",
        choices=("md", "text", "csv", "parquet"),
        default="md",
        help="output format (default md; text: the same tables as aligned columns; csv and parquet: the "
        "tidy per-cell table only)",
    )
    p.add_argument("-o", "--out", type=Path, help="write to this file (required for parquet)")
    p.add_argument("--seed", type=int, default=bootstrap.DEFAULT_SEED, help="bootstrap seed (default 0)")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=bootstrap.DEFAULT_BOOT,
        help=f"bootstrap replicates, {bootstrap.MIN_BOOT} to {bootstrap.MAX_BOOT} (default 2000)",
    )
    p.add_argument(
        "--overhead",
        action="store_true",
        help="md or text: after the tables, each attempt's own overhead by phase and the mean per config "
        "(as `sglbench run` prints it, without the gap after each record, which only a run's own session "
        "can tell)",
    )
    p.set_defaults(func=run_summarize)
