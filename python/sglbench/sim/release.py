"""The SGLang release the stand-in impersonates (``SGLBENCH_SIM_SGLANG_VERSION``).

Standard library only: imported by the stand-in (flags, version string, accounting variant) and by
the ``sglang`` shim package on sim hosts (``sglang.__version__``,
``sglang.srt.server_args.ServerArgs.add_cli_args``), so every part of a sim host answers "which
SGLang is installed" the same way.

The version is ``SGLBENCH_SIM_SGLANG_VERSION`` when set, else the newest catalogued *public* release
(no ``+local`` part). Its launch flags come from the release's catalog
(:mod:`sglbench.hostlib.sglang_catalog`): the version itself when catalogued (``0.5.23``,
``0.5.23+ddtree``), else the catalogued release :func:`sglang_catalog.select_release` picks for it
(the newest one not newer than it, a local build's public base, the oldest for older versions).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sglbench.hostlib import sglang_catalog

ENV = "SGLBENCH_SIM_SGLANG_VERSION"
_VERSION = re.compile(r"^v?\d+(?:\.\d+)*(?:\.?(?:a|b|rc|dev)\d*)?(?:\.?post\d+)?(?:\+[A-Za-z0-9.\-_]+)?$")


class ReleaseError(ValueError):
    """A version the stand-in cannot impersonate (the message names the variable)."""


@dataclass(frozen=True)
class Impersonation:
    version: str  # what sglang.__version__ and /server_info report
    release: str  # the catalog whose flags the stand-in parses with
    exact: bool  # the version itself is catalogued

    def describe(self) -> str:
        if self.exact:
            return f"SGLang {self.version}"
        return (
            f"SGLang {self.version} (not catalogued: launch flags of the nearest catalogued release, "
            f"{self.release})"
        )


def newest_public(directory: str | None = None) -> str:
    """The newest catalogued public release (the default when the variable is unset)."""
    public = [r for r in sglang_catalog.releases(directory) if "+" not in r]
    if not public:
        raise ReleaseError(
            f"no SGLang flag catalogs in {directory or sglang_catalog.default_dir()}: the stand-in cannot "
            "tell which flags SGLang accepts"
        )
    return public[-1]


def version_from_env(env: Mapping[str, str] | None = None) -> str:
    """``SGLBENCH_SIM_SGLANG_VERSION``, else the newest catalogued public release."""
    env = os.environ if env is None else env
    raw = (env.get(ENV) or "").strip()
    return raw or newest_public()


def resolve(version: str, directory: str | None = None) -> Impersonation:
    """Which catalog a version's flags come from; :class:`ReleaseError` for a malformed version."""
    version = version.strip()
    if not _VERSION.match(version):
        raise ReleaseError(
            f"{ENV}={version!r} is not an SGLang version (e.g. 0.5.23, 0.5.10.post1, 0.5.23+ddtree; "
            f"catalogued: {', '.join(sglang_catalog.releases(directory)) or 'none'})"
        )
    available = sglang_catalog.releases(directory)
    if not available:
        newest_public(directory)  # raises with the message naming the directory
    chosen, exact = sglang_catalog.select_release(version, available)
    return Impersonation(version, chosen, exact)


# The release the stand-in's API, log lines and process behaviour were checked against, running the
# real SGLang on the CPU (tests/contract/, docs/contract.md). Impersonating it or anything newer gets
# that behaviour; older releases keep what the stand-in modelled before (e.g. ``/get_load``, the
# ``Init torch distributed`` lines), which no real server here can check.
CONTRACT_RELEASE = "0.5.23"


def at_least(version: str, base: str = CONTRACT_RELEASE) -> bool:
    """``version`` (``0.5.23+ddtree`` counts as 0.5.23) is ``base`` or newer."""
    public = version.split("+", 1)[0]
    return sglang_catalog.version_key(public) >= sglang_catalog.version_key(base)


def catalog(version: str | None = None, directory: str | None = None) -> sglang_catalog.Catalog:
    """The flag catalog of the impersonated release (default: from the environment)."""
    return sglang_catalog.load(resolve(version or version_from_env(), directory).release, directory)


__all__ = [
    "CONTRACT_RELEASE",
    "ENV",
    "Impersonation",
    "ReleaseError",
    "at_least",
    "catalog",
    "newest_public",
    "resolve",
    "version_from_env",
]
