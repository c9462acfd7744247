"""sglbench_sglang_flags: the installed SGLang's flags from its own parser, cached per install."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import sglbench_sglang_flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "hostlib"))
from test_sglang_parser_dump import fake_sglang


def _args(root: Path, cache: Path, **extra: object) -> dict:
    return {
        "sglang_python": sys.executable,
        "environment": {"PYTHONPATH": str(root)},
        "cache_dir": str(cache),
        **extra,
    }


def test_reads_the_parser_once_then_from_the_cache(run_module, tmp_path: Path) -> None:
    root = fake_sglang(tmp_path / "site", "0.5.99")
    cache = tmp_path / "cache"
    first = run_module(sglbench_sglang_flags, _args(root, cache))
    assert not first.failed and first.result["source"] == "installed"
    assert first.result["version"] == "0.5.99" and first.result["error"] is None
    assert "--watchdog-timeout" in {o for f in first.result["catalog"]["flags"] for o in f["opts"]}
    files = list(cache.iterdir())
    assert [f.name for f in files] == [first.result["cache_key"]]
    assert first.result["cache_file"] == str(files[0])
    assert oct(files[0].stat().st_mode & 0o777) == "0o644"
    second = run_module(sglbench_sglang_flags, _args(root, cache))
    assert second.result["source"] == "cache" and second.result["catalog"] == first.result["catalog"]
    assert second.result["cache_file"] == str(files[0])


def test_check_mode_writes_no_cache(run_module, tmp_path: Path) -> None:
    root = fake_sglang(tmp_path / "site")
    done = run_module(sglbench_sglang_flags, _args(root, tmp_path / "cache"), check_mode=True)
    assert done.result["source"] == "installed" and not (tmp_path / "cache").exists()
    assert done.result["cache_file"] is None  # nothing on the host to read: the plan gets the catalog itself


def test_a_corrupt_cache_file_is_rebuilt(run_module, tmp_path: Path) -> None:
    root = fake_sglang(tmp_path / "site")
    cache = tmp_path / "cache"
    key = run_module(sglbench_sglang_flags, _args(root, cache)).result["cache_key"]
    (cache / key).write_text("{not json")
    again = run_module(sglbench_sglang_flags, _args(root, cache))
    assert again.result["source"] == "installed"
    assert json.loads((cache / key).read_text())["release"] == "0.5.99"


def test_no_sglang_is_reported_not_failed(run_module, tmp_path: Path) -> None:
    done = run_module(sglbench_sglang_flags, _args(tmp_path / "empty", tmp_path / "cache"))
    assert not done.failed
    assert done.result["catalog"] is None and done.result["version"] is None
    assert "cannot import sglang" in done.result["error"]


def test_a_parser_that_cannot_be_built_keeps_the_version(run_module, tmp_path: Path) -> None:
    root = fake_sglang(tmp_path / "site", "0.5.23")
    (root / "sglang" / "srt" / "server_args.py").write_text("import torch  # not installed\n")
    done = run_module(sglbench_sglang_flags, _args(root, tmp_path / "cache"))
    assert not done.failed and done.result["version"] == "0.5.23" and done.result["catalog"] is None
    assert "cannot build SGLang 0.5.23's launch_server parser" in done.result["error"]
    assert "torch" in done.result["error"]
