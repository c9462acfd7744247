"""python/sglbench/cli/: one thin module per subcommand, the parsers there and nowhere else, each
subcommand importing only its own module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from sglbench import cli

PKG = Path(cli.__file__).resolve().parent.parent
PYTHON_SRC = PKG.parent


def test_every_subcommand_is_a_module_of_the_cli_package() -> None:
    names = [name for name, _ in cli.SUBCOMMANDS]
    assert [module for _, module in cli.SUBCOMMANDS] == [f"sglbench.cli.{name}" for name in names]
    files = sorted(p.stem for p in (PKG / "cli").glob("*.py") if p.name != "__init__.py")
    assert files == sorted(names)


def test_argument_parsers_live_only_in_the_cli_package() -> None:
    """No library module registers a subcommand: ``add_parser``/``add_subparsers`` are cli/ code."""
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path.parent.name == "cli":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "add_parser":
                offenders.append(f"{path.relative_to(PKG)}: def add_parser")
            if isinstance(node, ast.Attribute) and node.attr == "add_subparsers":
                offenders.append(f"{path.relative_to(PKG)}: add_subparsers")
    assert offenders == []


def test_a_subcommand_imports_only_its_own_cli_module() -> None:
    code = (
        "import sys\nfrom sglbench import cli\n"
        "for name, _ in cli.SUBCOMMANDS:\n"
        "    before = {m for m in sys.modules if m.startswith('sglbench.cli.')}\n"
        "    cli.build_parser(only=name)\n"
        "    new = sorted({m for m in sys.modules if m.startswith('sglbench.cli.')} - before)\n"
        "    print(name, ','.join(new))\n"
        "    for m in new:\n"
        "        del sys.modules[m]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(PYTHON_SRC)},
        timeout=120,
    )
    loaded = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    # calibrate shares bench's load arguments (and so imports that parser module too)
    shared = {"calibrate": {"sglbench.cli.bench"}}
    for name, modules in loaded.items():
        assert set(modules.split(",")) == {f"sglbench.cli.{name}"} | shared.get(name, set()), name
