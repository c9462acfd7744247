"""DUMP_CODE run by an SGLang interpreter: the installed release's own parser as a catalog."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sglbench.hostlib import sglang_catalog, sglang_parser_dump

FAKE_SERVER_ARGS = """
import argparse

class DeprecatedStoreTrueAction(argparse._StoreTrueAction):
    def __init__(self, *args, new_flag=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.new_flag = new_flag

def human_readable_int(value):
    return int(value)

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--context-length", type=human_readable_int, default=None)
        parser.add_argument("--mem-fraction-static", type=float)
        parser.add_argument("--page-size", type=int, choices=[1, 16, 64])
        parser.add_argument("--enable-metrics", action=argparse.BooleanOptionalAction, default=False)
        parser.add_argument(
            "--disable-cuda-graph", action=DeprecatedStoreTrueAction, new_flag="--cuda-graph-backend"
        )
        parser.add_argument("--watchdog-timeout", type=float, default=300)
        parser.add_argument("--model-loader-extra-config", type=str, default=object())
"""


def fake_sglang(root: Path, version: str = "0.5.99") -> Path:
    pkg = root / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(FAKE_SERVER_ARGS)
    return root


def test_dump_code_reads_the_installed_parser(tmp_path: Path) -> None:
    root = fake_sglang(tmp_path)
    proc = subprocess.run(
        sglang_parser_dump.dump_argv(sys.executable),
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root)},
        check=True,
    )
    doc = sglang_parser_dump.parse_dump("some SGLang log line\n" + proc.stdout)
    cat = sglang_catalog.catalog_from_dict(doc, "installed")
    assert cat.release == "0.5.99" and cat.allow_abbrev and doc["method"] == "installed"
    by = cat.by_option
    assert by["--model"].required and by["--model"].type == "str"
    assert by["--context-length"].type == "other:human_readable_int"
    assert by["--page-size"].choices == ("1", "16", "64")
    assert by["--enable-metrics"].action == "bool_optional" and "--no-enable-metrics" in by
    assert by["--disable-cuda-graph"].action == "store_true"
    assert by["--disable-cuda-graph"].custom == "DeprecatedStoreTrueAction"
    assert by["--disable-cuda-graph"].deprecated == "--cuda-graph-backend"
    assert by["--model-loader-extra-config"].default is None  # not JSON: repr kept aside
    assert "default_repr" in next(f for f in doc["flags"] if f["dest"] == "model_loader_extra_config")
    parser = sglang_catalog.build_parser(cat, raising=True)
    assert parser.parse_args(["--model", "m", "--page-size", "16"]).page_size == 16


def test_a_dump_without_its_marker_line_is_refused() -> None:
    with pytest.raises(ValueError, match="no catalog line"):
        sglang_parser_dump.parse_dump("Traceback (most recent call last):\n  ImportError: torch\n")


def test_the_dump_and_the_loader_name_one_catalog_schema() -> None:
    """The dump imports nothing of ours (it runs in SGLang's interpreter), so it declares the id again."""
    assert sglang_parser_dump.SCHEMA == sglang_catalog.SCHEMA
