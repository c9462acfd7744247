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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the parser; with ``only``, import just that subcommand's module.

    Some subcommands pull in pandas/matplotlib/ansible-runner, so `sglbench plan ...` should not pay
    for them: the chosen subcommand is imported alone, and every module only for `sglbench --help`.
    """
    parser = argparse.ArgumentParser(
        prog="sglbench",
        description="Plan, run and summarize SGLang serving benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in SUBCOMMANDS:
        if only is None or name == only:
            importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = {name for name, _ in SUBCOMMANDS}
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first if first in names else None)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)
