"""Stand-in ``sglang.srt.server_args`` for sglbench sim hosts (NOT SGLang).

``ServerArgs.add_cli_args(parser)`` adds the launch flags of the release the stand-in impersonates
(``SGLBENCH_SIM_SGLANG_VERSION``, default the newest catalogued public release), read from that
release's flag catalog: the same spellings, choices, numeric types and defaults as its own
``ServerArgs.add_cli_args``. Code that asks the installed SGLang for its parser (the preflight's
flag dump, ``sglbench.hostlib.sglang_parser_dump``) therefore sees the impersonated release on a sim
host. ``prepare_server_args(argv)`` parses a command line with that parser, as ``launch_server``
does; the cross-field checks of the real ``ServerArgs.__post_init__`` are not repeated here (the
stand-in itself applies the ones sglbench knows, ``sglbench.hostlib.sglang_args``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from sglbench.hostlib import sglang_catalog as _sglang_catalog
from sglbench.sim import release as _release


def _passthrough(name: str) -> Any:
    """A stand-in for one of SGLang's own value converters (``human_readable_int``, JSON list
    parsers, ...): keeps the text, carries the converter's name so a parser dump reads the same."""

    def convert(value: str) -> str:
        return value

    convert.__name__ = convert.__qualname__ = name
    return convert


_ACTION_CLASSES: dict[tuple[type, str], type] = {}


def _named_action(base: type, name: str) -> type:
    """A subclass of ``base`` called ``name`` (SGLang's custom Action classes, by name only)."""
    key = (base, name)
    if key not in _ACTION_CLASSES:
        _ACTION_CLASSES[key] = type(name, (base,), {})
    return _ACTION_CLASSES[key]


def _restore_identity(parser: argparse.ArgumentParser, catalog: _sglang_catalog.Catalog) -> None:
    """Give the rebuilt actions what the release's own parser shows and the catalog records but
    argparse does not rebuild: SGLang's converter names, custom Action class names, deprecations."""
    for action in parser._actions:
        spec = catalog.by_option.get(action.option_strings[0]) if action.option_strings else None
        if spec is None:
            continue
        if spec.type and spec.type.startswith("other:") and action.type is None:
            action.type = _passthrough(spec.type[len("other:") :])
        if spec.deprecated:
            action.new_flag = spec.deprecated  # type: ignore[attr-defined]
        if spec.custom and type(action).__name__ != spec.custom:
            action.__class__ = _named_action(type(action), spec.custom)


class ServerArgs:
    """The impersonated release's launch settings, one attribute per flag (its ``dest``)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in sorted(self.__dict__.items())) + ")"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """Add the impersonated release's launch flags to ``parser``."""
        catalog = _release.catalog()
        _sglang_catalog.add_arguments(parser, catalog)
        _restore_identity(parser, catalog)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        return cls(**vars(args))

    def url(self) -> str:
        return f"http://{getattr(self, 'host', '127.0.0.1')}:{getattr(self, 'port', 30000)}"


def prepare_server_args(argv: Sequence[str]) -> ServerArgs:
    """Parse ``argv`` like the impersonated release's ``launch_server`` (bad flags exit 2)."""
    parser = argparse.ArgumentParser(allow_abbrev=_release.catalog().allow_abbrev)
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(list(argv)))


__all__ = ["ServerArgs", "prepare_server_args"]
