"""docs/architecture.md is the map of the code; these checks fail when the map drifts from the tree.

- Every path the page writes in backticks exists. A code span is split into words; a word is a path when
  it contains ``/`` or ends in ``.py``/``.yml``/``.sh``/``.md``. A word with ``/`` is resolved against the
  repository root (a trailing ``/`` is ignored); a bare file name must exist at the root or somewhere in
  the tree. Not checked: patterns (``*``, ``<name>``, ``{a,b}``), absolute paths and HTTP paths (they name
  the GPU host or a server, not the checkout), URLs, schema ids (``sglbench.attempt/1``) and fenced code
  blocks.
- Every module of ``python/sglbench`` (but ``__init__``/``__main__`` and the ``sglang`` shim), every plugin
  outside ``module_utils``, every role and every script under ``scripts/`` is named in a code span, by its
  path or by a tail of it (``runner.py``, ``hostlib/gpus.py``, ``sglang_cycle``) that names no other of them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
DOC_REL = DOC.relative_to(REPO).as_posix()

PATH_SUFFIXES = (".py", ".yml", ".sh", ".md")
SCRIPT_SUFFIXES = {".sh", ".py"}
# Generated or foreign directories: a bare file name found only there does not count as existing.
NOT_IN_TREE = {
    ".git",
    ".venv",
    "build",
    "results",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
}
FENCED_BLOCK = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SCHEMA_ID = re.compile(r"^sglbench\.[a-z]+/\d+$")


def code_words() -> list[str]:
    """Every whitespace-separated word of every inline code span of the page."""
    text = FENCED_BLOCK.sub("", DOC.read_text(encoding="utf-8"))
    return [word for span in CODE_SPAN.findall(text) for word in span.split()]


def path_words() -> list[str]:
    paths = []
    for word in code_words():
        if "/" not in word and not word.endswith(PATH_SUFFIXES):
            continue
        if any(c in word for c in "*<{") or word.startswith("/") or "://" in word or SCHEMA_ID.match(word):
            continue
        # What set-up or a run writes (build/, results/) is named on the map but not in a clone.
        if word.split("/", 1)[0] in NOT_IN_TREE:
            continue
        paths.append(word.rstrip("/"))
    return paths


def names_in_tree() -> set[str]:
    names: set[str] = set()
    for _, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in NOT_IN_TREE]
        names.update(files)
        names.update(dirs)
    return names


def required_on_map() -> list[str]:
    """Repository-relative paths of what the map must name."""
    pkg = REPO / "python" / "sglbench"
    found = [
        p
        for p in pkg.rglob("*.py")
        if p.name not in {"__init__.py", "__main__.py"}
        and not {"sglang_shim", "__pycache__"} & set(p.relative_to(pkg).parts)
    ]
    found += [p for p in (REPO / "plugins").glob("*/*.py") if p.parent.name != "module_utils"]
    found += [p for p in (REPO / "roles").iterdir() if p.is_dir() and not p.name.startswith(".")]
    for scripts in (REPO / "scripts", REPO / "scripts" / "real-sglang"):
        found += [
            p
            for p in scripts.iterdir()
            if p.is_file() and (p.suffix in SCRIPT_SUFFIXES or os.access(p, os.X_OK))
        ]
    return sorted(p.relative_to(REPO).as_posix() for p in found)


def names(word: str, path: str) -> bool:
    return path == word or path.endswith("/" + word)


def test_the_map_has_paths() -> None:
    assert len(path_words()) > 50, f"{DOC_REL}: the path extraction found almost nothing; is the page empty?"


def test_every_path_on_the_map_exists() -> None:
    tree_names = names_in_tree()
    missing = sorted(
        {
            word
            for word in path_words()
            if not (os.path.lexists(REPO / word) or ("/" not in word and word in tree_names))
        }
    )
    assert not missing, (
        f"{DOC_REL} names {len(missing)} path(s) that do not exist: {', '.join(missing)}. "
        f"Fix the path in {DOC_REL} (or drop the line when the file is gone)."
    )


def test_every_module_plugin_role_and_script_is_on_the_map() -> None:
    required = required_on_map()
    assert required, "found no modules, plugins, roles or scripts: is REPO right?"
    words = {word.rstrip("/") for word in code_words()}
    # A word counts for a path only when it names no other required path (`gpus.py` is in hostlib and sim).
    unique = {word for word in words if sum(names(word, path) for path in required) == 1}
    missing = [path for path in required if not any(names(word, path) for word in unique)]
    assert not missing, (
        f"{DOC_REL} does not mention {len(missing)} file(s): {', '.join(missing)}. "
        f"Add a line for each to {DOC_REL}: its path in backticks, in the table of its area, "
        "saying what it owns."
    )
