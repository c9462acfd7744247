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


def test_a_cached_hub_id_is_identified_by_its_snapshot_and_commit(tmp_path: Path, hub_cache) -> None:
    snapshot = hub_cache.add("Qwen/Qwen3-8B", {"config.json": '{"a": 1}', "model.safetensors": b"x" * 10})
    v1 = hub_cache.add("Qwen/Qwen3-8B", {"config.json": '{"a": 2}'}, revision="v1")
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    ident = mi.models_identity(["--model-path", "Qwen/Qwen3-8B"], env)["model"]
    assert ident["path"] == "Qwen/Qwen3-8B" and ident["local"]
    assert ident["files"] == mi.directory_identity(str(snapshot))["files"]
    assert ident["weights"]["count"] == 1 and ident["weights"]["bytes"] == 10  # through the blob links
    assert ident["hub"] == {"id": "Qwen/Qwen3-8B", "revision": "main", "commit_hash": snapshot.name}
    pinned = mi.models_identity(["--model-path", "Qwen/Qwen3-8B", "--revision=v1"], env)["model"]
    assert pinned["hub"]["commit_hash"] == v1.name and pinned["files"] != ident["files"]


def test_draft_revision_flag_and_uncached_ids_keep_the_old_identity(hub_cache) -> None:
    pin = hub_cache.commit("pin")
    hub_cache.add("z-lab/d", {"config.json": "{}"}, revision=None, commit=pin)
    env = {"HF_HUB_CACHE": str(hub_cache.root)}
    argv = ["--model-path", "org/absent", "--speculative-draft-model", "z-lab/d"]
    ids = mi.models_identity([*argv, "--speculative-draft-model-revision", pin], env)
    assert ids["draft"]["hub"] == {"id": "z-lab/d", "revision": pin, "commit_hash": pin}
    # not cached (here: no refs/main for the draft, nothing for the model): the name only, as before
    assert ids["model"] == {"path": "org/absent", "local": False, "files": {}, "weights": None}
    assert mi.models_identity(argv, env)["draft"] == {
        "path": "z-lab/d",
        "local": False,
        "files": {},
        "weights": None,
    }


def test_a_local_directory_identity_is_unchanged(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert mi.model_identity(str(tmp_path)) == mi.directory_identity(str(tmp_path))
