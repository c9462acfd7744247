"""sglbench_flags_catalog / sglbench_flag_errors: each config checked against the host's SGLang."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sglbench.hostlib import sglang_catalog

_spec = importlib.util.spec_from_file_location(
    "sglbench_flags_filter", Path(__file__).resolve().parents[3] / "plugins" / "filter" / "sglbench_flags.py"
)
assert _spec is not None and _spec.loader is not None
flt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flt)

SHIPPED = sglang_catalog.releases()
needs_0_5_23 = pytest.mark.skipif("0.5.23" not in SHIPPED, reason="no 0.5.23 catalog shipped")


def _matrix(**args: object) -> list[dict]:
    return [
        {"name": "ok", "tp": [1], "model_path": "/m", "args": {"reasoning_parser": "qwen3"}},
        {"name": "bad", "tp": [1, 4], "model_path": "/m", "args": dict(args)},
        {"name": "off", "enabled": False, "tp": [1], "model_path": "/m", "args": {"no_such_flag": 1}},
    ]


def test_the_installed_parser_wins() -> None:
    doc = {
        "schema": sglang_catalog.SCHEMA,
        "release": "9.9.9",
        "flags": [{"opts": ["--model-path"], "dest": "model_path", "action": "store"}],
    }
    probe = {"version": "9.9.9", "path": "/x", "source": "cache", "catalog": doc, "cache_file": "/c/9.json"}
    got = flt.flags_catalog(probe)
    assert (got["release"], got["source"], got["exact"]) == ("9.9.9", "cache", True)
    assert got["cache_file"] == "/c/9.json"
    errors = flt.flag_errors([{"name": "a", "tp": [2], "model_path": "/m"}], got)
    assert len(errors) == 1
    assert errors[0].startswith("config a tp2: --tp-size is not a flag of SGLang 9.9.9")


@needs_0_5_23
def test_a_version_without_its_parser_uses_the_shipped_catalog() -> None:
    got = flt.flags_catalog({"version": "0.5.23", "error": "import torch failed", "catalog": None})
    assert (got["release"], got["source"], got["exact"]) == ("0.5.23", "catalog", True)
    assert "import torch failed" in got["note"]
    later = flt.flags_catalog({"version": "0.5.99"})
    assert later["exact"] is False and "nearest catalogued release" in later["note"]


@needs_0_5_23
def test_errors_name_the_config_tp_release_and_rename() -> None:
    flags = flt.flags_catalog({"version": "0.5.23"})
    errors = flt.flag_errors(_matrix(mamba_scheduler_strategy="extra_buffer"), flags, 30000)
    assert len(errors) == 2  # tp1 and tp4 of "bad"; the disabled config is not checked
    assert errors[0].startswith("config bad tp1: --mamba-scheduler-strategy is not a flag of SGLang 0.5.23")
    assert flt.flag_errors(_matrix(watchdog_timeout=600), flags) == []


def test_no_sglang_on_the_host_accepts_what_any_release_accepts() -> None:
    flags = flt.flags_catalog({"error": "cannot import sglang"})
    assert flags["release"] is None and "every catalogued release" in flags["note"]
    assert flt.flag_errors(_matrix(tp_size_typo=1), flags)[0].startswith("config bad tp1: no catalogued")
    assert flt.flag_errors("not a list", flags) == []
