"""Read the launch flags of an SGLang install from its own argument parser, as a catalog.

Standard library only: shipped to the GPU host as ``ansible.module_utils.sglbench_sglang_parser_dump``.
:data:`DUMP_CODE` is run with the Python that has SGLang (``<python> -c DUMP_CODE``): it builds the
parser exactly as ``launch_server`` does (``ServerArgs.add_cli_args`` on a fresh
``argparse.ArgumentParser``) and prints one JSON catalog (format: ``sglang_catalogs/README.md``).
``scripts/sglang_catalog.py`` converts the parsers of downloaded wheels with the same functions, so
a catalog read on a host and one generated from a wheel are the same document.

The conversion functions are defined once, in :data:`_CONVERT` (source text), executed here for the
controller and sent verbatim inside :data:`DUMP_CODE` to the host's SGLang interpreter.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "sglbench.sglang_catalog/1"

_CONVERT = r'''
import argparse as _argparse
import json as _json

_BASE_ACTIONS = (
    (_argparse.BooleanOptionalAction, "bool_optional"),
    (_argparse._StoreTrueAction, "store_true"),
    (_argparse._StoreFalseAction, "store_false"),
    (_argparse._StoreConstAction, "store_const"),
    (_argparse._AppendConstAction, "append_const"),
    (_argparse._AppendAction, "append"),
    (_argparse._CountAction, "count"),
    (_argparse._VersionAction, "version"),
    (_argparse._StoreAction, "store"),
)


def _jsonable(value):
    try:
        _json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def action_kind(action):
    """(kind, custom class name or None) of an argparse action: custom Actions map to their base."""
    for base, kind in _BASE_ACTIONS:
        if isinstance(action, base):
            return kind, (None if type(action) is base else type(action).__name__)
    name = type(action).__name__
    if action.nargs == 0:
        return ("store_true" if action.default in (None, False) else "store_false"), name
    return "store", name


def type_name(convert):
    if convert is None:
        return None
    if convert in (int, float, str):
        return convert.__name__
    name = getattr(convert, "__name__", None) or type(convert).__name__
    if name == "loads" and getattr(convert, "__module__", "") == "json":
        return "json"
    return "other:" + name


def catalog_entry(action):
    """One flag of a parser as a catalog entry (only the keys that say something)."""
    kind, custom = action_kind(action)
    entry = {"opts": list(action.option_strings), "dest": action.dest, "action": kind}
    if kind in ("store", "append"):
        if action.nargs is not None:
            entry["nargs"] = action.nargs
        tname = type_name(action.type)
        if tname:
            entry["type"] = tname
    if action.choices is not None:
        try:
            entry["choices"] = sorted(str(c) for c in action.choices)
        except TypeError:
            entry["choices"] = [str(c) for c in action.choices]
    default = action.default
    if default is not None and default is not False and default is not _argparse.SUPPRESS:
        if _jsonable(default):
            entry["default"] = default
        else:
            entry["default_repr"] = repr(default)[:200]
    if action.required:
        entry["required"] = True
    const = getattr(action, "const", None)
    if const is not None and kind in ("store_const", "append_const") and _jsonable(const):
        entry["const"] = const
    if custom:
        entry["custom"] = custom
    new_flag = getattr(action, "new_flag", None)
    if isinstance(new_flag, str):
        entry["deprecated"] = new_flag
    return entry


def catalog_from_parser(parser, release, method="parser"):
    """The catalog document of ``parser`` (help and -h left out), flags sorted by first spelling."""
    flags = [
        catalog_entry(a)
        for a in parser._actions
        if a.option_strings and not isinstance(a, _argparse._HelpAction)
    ]
    flags.sort(key=lambda f: f["opts"][0])
    return {
        "schema": "sglbench.sglang_catalog/1",
        "release": release,
        "method": method,
        "allow_abbrev": bool(parser.allow_abbrev),
        "flags": flags,
    }
'''

exec(compile(_CONVERT, __name__ + "._CONVERT", "exec"))

DUMP_CODE = (
    _CONVERT
    + r"""
import sglang as _sglang
from sglang.srt.server_args import ServerArgs as _ServerArgs

_parser = _argparse.ArgumentParser(prog="sglang serve")
_ServerArgs.add_cli_args(_parser)
_doc = catalog_from_parser(_parser, str(_sglang.__version__), "installed")
print("SGLBENCH_CATALOG " + _json.dumps(_doc, separators=(",", ":")))
"""
)
MARKER = "SGLBENCH_CATALOG "


def parse_dump(stdout: str) -> dict[str, Any]:
    """The catalog printed by :data:`DUMP_CODE` (its marked line; SGLang may log around it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            doc = json.loads(line[len(MARKER) :])
            if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
                return doc
    raise ValueError("the SGLang flag dump printed no catalog line")


def dump_argv(python: str) -> list[str]:
    """The command that prints the installed SGLang's flags (run with the unit's environment)."""
    return [python, "-c", DUMP_CODE]


def render(doc: dict[str, Any]) -> str:
    """A catalog as a diffable file: top-level keys, then one flag per line."""
    head = {k: v for k, v in doc.items() if k != "flags"}
    lines = ["{" + ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()) + ","]
    flags = doc.get("flags", [])
    lines.append(' "flags": [')
    lines.extend("  " + json.dumps(f) + ("," if i < len(flags) - 1 else "") for i, f in enumerate(flags))
    lines.append(" ]}")
    return "\n".join(lines) + "\n"


__all__ = [
    "DUMP_CODE",
    "MARKER",
    "SCHEMA",
    "action_kind",  # noqa: F822 - defined by exec of _CONVERT
    "catalog_entry",  # noqa: F822
    "catalog_from_parser",  # noqa: F822
    "dump_argv",
    "parse_dump",
    "render",
    "type_name",  # noqa: F822
]
