"""How the controller plugins (plugins/action/, plugins/filter/) import sglbench: one rule, held here.

Ansible loads a plugin by file path, with no package around it and its directory not on ``sys.path``, so a
plugin cannot import a shared helper before it has found the checkout. Each plugin that uses sglbench
therefore starts with the same three lines, which put this checkout's ``python/`` first on ``sys.path``:
the plugins always run the library of the tree they belong to (not whatever copy is installed), and a
bare ``ansible-playbook`` works without the package installed because they import only its stdlib-only
parts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGINS = sorted([*(REPO / "plugins" / "action").glob("*.py"), *(REPO / "plugins" / "filter").glob("*.py")])

STANZA = """_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)
"""
# What a controller plugin may import of sglbench: the standard-library-only parts.
STDLIB_ONLY = (
    "sglbench",
    "sglbench.hostlib",
    "sglbench.resume",
    "sglbench.search",
    "sglbench.secretcheck",
    "sglbench.cycle",
    "sglbench.telemetry",
)


def _uses_sglbench(text: str) -> bool:
    return any(line.startswith(("from sglbench", "import sglbench")) for line in text.splitlines())


def test_every_plugin_that_uses_sglbench_finds_it_the_same_way() -> None:
    users = [p for p in PLUGINS if _uses_sglbench(p.read_text())]
    assert len(users) >= 5
    for path in users:
        text = path.read_text()
        ours = [line for line in text.splitlines() if line.startswith(("from sglbench", "import sglbench"))]
        first_import = min(text.index(line) for line in ours)
        assert text.count(STANZA) == 1 and text.index(STANZA) < first_import, path.relative_to(REPO)
    for path in PLUGINS:
        if path not in users:
            assert "sys.path" not in path.read_text(), path.relative_to(REPO)


def test_plugins_load_this_checkouts_stdlib_only_modules(tmp_path: Path) -> None:
    """Loaded as Ansible loads them (by path, from another directory, no PYTHONPATH): every sglbench module
    comes from this checkout and is one of the stdlib-only parts; nothing heavy is pulled in."""
    code = (
        "import importlib.util, json, sys\n"
        "for i, path in enumerate(sys.argv[1:]):\n"
        "    spec = importlib.util.spec_from_file_location(f'plugin_{i}', path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    sys.modules[spec.name] = module\n"
        "    spec.loader.exec_module(module)\n"
        "ours = {n: getattr(m, '__file__', None) for n, m in sys.modules.items()\n"
        "        if n.split('.')[0] == 'sglbench'}\n"
        "heavy = sorted(n for n in ('pandas', 'matplotlib', 'ansible_runner') if n in sys.modules)\n"
        "print(json.dumps({'ours': ours, 'heavy': heavy}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, PLUGINS)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded["heavy"] == []
    assert "sglbench.resume" in loaded["ours"] and "sglbench.secretcheck" in loaded["ours"]
    for name, file in loaded["ours"].items():
        assert name in STDLIB_ONLY or name.startswith(("sglbench.hostlib.", "sglbench.telemetry.")), name
        assert Path(file).resolve().is_relative_to(REPO / "python"), (name, file)
