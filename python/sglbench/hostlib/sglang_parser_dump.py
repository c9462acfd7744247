"""Read the launch flags of an SGLang install from its own argument parser, as a catalog.

Standard library only and self-contained (no sibling imports): shipped to the GPU host as
``ansible.module_utils.sglbench_hostlib.sglang_parser_dump``, and its own source is what the host runs in the
SGLang interpreter (:func:`dump_argv`): there it captures the parser ``launch_server`` builds
(``prepare_server_args``, else ``ServerArgs.add_cli_args``) and prints one JSON catalog (format:
``sglang_catalogs/README.md``). ``scripts/sglang_catalog.py`` converts the parsers of downloaded
wheels with the same functions, so a catalog read on a host and one generated from a wheel are the
same document.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

SCHEMA = "sglbench.sglang_catalog/1"
MARKER = "SGLBENCH_CATALOG "

# argparse's own Action classes -> the catalog's action names.
ARGPARSE_ACTIONS: dict[str, str] = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "BooleanOptionalAction": "bool_optional",
    "_VersionAction": "version",
    "_ExtendAction": "append",
}


def map_action(cls_name: str, argparse_bases: list[str], nargs: Any, const: Any) -> tuple[str, str | None]:
    """(catalog action, custom class name or None) for an argparse Action.

    ``argparse_bases`` are the names of the argparse-module classes in the action class's MRO, most
    derived first (for argparse's own classes the first one is the class itself). A custom subclass
    of a concrete argparse action behaves like it; a direct subclass of ``argparse.Action`` is judged
    by its arity: ``nargs=0`` takes no value (store_true/store_false when it stores True/False,
    else store_const), anything else stores its value(s).
    """
    custom = None if cls_name in ARGPARSE_ACTIONS else cls_name
    for base in argparse_bases:
        if base in ARGPARSE_ACTIONS:
            return ARGPARSE_ACTIONS[base], custom
    if nargs == 0:
        if const is True:
            return "store_true", custom
        if const is False:
            return "store_false", custom
        return "store_const", custom
    return "store", custom


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def normalize_flag(raw: dict[str, Any]) -> dict[str, Any]:
    """One catalog flag object from one action record (see :func:`describe_action`).

    Keys whose value would be null/false are left out, except opts, dest and action.
    """
    action, custom = map_action(raw["cls"], raw["argparse_bases"], raw["nargs"], _plain(raw.get("const")))
    flag: dict[str, Any] = {"opts": list(raw["opts"]), "dest": raw["dest"], "action": action}
    if custom:
        flag["custom"] = custom
    if raw.get("new_flag") is not None:
        flag["deprecated"] = str(raw["new_flag"])
    takes_value = action in ("store", "append")
    nargs = raw.get("nargs")
    if takes_value and nargs is not None:
        flag["nargs"] = nargs
    if raw.get("type"):
        flag["type"] = raw["type"]
    choices = raw.get("choices")
    if choices is not None:
        if "list" in choices:
            flag["choices"] = sorted(choices["list"])
        else:
            flag["choices_repr"] = choices["repr"]
    default = raw.get("default") or {"json": None}
    if "json" in default:
        if default["json"] is not None and default["json"] is not False:
            flag["default"] = default["json"]
        elif default["json"] is False and action not in ("store_true",):
            flag["default"] = False
    else:
        flag["default_repr"] = default["repr"]
    if raw.get("required"):
        flag["required"] = True
    const = raw.get("const")
    if (
        action in ("store_const", "append_const")
        and raw.get("const_value") is not None
        and _plain(const) is None
    ):
        const = raw["const_value"]
    if const is not None and action not in ("store_true", "store_false", "bool_optional"):
        if "json" in const:
            if const["json"] is not None:
                flag["const"] = const["json"]
        else:
            flag["const_repr"] = const["repr"]
    return flag


def _plain(v: dict[str, Any] | None) -> Any:
    return None if v is None else v.get("json")


def catalog_flags(raw_actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Catalog flags from worker records: help skipped, sorted by first option string."""
    flags = [normalize_flag(r) for r in raw_actions if "--help" not in r["opts"] and r["opts"]]
    flags.sort(key=lambda f: (f["opts"][0], f["dest"]))
    return flags


class _NoStub:
    """Stands for the generator's stub type where nothing is stubbed (a real install)."""


def describe_action(a: argparse.Action, stub_type: type = _NoStub) -> dict[str, Any]:
    """One argparse action as a record: spellings, class and its argparse bases, arity, const,
    default, type, choices, help (kept for rename detection, never written to a catalog) and any
    deprecation target. ``stub_type``: values that came from a stubbed import are marked as such."""

    def has_stub(v: Any, depth: int = 0) -> bool:
        if isinstance(v, stub_type) or type(v).__module__ == "stub":
            return True
        if depth < 4 and isinstance(v, (list, tuple, set, frozenset)):
            return any(has_stub(x, depth + 1) for x in v)
        if depth < 4 and isinstance(v, dict):
            return any(has_stub(x, depth + 1) for x in list(v) + list(v.values()))
        return False

    def safe(v: Any) -> dict[str, Any]:
        if has_stub(v):
            return {"repr": repr(v), "stub": True}
        w = list(v) if isinstance(v, tuple) else v
        return {"json": w} if _json_ok(w) else {"repr": repr(v)}

    t = a.type
    if t is None:
        tname = None
    elif isinstance(t, stub_type):
        tname = f"other:{t!r}"
    elif t in (int, float, str):
        tname = t.__name__
    elif t is json.loads:
        tname = "json"
    else:
        tname = "other:" + str(getattr(t, "__name__", type(t).__name__))
    if a.choices is None:
        choices = None
    elif has_stub(a.choices) or isinstance(a.choices, stub_type):
        choices = {"repr": repr(a.choices)}
    else:
        choices = {"list": sorted({str(c) for c in a.choices})}
    bases = [k.__name__ for k in type(a).__mro__ if k.__module__ == "argparse"]
    rec = {
        "opts": list(a.option_strings),
        "dest": a.dest,
        "cls": type(a).__name__,
        "argparse_bases": bases,
        "nargs": a.nargs,
        "const": safe(a.const) if a.const is not None else None,
        "default": safe(a.default),
        "type": tname,
        "choices": choices,
        "required": bool(a.required),
        "help": a.help if isinstance(a.help, str) else None,
        "new_flag": str(a.new_flag) if getattr(a, "new_flag", None) is not None else None,
    }
    if getattr(a, "const_value", None) is not None:
        rec["const_value"] = safe(a.const_value)
    return rec


def capture_parser(server_args_module: Any) -> tuple[argparse.ArgumentParser, str]:
    """The parser ``launch_server`` parses with: ``prepare_server_args`` is run up to its
    ``parse_args`` call (captured there); releases where that fails build ``ServerArgs.add_cli_args``
    on a fresh parser. Returns the parser and how it was obtained."""

    class _Captured(Exception):
        pass

    captured: list[argparse.ArgumentParser] = []
    real_parse_known_args = argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        if any("--model-path" in a.option_strings for a in self._actions):
            captured.append(self)
            raise _Captured
        return real_parse_known_args(self, *args, **kwargs)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    how = "prepare_server_args"
    try:
        server_args_module.prepare_server_args(["--model-path", "catalog-probe"])
    except _Captured:
        pass
    except Exception as exc:
        how = f"ServerArgs.add_cli_args (prepare_server_args failed: {type(exc).__name__}: {exc})"
    finally:
        argparse.ArgumentParser.parse_known_args = real_parse_known_args  # type: ignore[method-assign]
    if captured:
        return captured[0], how
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args_module.ServerArgs.add_cli_args(parser)
    return parser, how


def catalog_from_parser(
    parser: argparse.ArgumentParser, release: str, method: str = "parser"
) -> dict[str, Any]:
    """The catalog document of ``parser`` (help left out), flags sorted by first spelling."""
    records = [describe_action(a) for a in parser._actions if a.option_strings]
    return {
        "schema": SCHEMA,
        "release": release,
        "method": method,
        "allow_abbrev": bool(parser.allow_abbrev),
        "flags": catalog_flags(records),
    }


def _dump_installed() -> None:
    """Run in the SGLang interpreter: print the installed release's catalog on one marked line."""
    import importlib

    sglang = importlib.import_module("sglang")
    parser, _how = capture_parser(importlib.import_module("sglang.srt.server_args"))
    doc = catalog_from_parser(parser, str(sglang.__version__), "installed")
    sys.stdout.write("\n" + MARKER + json.dumps(doc, separators=(",", ":")) + "\n")


def dump_code() -> str:
    """This module's source plus the call that dumps the installed release (``python -c``)."""
    import inspect

    return inspect.getsource(sys.modules[__name__]) + "\n_dump_installed()\n"


def dump_argv(python: str) -> list[str]:
    """The command that prints the installed SGLang's flags (run with the unit's environment)."""
    return [python, "-c", dump_code()]


def parse_dump(stdout: str) -> dict[str, Any]:
    """The catalog printed by :func:`dump_code` (its marked line; SGLang may log around it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            doc = json.loads(line[len(MARKER) :])
            if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
                return doc
    raise ValueError("the SGLang flag dump printed no catalog line")
