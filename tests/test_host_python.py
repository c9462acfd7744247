"""The oldest Python our host code supports, held: 3.10 for what the play ships to the GPU host and for
the stand-in, 3.9 for the two unit helpers.

The modules (``plugins/modules/``), their module_utils (``python/sglbench/hostlib/``) and the stand-in
(``python/sglbench/sim/``) run under the host interpreter Ansible uses, at least Python 3.10 (Ubuntu
22.04's; docs/architecture.md, "Two sides"). The unit helpers ``sglbench-launch`` and
``sglbench-wait-ready`` run under the host's own ``/usr/bin/python3`` whatever that interpreter is, so
they are held to RHEL 9's 3.9. ruff holds the same files to the same versions (pyproject.toml,
``per-file-target-version``; ``tests/test_lint.py`` for the extension-less helpers). Here: each file
parses with that grammar, names no standard-library addition newer than that, and, when a Python 3.10
interpreter is installed, every host module imports under it.
"""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOST_PYTHON = (3, 10)
HELPER_PYTHON = (3, 9)
HOST_GLOBS = (
    "python/sglbench/hostlib/*.py",
    "python/sglbench/sim/**/*.py",
    "python/sglbench/sim/bin/nvidia-smi",
    "plugins/modules/*.py",
)
HELPERS = ("roles/sglang_units/files/sglbench-launch", "roles/sglang_units/files/sglbench-wait-ready")
# Standard-library names our code is likely to reach for, by the release that added them. The grammar
# is checked by ast and ruff; these are what neither can see (attribute lookups and call keywords).
ADDED: dict[tuple[int, int], frozenset[str]] = {
    (3, 10): frozenset(
        {
            "aiter",
            "anext",
            "contextlib.aclosing",
            "dataclasses.KW_ONLY",
            "itertools.pairwise",
            "statistics.correlation",
            "statistics.covariance",
            "statistics.linear_regression",
            "sys.orig_argv",
            "sys.stdlib_module_names",
            "types.EllipsisType",
            "types.NoneType",
            "types.UnionType",
            "typing.Concatenate",
            "typing.ParamSpec",
            "typing.TypeAlias",
            "typing.TypeGuard",
            "zip(strict=)",
            "dataclass(slots=)",
            "dataclass(kw_only=)",
            "isinstance(X | Y)",
        }
    ),
    (3, 11): frozenset(
        {
            "BaseExceptionGroup",
            "ExceptionGroup",
            "asyncio.Barrier",
            "asyncio.Runner",
            "asyncio.TaskGroup",
            "asyncio.timeout",
            "asyncio.timeout_at",
            "contextlib.chdir",
            "datetime.UTC",
            "enum.ReprEnum",
            "enum.StrEnum",
            "enum.verify",
            "hashlib.file_digest",
            "math.cbrt",
            "math.exp2",
            "operator.call",
            "re.NOFLAG",
            "tomllib",
            "typing.LiteralString",
            "typing.Never",
            "typing.NotRequired",
            "typing.Required",
            "typing.Self",
            "typing.TypeVarTuple",
            "typing.Unpack",
            "typing.assert_never",
            "typing.assert_type",
            "typing.dataclass_transform",
            "typing.reveal_type",
        }
    ),
}


def host_files() -> list[Path]:
    found = {Path(p) for pattern in HOST_GLOBS for p in glob.glob(str(REPO / pattern), recursive=True)}
    return sorted(found)


def helper_files() -> list[Path]:
    return [REPO / p for p in HELPERS]


def names_used(tree: ast.AST) -> set[str]:
    """Dotted standard-library names the code uses, in the spelling of :data:`ADDED`."""
    aliases: dict[str, str] = {}  # local name -> dotted name it stands for
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                used.add(a.name)
                aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                used.add(f"{node.module}.{a.name}")
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            used.add(f"{aliases.get(node.value.id, node.value.id)}.{node.attr}")
        elif isinstance(node, ast.Name):
            used.add(aliases.get(node.id, node.id))
        elif isinstance(node, ast.Call):
            used |= call_names(node, aliases)
    return used


def call_names(node: ast.Call, aliases: dict[str, str]) -> set[str]:
    func = node.func.id if isinstance(node.func, ast.Name) else None
    keywords = {k.arg for k in node.keywords}
    out = set()
    if func == "zip" and "strict" in keywords:
        out.add("zip(strict=)")
    if func is not None and aliases.get(func, func) in ("dataclass", "dataclasses.dataclass"):
        out |= {f"dataclass({k}=)" for k in keywords & {"slots", "kw_only"}}
    classes = node.args[1] if func in ("isinstance", "issubclass") and len(node.args) == 2 else None
    if isinstance(classes, ast.BinOp) and isinstance(classes.op, ast.BitOr):
        out.add("isinstance(X | Y)")
    return out


def newer_than(version: tuple[int, int], used: set[str]) -> list[str]:
    return sorted(name for added, names in ADDED.items() if added > version for name in names & used)


def check(path: Path, version: tuple[int, int]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(REPO)
    try:
        tree = ast.parse(text, str(rel), feature_version=version)
    except SyntaxError as exc:
        return [f"{rel}:{exc.lineno}: not Python {version[0]}.{version[1]} syntax: {exc.msg}"]
    return [f"{rel}: {name} needs a newer Python" for name in newer_than(version, names_used(tree))]


def test_the_checker_sees_what_it_looks_for() -> None:
    code = (
        "import datetime as dt\nfrom itertools import pairwise\nfrom dataclasses import dataclass\n"
        "@dataclass(slots=True)\nclass A: pass\n"
        "def f(a, b, x):\n    zip(a, b, strict=True)\n    isinstance(x, int | str)\n    return dt.UTC\n"
    )
    used = names_used(ast.parse(code))
    assert newer_than((3, 10), used) == ["datetime.UTC"]
    assert newer_than((3, 9), used) == [
        "dataclass(slots=)",
        "datetime.UTC",
        "isinstance(X | Y)",
        "itertools.pairwise",
        "zip(strict=)",
    ]
    assert newer_than((3, 11), used) == []


def test_host_code_runs_on_the_oldest_host_python() -> None:
    files = host_files()
    assert len(files) > 40 and all(f.is_file() for f in files)
    problems = [p for f in files for p in check(f, HOST_PYTHON)]
    assert not problems, "\n".join(problems)


def test_unit_helpers_run_on_the_system_python3_of_rhel9() -> None:
    problems = [p for f in helper_files() for p in check(f, HELPER_PYTHON)]
    assert not problems, "\n".join(problems)


def test_pyproject_holds_the_same_files_to_the_same_version() -> None:
    conf = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    per_file = conf["tool"]["ruff"]["per-file-target-version"]
    want = f"py{HOST_PYTHON[0]}{HOST_PYTHON[1]}"
    assert per_file == {
        "python/sglbench/hostlib/**/*.py": want,
        "python/sglbench/sim/**/*.py": want,
        "plugins/modules/*.py": want,
        "plugins/module_utils/*.py": want,
    }
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"Python {HOST_PYTHON[0]}.{HOST_PYTHON[1]}" in doc
    assert f"Python {HELPER_PYTHON[0]}.{HELPER_PYTHON[1]}" in doc


def oldest_interpreter() -> str | None:
    """A Python of the oldest host version: $SGLBENCH_HOST_PYTHON, python3.10 on PATH, or pyenv's."""
    name = f"python{HOST_PYTHON[0]}.{HOST_PYTHON[1]}"
    version = f"{HOST_PYTHON[0]}.{HOST_PYTHON[1]}"
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/{name}")))
    for candidate in (os.environ.get("SGLBENCH_HOST_PYTHON"), shutil.which(name), *pyenv):
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(HOST_PYTHON):
            return candidate
    return None


IMPORT_ALL = """
import importlib, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import sglbench.hostlib, sglbench.sim
failed = []
for pkg in (sglbench.hostlib, sglbench.sim):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if m.name.endswith("__main__") or ".sglang_shim" in m.name:
            continue
        try:
            importlib.import_module(m.name)
        except Exception as exc:
            failed.append(f"{m.name}: {exc!r}")
for path in sys.argv[2:]:
    try:
        compile(open(path, encoding="utf-8").read(), path, "exec")
    except SyntaxError as exc:
        failed.append(f"{path}: {exc!r}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_host_modules_import_under_the_oldest_host_python() -> None:
    python = oldest_interpreter()
    if python is None:
        pytest.skip(f"no Python {HOST_PYTHON[0]}.{HOST_PYTHON[1]} here (set SGLBENCH_HOST_PYTHON to one)")
    compiled = [str(p) for p in [*host_files(), *helper_files()] if "/hostlib/" not in str(p)]
    proc = subprocess.run(
        [python, "-c", IMPORT_ALL, str(REPO / "python"), *compiled],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
