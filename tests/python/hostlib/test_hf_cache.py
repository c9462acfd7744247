"""hostlib.hf_cache: a hub id (org/name) found in the Hugging Face cache the way huggingface_hub finds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sglbench.hostlib import hf_cache

CONFIG = '{"architectures": ["Qwen3ForCausalLM"]}'


def env_for(cache) -> dict[str, str]:
    return {"HF_HUB_CACHE": str(cache.root)}


# --- resolution ------------------------------------------------------------------------------------


def test_refs_main_resolves_to_its_snapshot(hub_cache) -> None:
    snapshot = hub_cache.add("Qwen/Qwen3-8B", {"config.json": CONFIG, "model.safetensors": b"x" * 8})
    r = hf_cache.resolve("Qwen/Qwen3-8B", env=env_for(hub_cache))
    assert r.path == str(snapshot) and r.from_hub
    assert r.how == hf_cache.HUB_REF and r.revision == "main"
    assert r.commit_hash == snapshot.name and len(r.commit_hash) == 40
    assert r.cache_dir == str(hub_cache.root) and r.cache_dir_source == "HF_HUB_CACHE"
    assert r.ref == "Qwen/Qwen3-8B"
    assert Path(r.path, "config.json").read_text() == CONFIG  # through the blobs/ symlink
    assert r.to_dict()["commit_hash"] == r.commit_hash
    assert "Qwen/Qwen3-8B (revision main = commit " in r.describe() and str(snapshot) in r.describe()


def test_explicit_revision_reads_its_own_ref(hub_cache) -> None:
    main = hub_cache.add("org/m", {"config.json": '{"v": "main"}'})
    v1 = hub_cache.add("org/m", {"config.json": '{"v": "v1"}'}, revision="v1")
    pr = hub_cache.add("org/m", {"config.json": '{"v": "pr"}'}, revision="refs/pr/7")
    env = env_for(hub_cache)
    assert hf_cache.resolve("org/m", None, env).path == str(main)
    assert hf_cache.resolve("org/m", "main", env).path == str(main)
    assert hf_cache.resolve("org/m", "v1", env).path == str(v1)
    assert hf_cache.resolve("org/m", "refs/pr/7", env).path == str(pr)
    assert hf_cache.cached_refs(str(hub_cache.repo("org/m"))) == ["main", "refs/pr/7", "v1"]


def test_commit_hash_revision_is_the_snapshot_itself(hub_cache) -> None:
    commit = hub_cache.commit("pinned")
    snapshot = hub_cache.add("org/m", {"config.json": CONFIG}, revision=None, commit=commit)
    r = hf_cache.resolve("org/m", commit, env_for(hub_cache))
    assert r.path == str(snapshot) and r.how == hf_cache.HUB_COMMIT and r.commit_hash == commit
    assert "(commit " in r.describe()
    # no refs/main for it: the default revision is not cached
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("org/m", None, env_for(hub_cache))
    assert "no refs/main (no revision is cached)" in err.value.message


def test_ref_file_with_a_trailing_newline_still_resolves(hub_cache) -> None:
    snapshot = hub_cache.add("org/m", {"config.json": CONFIG})
    (hub_cache.repo("org/m") / "refs" / "main").write_text(snapshot.name + "\n")
    assert hf_cache.resolve("org/m", env=env_for(hub_cache)).path == str(snapshot)


# --- not cached: one line that names the id, the revision, the cache and the fix -------------------


def test_missing_repo_names_id_revision_cache_and_fix(hub_cache) -> None:
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("Qwen/Qwen3-32B", env=env_for(hub_cache))
    msg = err.value.message
    assert "\n" not in msg and str(err.value) == msg
    assert msg.startswith("Qwen/Qwen3-32B (revision main) is not in the Hugging Face cache")
    assert "no models--Qwen--Qwen3-32B" in msg
    assert f"looked in {hub_cache.root} (from HF_HUB_CACHE)" in msg
    assert "`huggingface-cli download Qwen/Qwen3-32B`" in msg
    assert "HF_HOME / HF_HUB_CACHE in the config's env" in msg and "local directory" in msg
    assert (err.value.ref, err.value.revision, err.value.cache_dir) == (
        "Qwen/Qwen3-32B",
        "main",
        str(hub_cache.root),
    )


def test_missing_revision_lists_the_cached_ones_and_downloads_that_revision(hub_cache) -> None:
    hub_cache.add("org/m", {"config.json": CONFIG})
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("org/m", "v2", env_for(hub_cache))
    assert "no refs/v2 (cached revisions: main)" in err.value.message
    assert "`huggingface-cli download org/m --revision v2`" in err.value.message


def test_missing_snapshot(hub_cache) -> None:
    snapshot = hub_cache.add("org/m", {"config.json": CONFIG})
    (snapshot / "config.json").unlink()
    snapshot.rmdir()
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("org/m", env=env_for(hub_cache))
    assert f"has no snapshots/{snapshot.name} (refs/main points at it)" in err.value.message
    missing_commit = "0" * 40
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("org/m", missing_commit, env_for(hub_cache))
    assert f"has no snapshots/{missing_commit};" in err.value.message


def test_default_cache_message_says_which_variables_were_unset(tmp_path: Path) -> None:
    with pytest.raises(hf_cache.NotCachedError) as err:
        hf_cache.resolve("org/m", env={"HOME": str(tmp_path)})
    assert f"looked in {tmp_path}/.cache/huggingface/hub (the default: HF_HUB_CACHE," in err.value.message


# --- where the cache is -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected", "source"),
    [
        (
            {"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d"},
            "/a",
            "HF_HUB_CACHE",
        ),
        (
            {"HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d"},
            "/b",
            "HUGGINGFACE_HUB_CACHE",
        ),
        ({"HF_HOME": "/c", "XDG_CACHE_HOME": "/d"}, "/c/hub", "HF_HOME"),
        ({"XDG_CACHE_HOME": "/d", "HOME": "/home/u"}, "/d/huggingface/hub", "XDG_CACHE_HOME"),
        ({"HOME": "/home/u"}, "/home/u/.cache/huggingface/hub", "default"),
        ({"HF_HUB_CACHE": "", "HF_HOME": "/c"}, "/c/hub", "HF_HOME"),  # empty counts as unset
        ({"HF_HOME": "~/hf", "HOME": "/home/u"}, "/home/u/hf/hub", "HF_HOME"),
        ({"HF_HUB_CACHE": "$SCRATCH/hub", "SCRATCH": "/scratch/u"}, "/scratch/u/hub", "HF_HUB_CACHE"),
        ({"HF_HOME": "${DATA}/hf", "DATA": "/data"}, "/data/hf/hub", "HF_HOME"),
        ({"HF_HUB_CACHE": "$UNSET_VAR/hub"}, "$UNSET_VAR/hub", "HF_HUB_CACHE"),
    ],
)
def test_cache_dir_precedence_follows_huggingface_hub(env, expected, source) -> None:
    assert hf_cache.hub_cache_dir(env) == (expected, source)


def test_cache_dir_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch, hub_cache) -> None:
    for name in hf_cache.CACHE_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(hub_cache.root.parent))
    assert hf_cache.hub_cache_dir() == (str(hub_cache.root), "HF_HOME")
    snapshot = hub_cache.add("org/m", {"config.json": CONFIG})
    assert hf_cache.resolve("org/m").path == str(snapshot)


# --- local paths ---------------------------------------------------------------------------------------


def test_an_existing_local_directory_wins_over_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hub_cache
) -> None:
    hub_cache.add("org/m", {"config.json": CONFIG})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "m").mkdir(parents=True)
    r = hf_cache.resolve("org/m", "v9", env_for(hub_cache))
    assert (r.path, r.how, r.from_hub, r.commit_hash) == ("org/m", hf_cache.LOCAL_DIR, False, None)
    assert r.describe() == "org/m"
    absolute = hf_cache.resolve(str(tmp_path), env=env_for(hub_cache))
    assert absolute.path == str(tmp_path) and absolute.how == hf_cache.LOCAL_DIR


def test_a_path_that_is_not_a_hub_id_is_returned_as_given(hub_cache) -> None:
    for ref in ("/nonexistent/model", "./m", "gpt2", "/models/cfg.json"):
        r = hf_cache.resolve(ref, env=env_for(hub_cache))
        assert (r.path, r.how) == (ref, hf_cache.AS_GIVEN)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("Qwen/Qwen3-8B", True),
        ("meta-llama/Llama-3.1-8B-Instruct", True),
        ("z-lab/Qwen3-8B-DFlash-b16", True),
        ("org_1/model.v2", True),
        ("/models/Qwen3-8B", False),
        ("./Qwen/Qwen3-8B", False),
        ("../org/m", False),
        ("~/models/m", False),
        (".org/m", False),
        ("org/m/extra", False),
        ("gpt2", False),
        ("org--x/m", False),
        ("org/m..x", False),
        ("org/m.git", False),
        ("org/-m", False),
        ("org/m-", False),
        ("org/m with space", False),
        ("", False),
        ("o/" + "m" * 100, False),
    ],
)
def test_looks_like_hub_id(ref: str, expected: bool) -> None:
    assert hf_cache.looks_like_hub_id(ref) is expected


def test_an_existing_relative_path_is_not_a_hub_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "cfg").write_text("{}")
    assert not hf_cache.looks_like_hub_id("org/cfg")
    assert hf_cache.looks_like_hub_id("org/other")


def test_repo_folder_name_and_commit_hash() -> None:
    assert hf_cache.repo_folder_name("Qwen/Qwen3-8B") == "models--Qwen--Qwen3-8B"
    assert hf_cache.is_commit_hash("a" * 40) and not hf_cache.is_commit_hash("A" * 40)
    assert not hf_cache.is_commit_hash("abc1234")


def test_read_ref_refuses_to_leave_the_refs_directory(hub_cache) -> None:
    hub_cache.add("org/m", {"config.json": CONFIG})
    repo = str(hub_cache.repo("org/m"))
    assert hf_cache.read_ref(repo, "main")
    assert hf_cache.read_ref(repo, "../refs/main") is None
    assert hf_cache.read_ref(repo, "/etc/hostname") is None
    assert hf_cache.read_ref(repo, "") is None


def test_shipped_to_hosts_as_module_utils() -> None:
    link = Path(__file__).resolve().parents[3] / "plugins/module_utils/sglbench_hostlib"
    assert link.is_symlink()
    assert os.readlink(link) == "../../python/sglbench/hostlib"
    assert (link / "hf_cache.py").resolve() == Path(hf_cache.__file__).resolve()
