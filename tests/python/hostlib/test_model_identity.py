"""hostlib.model_identity: what identifies a model directory for the attempt hash."""

from __future__ import annotations

from pathlib import Path

from sglbench.hostlib import model_identity as mi


def test_directory_identity_changes_with_config_and_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 10)
    one = mi.directory_identity(str(tmp_path))
    assert one["local"] and one["weights"]["count"] == 1 and one["weights"]["bytes"] == 10
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 11)
    two = mi.directory_identity(str(tmp_path))
    assert two["weights"]["sha256"] != one["weights"]["sha256"]
    (tmp_path / "config.json").write_text('{"a": 2}')
    assert mi.directory_identity(str(tmp_path))["files"]["config.json"] != two["files"]["config.json"]


def test_models_identity_reads_both_flag_spellings(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        f"--model-path={tmp_path}",
        "--speculative-draft-model",
        "org/d",
    ]
    ids = mi.models_identity(argv)
    assert ids["model"]["local"] and "config.json" in ids["model"]["files"]
    assert ids["draft"] == {"path": "org/d", "local": False, "files": {}, "weights": None}
    assert mi.models_identity(["x"]) == {"model": None, "draft": None}
