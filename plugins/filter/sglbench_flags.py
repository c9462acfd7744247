"""Controller-side Jinja filters: every config's launch flags checked against the host's SGLang.

``sglbench_flags_catalog``: from the ``sglbench_sglang_flags`` module's result, the flags to check
against: the installed release's own parser when it could be read, else the shipped catalog of the
reported version (``python/sglbench/hostlib/sglang_catalogs``), else none (any catalogued release).
``sglbench_flag_errors``: one message per config and TP size whose command line that release rejects,
naming the config, the release, the flag, the nearest real flag and any rename
(:mod:`sglbench.hostlib.sglang_args`). The implementations live once in the package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench.hostlib import sglang_args, sglang_catalog  # noqa: E402


def _load_matrix_filters() -> Any:
    """plugins/filter/sglbench.py (launch_argv, config_ports): the argv the units run, built once."""
    name = "sglbench_matrix_filters"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "sglbench.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_matrix = _load_matrix_filters()


def flags_catalog(probe: Any) -> dict[str, Any]:
    """``{release, source, exact, catalog, note}`` (+ ``cache_file`` for the installed parser) for the host:
    see the module docstring."""
    probe = probe if isinstance(probe, dict) else {}
    version = probe.get("version")
    error = probe.get("error")
    doc = probe.get("catalog")
    if isinstance(doc, dict):
        try:
            cat = sglang_catalog.catalog_from_dict(doc, "installed SGLang")
        except sglang_catalog.CatalogError as exc:
            error = f"the installed SGLang's flag dump is unusable: {exc}"
        else:
            return {
                "release": cat.release,
                "source": probe.get("source") or "installed",
                "exact": True,
                "catalog": doc,
                # the host's copy of the catalog (the plan reads it there instead of receiving it)
                "cache_file": probe.get("cache_file") or None,
                "note": f"flags of the installed SGLang {cat.release} ({probe.get('path')})",
            }
    if version:
        try:
            cat, exact = sglang_args.catalog_for(str(version))
        except (sglang_args.SglangArgsError, sglang_catalog.CatalogError) as exc:
            return {"release": None, "source": "any", "exact": False, "catalog": None, "note": str(exc)}
        why = f" ({error})" if error else ""
        note = (
            f"the installed SGLang {version}'s parser could not be read{why}: using the shipped catalog of "
            + (f"{cat.release}" if exact else f"{cat.release}, the nearest catalogued release")
        )
        return {
            "release": cat.release,
            "source": "catalog",
            "exact": exact,
            "catalog": sglang_catalog.catalog_to_dict(cat),
            "note": note,
        }
    return {
        "release": None,
        "source": "any",
        "exact": False,
        "catalog": None,
        "note": f"no SGLang found on the host ({error}): flags checked against every catalogued release",
    }


def _flags_only(argv: list[str]) -> list[str]:
    for i, word in enumerate(argv):
        if word.startswith("--"):
            return argv[i:]
    return []


def flag_errors(matrix: Any, flags: Any, port_base: Any = 30000) -> list[str]:
    """``config <name> tp<N>: <why>`` for each enabled config and TP size the release rejects."""
    if not isinstance(matrix, list):
        return []
    flags = flags if isinstance(flags, dict) else {}
    catalog = None
    if isinstance(flags.get("catalog"), dict):
        catalog = sglang_catalog.catalog_from_dict(flags["catalog"], str(flags.get("release")))
    try:
        ports = _matrix.config_ports(matrix, int(port_base))
    except (TypeError, ValueError):
        return []
    errors: list[str] = []
    for cfg, port in zip(matrix, ports, strict=True):
        if not isinstance(cfg, dict) or not cfg.get("enabled", True):
            continue
        for tp in cfg.get("tp") or []:
            argv = _flags_only(_matrix.launch_argv(cfg, int(tp), {"python": "python3", "port": port}))
            try:
                sglang_args.parse_launch_args_or_raise(argv, catalog=catalog)
            except sglang_args.SglangArgsError as exc:
                errors.append(f"config {cfg.get('name')} tp{int(tp)}: {exc}")
    return errors


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"sglbench_flags_catalog": flags_catalog, "sglbench_flag_errors": flag_errors}
