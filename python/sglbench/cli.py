"""The `sglbench` command: a thin dispatcher over library functions.

Each subcommand lives in its own module that exposes ``add_parser(subparsers)`` (which registers
the subcommand and sets ``func`` on it) so this file only lists them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (subcommand, module). A module registers its parser and sets `func(args) -> int`.
SUBCOMMANDS: list[tuple[str, str]] = [
    ("bench", "sglbench.bench_cli"),
    ("calibrate", "sglbench.calibrate_cli"),
    ("plan", "sglbench.plan_cli"),
    ("summarize", "sglbench.summarize"),
    ("compare", "sglbench.compare"),
    ("run", "sglbench.runner"),
    ("report", "sglbench.report"),
    ("schedule", "sglbench.schedule"),
    ("prune", "sglbench.prune"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglbench",
        description="Plan, run and summarize SGLang serving benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for _name, module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)
