"""The `sglbench` command: one thin module per subcommand in this package, over library functions.

Each ``sglbench.cli.<name>`` holds that subcommand's argument parsing: ``add_parser(subparsers)``
registers it and sets ``func`` to the library function that runs it. This file lists them, imports only
the one asked for, and owns the one-line argument errors.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, NoReturn

# (subcommand, module). A module registers its parser and sets `func(args) -> int`.
SUBCOMMANDS: list[tuple[str, str]] = [
    ("bench", "sglbench.cli.bench"),
    ("calibrate", "sglbench.cli.calibrate"),
    ("plan", "sglbench.cli.plan"),
    ("summarize", "sglbench.cli.summarize"),
    ("compare", "sglbench.cli.compare"),
    ("run", "sglbench.cli.run"),
    ("report", "sglbench.cli.report"),
    ("schedule", "sglbench.cli.schedule"),
    ("prune", "sglbench.cli.prune"),
    ("migrate", "sglbench.cli.migrate"),
]


class OneLineErrorParser(argparse.ArgumentParser):
    """Bad arguments give one line (``sglbench bench: error: argument --seed: invalid int value: 'x'``)
    naming the flag, and exit 2; ``--help`` has the usage. Subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # Python < 3.12 turns `--seed=--` into [] without calling the type: refuse it like any bad value.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, got '--'")
        return super()._get_values(action, arg_strings)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the parser; with ``only``, import just that subcommand's module.

    Some subcommands pull in pandas/matplotlib/ansible-runner, so `sglbench plan ...` should not pay
    for them: the chosen subcommand is imported alone, and every module only for `sglbench --help`.
    """
    parser = OneLineErrorParser(
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
