"""SGLang's ``launch_server`` flags per release, read from the release catalogs.

Standard library only: shipped to the GPU host as ``ansible.module_utils.sglbench_hostlib.sglang_catalog``
and used by the controller, the host modules and the SGLang stand-in alike.

A *catalog* is one JSON file per SGLang release (``sglang_catalogs/<release>.json``, written by
``scripts/sglang_catalog.py`` from the release's own argument parser, format in that directory's
README): every flag with its spellings, action, arity, type, choices and default. The same format
comes out of the installed SGLang on a GPU host (:mod:`sglang_parser_dump`), so validation against
a catalog file and against the installed release are one code path.

This module loads catalogs, picks the one for a version, and rebuilds an ``argparse`` parser that
accepts exactly what the release's parser accepts (same spellings, prefix abbreviations when the
release allows them, same choices and numeric types). Values of SGLang's own custom types (JSON
parsers, human-readable sizes, …) are accepted as strings: the catalog records that they exist, not
how SGLang converts them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

# sglang_parser_dump declares the same id: it runs alone in SGLang's interpreter and imports nothing of
# ours (tests/python/hostlib/test_sglang_parser_dump.py holds the two equal).
SCHEMA = "sglbench.sglang_catalog/1"
RENAMES_SCHEMA = "sglbench.sglang_renames/1"
RENAMES_FILE = "renames.json"
ACTIONS = frozenset(
    {
        "store",
        "store_true",
        "store_false",
        "store_const",
        "append",
        "append_const",
        "count",
        "bool_optional",
        "version",
    }
)


def render_catalog(meta: dict[str, Any], flags: list[dict[str, Any]]) -> str:
    """The catalog file's text: top-level keys first, then one flag object per line."""
    head = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items()]
    lines = ["{" + head[0][1:], *head[1:]]
    body = ",\n".join("  " + json.dumps(f, ensure_ascii=False, separators=(", ", ": ")) for f in flags)
    return ",\n".join(lines) + ',\n "flags": [\n' + body + "\n ]}\n"


def render_renames(renames: list[dict[str, Any]]) -> str:
    """The renames file's text: one rename object per line."""
    body = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in renames)
    return '{"schema": "' + RENAMES_SCHEMA + '",\n "renames": [\n' + body + ("\n" if body else "") + " ]}\n"


class CatalogError(ValueError):
    """A catalog file that cannot be used (the message names the file and what is wrong)."""


@dataclass(frozen=True)
class FlagSpec:
    opts: tuple[str, ...]
    dest: str
    action: str
    nargs: Any = None
    type: str | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    required: bool = False
    const: Any = None
    deprecated: str | None = None
    custom: str | None = None

    @property
    def flag(self) -> str:
        """The flag's first (canonical) spelling."""
        return self.opts[0]

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append") and self.nargs != 0


@dataclass(frozen=True, eq=False)
class Catalog:
    release: str
    flags: tuple[FlagSpec, ...]
    allow_abbrev: bool = True
    method: str = "parser"
    source: str = ""

    @functools.cached_property
    def by_option(self) -> dict[str, FlagSpec]:
        return {opt: spec for spec in self.flags for opt in spec.opts}

    @functools.cached_property
    def by_dest(self) -> dict[str, FlagSpec]:
        out: dict[str, FlagSpec] = {}
        for spec in self.flags:
            out.setdefault(spec.dest, spec)
        return out

    def match(self, option: str) -> list[str]:
        """The option strings ``option`` selects: itself when exact, else (with abbreviations)
        every option it is a prefix of. Empty: unknown; more than one: ambiguous."""
        if option in self.by_option:
            return [option]
        if not self.allow_abbrev or not option.startswith("--"):
            return []
        return sorted(opt for opt in self.by_option if opt.startswith(option))


@dataclass(frozen=True)
class Rename:
    old: str
    new: str
    last_with_old: str
    first_with_new: str
    evidence: str = ""
    alias_kept: bool = False


# --- versions ------------------------------------------------------------------------------------


def version_key(version: str) -> tuple[Any, ...]:
    """Order SGLang versions: ``0.5.10 < 0.5.10.post1 < 0.5.11rc1 < 0.5.11``; a local part
    (``+ddtree``) sorts after the release it extends."""
    public, _, local = version.strip().lstrip("v").partition("+")
    m = re.match(r"^(\d+(?:\.\d+)*)(?:\.?(a|b|rc|dev)(\d*))?(?:\.?post(\d+))?", public)
    if not m:
        return ((), 0, 0, 0, local)
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums = nums + (0,) * (3 - len(nums)) if len(nums) < 3 else nums
    pre = {"dev": -4, "a": -3, "b": -2, "rc": -1}.get(m.group(2) or "", 0)
    pre_n = int(m.group(3) or 0)
    post = int(m.group(4)) if m.group(4) else 0
    return (nums, pre, pre_n, post, local)


def sort_versions(versions: Iterable[str]) -> list[str]:
    return sorted(versions, key=version_key)


def select_release(version: str, available: Sequence[str]) -> tuple[str, bool]:
    """The catalogued release for an installed ``version``: itself when catalogued, else the newest
    catalogued release not newer than it (``exact`` False), else the oldest one.

    A local build (``0.5.23+ddtree``) uses its own catalog when there is one, else its public base.
    """
    if not available:
        raise CatalogError("no SGLang catalogs are available")
    if version in available:
        return version, True
    base = version.split("+", 1)[0]
    if base in available:
        return base, False
    key = version_key(base)
    older = [v for v in sort_versions(available) if "+" not in v and version_key(v) <= key]
    if older:
        return older[-1], False
    return sort_versions(v for v in available if "+" not in v)[0], False


# --- files ---------------------------------------------------------------------------------------


def default_dir() -> str:
    """The catalogs shipped beside this module (controller, tests, stand-in). Ansible ships only the
    Python files to a GPU host, so there the modules get a release's catalog as an argument."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_catalogs")


def _spec(raw: dict[str, Any], where: str) -> FlagSpec:
    try:
        opts = tuple(str(o) for o in raw["opts"])
        dest = str(raw["dest"])
        action = str(raw["action"])
    except (KeyError, TypeError) as exc:
        raise CatalogError(f"{where}: flag entry {raw!r} lacks {exc}") from None
    if not opts or action not in ACTIONS:
        raise CatalogError(f"{where}: flag {opts or dest!r} has no spelling or an unknown action {action!r}")
    choices = raw.get("choices")
    return FlagSpec(
        opts=opts,
        dest=dest,
        action=action,
        nargs=raw.get("nargs"),
        type=raw.get("type"),
        choices=tuple(str(c) for c in choices) if choices is not None else None,
        default=raw.get("default"),
        required=bool(raw.get("required", False)),
        const=raw.get("const"),
        deprecated=raw.get("deprecated"),
        custom=raw.get("custom"),
    )


def catalog_from_dict(data: Any, source: str = "") -> Catalog:
    where = source or "catalog"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CatalogError(f"{where}: not an SGLang flag catalog (schema {SCHEMA} expected)")
    release = data.get("release")
    flags = data.get("flags")
    if not isinstance(release, str) or not release or not isinstance(flags, list):
        raise CatalogError(f"{where}: needs 'release' (text) and 'flags' (list)")
    return Catalog(
        release=release,
        flags=tuple(_spec(f, where) for f in flags),
        allow_abbrev=bool(data.get("allow_abbrev", True)),
        method=str(data.get("method", "parser")),
        source=source,
    )


def catalog_to_dict(catalog: Catalog) -> dict[str, Any]:
    """The catalog document of ``catalog`` (overlays merged), as :func:`catalog_from_dict` reads it."""
    flags = []
    for spec in catalog.flags:
        entry: dict[str, Any] = {"opts": list(spec.opts), "dest": spec.dest, "action": spec.action}
        for key in ("nargs", "type", "default", "const", "deprecated", "custom"):
            value = getattr(spec, key)
            if value is not None and value is not False:
                entry[key] = value
        if spec.choices is not None:
            entry["choices"] = list(spec.choices)
        if spec.required:
            entry["required"] = True
        flags.append(entry)
    return {
        "schema": SCHEMA,
        "release": catalog.release,
        "method": catalog.method,
        "allow_abbrev": catalog.allow_abbrev,
        "flags": flags,
    }


def load_file(path: str) -> Catalog:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read SGLang catalog {path}: {exc}") from None
    return catalog_from_dict(data, path)


def releases(directory: str | None = None) -> list[str]:
    """Catalogued releases in ``directory`` (default: the shipped ones), oldest first."""
    directory = directory or default_dir()
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sort_versions(
        n[: -len(".json")] for n in names if n.endswith(".json") and n != RENAMES_FILE and n[0].isdigit()
    )


def merge(base: Catalog, overlay: Catalog) -> Catalog:
    """``base`` with ``overlay``'s flags added; an overlay flag replaces a base flag with the same
    field or spelling (a local build that extends a release, e.g. a fork adding DDTREE)."""
    taken_opts = {o for spec in overlay.flags for o in spec.opts}
    taken_dests = {spec.dest for spec in overlay.flags}
    kept = [s for s in base.flags if s.dest not in taken_dests and not taken_opts & set(s.opts)]
    return Catalog(
        release=overlay.release,
        flags=tuple(sorted([*kept, *overlay.flags], key=lambda s: s.opts[0])),
        allow_abbrev=base.allow_abbrev,
        method=f"{base.method}+overlay",
        source=overlay.source,
    )


@functools.lru_cache(maxsize=64)
def _load_cached(path: str, mtime: float) -> Catalog:
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except ValueError as exc:
            raise CatalogError(f"cannot read SGLang catalog {path}: {exc}") from None
    catalog = catalog_from_dict(data, path)
    extends = data.get("extends")
    if isinstance(extends, str) and extends:
        catalog = merge(load(extends, os.path.dirname(path)), catalog)
    return catalog


def load(release: str, directory: str | None = None) -> Catalog:
    directory = directory or default_dir()
    path = os.path.join(directory, f"{release}.json")
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        known = ", ".join(releases(directory)) or "none"
        raise CatalogError(f"no catalog for SGLang {release} in {directory} (catalogued: {known})") from None
    return _load_cached(path, mtime)


def load_all(directory: str | None = None) -> list[Catalog]:
    """Every catalog in ``directory``, oldest release first."""
    return [load(r, directory) for r in releases(directory)]


def load_renames(directory: str | None = None) -> list[Rename]:
    path = os.path.join(directory or default_dir(), RENAMES_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != RENAMES_SCHEMA:
        raise CatalogError(f"{path}: not an SGLang renames file (schema {RENAMES_SCHEMA} expected)")
    out = []
    for raw in data.get("renames", []):
        try:
            out.append(
                Rename(
                    old=raw["old"],
                    new=raw["new"],
                    last_with_old=raw.get("last_with_old", ""),
                    first_with_new=raw.get("first_with_new", ""),
                    evidence=raw.get("evidence", ""),
                    alias_kept=bool(raw.get("alias_kept", False)),
                )
            )
        except (KeyError, TypeError):
            raise CatalogError(f"{path}: rename entry {raw!r} needs 'old' and 'new'") from None
    return out


# --- parser --------------------------------------------------------------------------------------


class RaisingParser(argparse.ArgumentParser):
    """ArgumentParser that raises ``ValueError`` instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(value: str) -> int:
    """SGLang's ``human_readable_int`` (0.5.20+: ``--context-length 32k``): plain integers, SI suffixes
    (``25.6k`` = 25600) and IEC suffixes (``1Ki`` = 1024, integers only); suffixes are case-sensitive."""
    text = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    if m:
        number, suffix = m.groups()
        if suffix in _IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes "
            "(1Ki, 1Mi). Suffixes are case-sensitive."
        ) from None


# SGLang's own converters whose meaning the planner needs (others keep the text).
_KNOWN_CONVERTERS = {"other:human_readable_int": human_readable_int}


def _converter(type_name: str | None) -> Any:
    if type_name in _KNOWN_CONVERTERS:
        return _KNOWN_CONVERTERS[type_name]
    if type_name == "int":
        return int
    if type_name == "float":
        return float
    if type_name == "json":
        return json.loads
    if type_name == "str":
        return str
    return None  # SGLang's own converters: keep the text


def _choices(spec: FlagSpec, convert: Any) -> list[Any] | None:
    if spec.choices is None:
        return None
    if convert in (int, float):
        try:
            return [convert(c) for c in spec.choices]
        except ValueError:
            return list(spec.choices)
    return list(spec.choices)


def _add(parser: argparse.ArgumentParser, spec: FlagSpec) -> None:
    kwargs: dict[str, Any] = {"dest": spec.dest, "default": spec.default}
    opts = list(spec.opts)
    action = spec.action
    if action in ("store_true", "store_false", "count", "version"):
        kwargs["action"] = "store_true" if action == "version" else action
        if spec.default is None and action != "count":  # catalogs leave argparse's own default out
            kwargs["default"] = action == "store_false"
    elif action in ("store_const", "append_const"):
        kwargs.update(action=action, const=spec.const)
    elif action == "bool_optional":
        positive = [o for o in opts if not any(o == "--no-" + p[2:] for p in opts)]
        opts = positive or opts[:1]
        kwargs["action"] = argparse.BooleanOptionalAction
    else:
        convert = _converter(spec.type)
        kwargs["action"] = action
        if convert is not None:
            kwargs["type"] = convert
        if spec.nargs is not None:
            kwargs["nargs"] = spec.nargs
            if spec.const is not None and spec.nargs == "?":
                kwargs["const"] = spec.const
        choices = _choices(spec, convert)
        if choices is not None:
            kwargs["choices"] = choices
    if spec.required:
        kwargs["required"] = True
    parser.add_argument(*opts, **kwargs)


def build_parser(
    catalog: Catalog, prog: str = "sglang serve", *, raising: bool = False
) -> argparse.ArgumentParser:
    """An argparse parser that accepts what ``catalog``'s release accepts.

    ``raising=True`` raises ``ValueError`` (argparse's message) instead of exiting with status 2.
    """
    cls = RaisingParser if raising else argparse.ArgumentParser
    parser = cls(prog=prog, allow_abbrev=catalog.allow_abbrev, add_help=not raising)
    add_arguments(parser, catalog)
    return parser


def add_arguments(parser: argparse.ArgumentParser, catalog: Catalog) -> None:
    """Add ``catalog``'s flags to ``parser`` (what ``ServerArgs.add_cli_args`` does in SGLang)."""
    seen: set[str] = set()
    for spec in catalog.flags:
        if "-h" in spec.opts or "--help" in spec.opts:
            continue
        fresh = tuple(o for o in spec.opts if o not in seen)
        if not fresh:
            continue
        seen.update(fresh)
        _add(parser, FlagSpec(**{**spec.__dict__, "opts": fresh}) if fresh != spec.opts else spec)


@functools.lru_cache(maxsize=64)
def cached_parser(catalog: Catalog, prog: str = "sglang serve") -> argparse.ArgumentParser:
    return build_parser(catalog, prog, raising=True)


def option_tokens(argv: Sequence[str]) -> list[tuple[int, str]]:
    """``(index, option)`` for each word argparse would read as an option (``--x`` or ``--x=v``)."""
    out = []
    for i, tok in enumerate(argv):
        if tok == "--":
            break
        if tok.startswith("--") and len(tok) > 2:
            out.append((i, tok.split("=", 1)[0]))
    return out


__all__ = [
    "RENAMES_SCHEMA",
    "SCHEMA",
    "Catalog",
    "CatalogError",
    "FlagSpec",
    "RaisingParser",
    "Rename",
    "add_arguments",
    "build_parser",
    "cached_parser",
    "catalog_from_dict",
    "catalog_to_dict",
    "default_dir",
    "load",
    "load_all",
    "load_file",
    "load_renames",
    "option_tokens",
    "releases",
    "render_catalog",
    "render_renames",
    "select_release",
    "sort_versions",
    "version_key",
]
