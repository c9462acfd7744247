"""Checks over the committed SGLang flag catalogs (pure JSON, no network), and the pure helpers of
scripts/sglang_catalog.py that produce them."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CATALOG_DIR = REPO / "python" / "sglbench" / "hostlib" / "sglang_catalogs"
SCRIPT = REPO / "scripts" / "sglang_catalog.py"


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("sglang_catalog_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sc = _load_script()

CATALOG_FILES = sorted(p for p in CATALOG_DIR.glob("*.json") if p.name != "renames.json")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _catalog(release: str) -> dict[str, Any]:
    return _load(CATALOG_DIR / f"{release}.json")


def _options(doc: dict[str, Any]) -> set[str]:
    return {o for f in doc["flags"] for o in f["opts"]}


# --- the committed data ----------------------------------------------------------------------------


def test_catalogs_cover_the_release_list() -> None:
    assert sc.RELEASES, "the script lists no releases"
    assert len(set(sc.RELEASES)) == len(sc.RELEASES)
    missing = [r for r in sc.RELEASES if not (CATALOG_DIR / f"{r}.json").exists()]
    assert not missing, f"releases listed in scripts/sglang_catalog.py without a catalog: {missing}"


def test_every_file_is_generated_or_a_marked_overlay() -> None:
    for path in CATALOG_FILES:
        doc = _load(path)
        if doc.get("method") == "overlay":
            assert doc.get("extends") in sc.RELEASES, f"{path.name}: overlay of an uncatalogued release"
        else:
            assert doc["release"] in sc.RELEASES, f"{path.name}: not in RELEASES (stale file?)"


@pytest.mark.parametrize("path", CATALOG_FILES, ids=lambda p: p.name)
def test_catalog_file_is_well_formed(path: Path) -> None:
    doc = _load(path)
    assert doc["schema"] == sc.SCHEMA
    assert doc["release"] == path.name[: -len(".json")]
    assert isinstance(doc["flags"], list) and doc["flags"]
    seen: set[str] = set()
    for flag in doc["flags"]:
        assert {"opts", "dest", "action"} <= flag.keys(), flag
        assert flag["action"] in sc.ALLOWED_ACTIONS, flag
        assert flag["opts"] and all(isinstance(o, str) and o.startswith("-") for o in flag["opts"]), flag
        assert isinstance(flag["dest"], str) and flag["dest"], flag
        assert "-h" not in flag["opts"] and "--help" not in flag["opts"]
        for opt in flag["opts"]:
            assert opt not in seen, f"{path.name}: {opt} declared twice"
            seen.add(opt)
        if "choices" in flag:
            assert flag["choices"] == sorted(flag["choices"]) and all(
                isinstance(c, str) for c in flag["choices"]
            )
        if "type" in flag:
            assert flag["type"] in ("int", "float", "str", "json") or flag["type"].startswith("other:"), flag
        if "nargs" in flag:
            assert flag["action"] in ("store", "append") and flag["nargs"] is not None, flag
    if doc.get("method") != "overlay":
        firsts = [f["opts"][0] for f in doc["flags"]]
        assert firsts == sorted(firsts), f"{path.name}: flags not sorted by first option string"


@pytest.mark.parametrize("release", sc.RELEASES)
def test_generated_catalog_header(release: str) -> None:
    doc = _catalog(release)
    assert doc["method"] in ("parser", "ast")
    assert doc["generated_by"] == "scripts/sglang_catalog.py"
    assert doc["wheel"].startswith(f"sglang-{release}-") and doc["wheel"].endswith(".whl")
    assert len(doc["wheel_sha256"]) == 64 and int(doc["wheel_sha256"], 16) >= 0
    assert isinstance(doc["allow_abbrev"], bool)
    assert list(doc)[-1] == "flags"


@pytest.mark.parametrize("release", sc.RELEASES)
def test_generated_catalog_text_is_one_flag_per_line(release: str) -> None:
    """The committed text is exactly what the renderer writes (diffable, one flag a line)."""
    path = CATALOG_DIR / f"{release}.json"
    doc = _load(path)
    meta = {k: v for k, v in doc.items() if k != "flags"}
    assert path.read_text(encoding="utf-8") == sc.render_catalog(meta, doc["flags"])


def test_minimal_flags_leave_default_looking_keys_out() -> None:
    for release in sc.RELEASES:
        for flag in _catalog(release)["flags"]:
            for key in ("nargs", "type", "choices", "default", "const", "custom", "deprecated"):
                assert flag.get(key, "absent") is not None, (release, flag)
            assert flag.get("required", True) is True, (release, flag)
            if flag["action"] == "store_true":
                assert flag.get("default", "absent") is not False, (release, flag)


def test_model_path_is_required_everywhere() -> None:
    for release in sc.RELEASES:
        by_opt = {o: f for f in _catalog(release)["flags"] for o in f["opts"]}
        assert by_opt["--model-path"].get("required") is True, release
        assert by_opt["--model-path"]["dest"] == "model_path"


def test_mamba_strategy_flag_across_releases() -> None:
    latest = _catalog("0.5.23")
    by_opt = {o: f for f in latest["flags"] for o in f["opts"]}
    assert "--mamba-radix-cache-strategy" in by_opt
    assert "extra_buffer_lazy" in by_opt["--mamba-radix-cache-strategy"]["choices"]
    assert "--mamba-scheduler-strategy" not in by_opt
    assert "--mamba-scheduler-strategy" in _options(_catalog("0.5.10.post1"))


def test_catalog_0_5_23_flag_count_matches_the_prototype() -> None:
    assert len(_catalog("0.5.23")["flags"]) == 531


def test_bool_optional_flags_carry_their_no_form() -> None:
    for release in sc.RELEASES:
        for flag in _catalog(release)["flags"]:
            if flag["action"] == "bool_optional":
                positives = [o for o in flag["opts"] if not o.startswith("--no-")]
                assert all("--no-" + o[2:] in flag["opts"] for o in positives), (release, flag)


def test_renames_file() -> None:
    doc = _load(CATALOG_DIR / "renames.json")
    assert doc["schema"] == sc.RENAMES_SCHEMA
    renames = doc["renames"]
    order = {r: i for i, r in enumerate(sc.RELEASES)}
    for r in renames:
        assert {"old", "new", "last_with_old", "first_with_new", "evidence"} <= r.keys(), r
        assert r["first_with_new"] in order and r["last_with_old"] in order, r
        assert order[r["last_with_old"]] + 1 == order[r["first_with_new"]], r
        assert r["old"] in _options(_catalog(r["last_with_old"])), r
        new_opts = _options(_catalog(r["first_with_new"]))
        assert r["new"] in new_opts, r
        assert r.get("alias_kept", False) == (r["old"] in new_opts), r
        if "old_dropped_in" in r:
            assert order[r["old_dropped_in"]] > order[r["first_with_new"]]
            assert r["old"] not in _options(_catalog(r["old_dropped_in"]))
        assert r["evidence"].strip()
    pairs = {(r["old"], r["new"]): r for r in renames}
    mamba = pairs[("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy")]
    assert mamba["first_with_new"] in sc.RELEASES
    assert "server_args.py" in mamba["evidence"]
    for old, new in [
        ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        ("--speculative-dflash-draft-window-size", "--speculative-draft-window-size"),
    ]:
        assert (old, new) in pairs


def test_curated_renames_are_all_in_renames_json() -> None:
    pairs = {(r["old"], r["new"]) for r in _load(CATALOG_DIR / "renames.json")["renames"]}
    for entry in sc.CURATED_RENAMES:
        assert (entry["old"], entry["new"]) in pairs, entry
        assert ".py" in entry["evidence"], "curated evidence must name the file read"


def test_no_help_text_is_stored() -> None:
    for path in [*CATALOG_FILES, CATALOG_DIR / "renames.json"]:
        assert '"help"' not in path.read_text(encoding="utf-8"), path.name


# --- pure helpers of the script -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls_name", "bases", "nargs", "const", "expected"),
    [
        ("_StoreAction", ["_StoreAction", "Action"], None, None, ("store", None)),
        (
            "_StoreTrueAction",
            ["_StoreTrueAction", "_StoreConstAction", "Action"],
            0,
            True,
            ("store_true", None),
        ),
        ("BooleanOptionalAction", ["BooleanOptionalAction", "Action"], 0, None, ("bool_optional", None)),
        ("_AppendAction", ["_AppendAction", "Action"], None, None, ("append", None)),
        ("_CountAction", ["_CountAction", "Action"], 0, None, ("count", None)),
        ("_VersionAction", ["_VersionAction", "Action"], 0, None, ("version", None)),
        # Custom subclasses of a concrete argparse action behave like it.
        ("MyTrue", ["_StoreTrueAction", "_StoreConstAction", "Action"], 0, True, ("store_true", "MyTrue")),
        # Direct argparse.Action subclasses: by arity and what they store.
        ("DeprecatedStoreTrueAction", ["Action"], 0, True, ("store_true", "DeprecatedStoreTrueAction")),
        ("DeprecatedAction", ["Action"], 0, None, ("store_const", "DeprecatedAction")),
        ("OffAction", ["Action"], 0, False, ("store_false", "OffAction")),
        ("LoRAPathAction", ["Action"], "*", None, ("store", "LoRAPathAction")),
        ("DeprecatedAliasStoreAction", ["Action"], None, None, ("store", "DeprecatedAliasStoreAction")),
    ],
)
def test_map_action(cls_name: str, bases: list[str], nargs: Any, const: Any, expected: tuple) -> None:
    assert sc.map_action(cls_name, bases, nargs, const) == expected


def _record(action: argparse.Action, **extra: Any) -> dict[str, Any]:
    """A worker record, as ``_describe_action`` makes it in the scratch venv."""
    return sc._describe_action(action, type("NoStub", (), {})) | extra


def test_normalize_flag_from_real_argparse_actions() -> None:
    p = argparse.ArgumentParser()
    a_true = p.add_argument("--x", action="store_true")
    a_path = p.add_argument("--model-path", "--model", type=str, required=True)
    a_bool = p.add_argument("--fast", action=argparse.BooleanOptionalAction, default=False)
    a_json = p.add_argument("--cfg", type=json.loads, default={"a": 1})
    a_list = p.add_argument("--mods", nargs="+", choices=["b", "a"], default=("a",))
    a_opt = p.add_argument("--sum", nargs="?", const="", type=str)
    a_other = p.add_argument("--size", type=lambda s: int(s))
    a_inf = p.add_argument("--limit", type=float, default=float("inf"))
    assert sc.normalize_flag(_record(a_true)) == {"opts": ["--x"], "dest": "x", "action": "store_true"}
    assert sc.normalize_flag(_record(a_path)) == {
        "opts": ["--model-path", "--model"],
        "dest": "model_path",
        "action": "store",
        "type": "str",
        "required": True,
    }
    assert sc.normalize_flag(_record(a_bool)) == {
        "opts": ["--fast", "--no-fast"],
        "dest": "fast",
        "action": "bool_optional",
        "default": False,
    }
    assert sc.normalize_flag(_record(a_json))["type"] == "json"
    assert sc.normalize_flag(_record(a_json))["default"] == {"a": 1}
    mods = sc.normalize_flag(_record(a_list))
    assert (mods["nargs"], mods["choices"], mods["default"]) == ("+", ["a", "b"], ["a"])
    assert sc.normalize_flag(_record(a_opt)) == {
        "opts": ["--sum"],
        "dest": "sum",
        "action": "store",
        "nargs": "?",
        "type": "str",
        "const": "",
    }
    assert sc.normalize_flag(_record(a_other))["type"] == "other:<lambda>"
    inf = sc.normalize_flag(_record(a_inf))
    assert "default" not in inf and inf["default_repr"] == "inf"


def test_normalize_flag_custom_deprecated_actions() -> None:
    class DeprecatedStoreConstAction(argparse.Action):
        def __init__(self, option_strings, dest, new_flag=None, const_value=None, nargs=0, **kw):
            self.new_flag = new_flag
            self.const_value = const_value
            super().__init__(option_strings, dest, nargs=nargs, **kw)

        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, self.const_value)

    p = argparse.ArgumentParser()
    act = p.add_argument(
        "--enforce-x",
        dest="backend",
        action=DeprecatedStoreConstAction,
        new_flag="--backend=x",
        const_value="x",
    )
    assert sc.normalize_flag(_record(act)) == {
        "opts": ["--enforce-x"],
        "dest": "backend",
        "action": "store_const",
        "custom": "DeprecatedStoreConstAction",
        "deprecated": "--backend=x",
        "const": "x",
    }


def test_stub_defaults_become_default_repr() -> None:
    class Stub:
        def __repr__(self) -> str:
            return "<stub torch.float16>"

    p = argparse.ArgumentParser()
    act = p.add_argument("--dtype", default=Stub())
    rec = sc._describe_action(act, Stub)
    flag = sc.normalize_flag(rec)
    assert "default" not in flag and flag["default_repr"] == "<stub torch.float16>"


def test_render_catalog_is_parseable_and_line_per_flag() -> None:
    flags = [
        {"opts": ["--a"], "dest": "a", "action": "store_true"},
        {"opts": ["--b"], "dest": "b", "action": "store", "type": "int", "default": 3},
    ]
    meta = {"schema": sc.SCHEMA, "release": "9.9.9", "method": "parser"}
    text = sc.render_catalog(meta, flags)
    assert json.loads(text) == {**meta, "flags": flags}
    lines = text.splitlines()
    assert lines[0] == '{"schema": "sglbench.sglang_catalog/1",'
    assert sum(1 for line in lines if line.startswith('  {"opts"')) == 2


def test_runtime_requirements_follow_the_srt_extra() -> None:
    metadata = "\n".join(
        [
            "Requires-Dist: aiohttp",
            "Requires-Dist: numpy",
            'Requires-Dist: transformers==4.54.1; extra == "runtime-common"',
            'Requires-Dist: sglang[runtime_common]; extra == "srt"',
            'Requires-Dist: torch==2.7.1; extra == "srt"',
            'Requires-Dist: openai>=1.0; extra == "openai"',
            'Requires-Dist: av==16.1.0; sys_platform == "linux"',
        ]
    )
    reqs = sc.runtime_requirements(metadata)
    assert reqs == {
        "aiohttp": None,
        "numpy": None,
        "av": "16.1.0",
        "transformers": "4.54.1",
        "torch": "2.7.1",
    }
    assert sc.dist_import_name("pyzmq") == "zmq"
    assert sc.dist_import_name("sglang-kernel") == "sgl_kernel"
    assert sc.dist_import_name("openai-harmony") == "openai_harmony"


def test_deprecation_targets() -> None:
    assert sc.deprecation_targets("--cuda-graph-max-bs-decode") == ["--cuda-graph-max-bs-decode"]
    assert sc.deprecation_targets("--backend=disabled") == ["--backend"]
    assert sc.deprecation_targets("--cuda-graph-backend-{decode,prefill}=disabled") == [
        "--cuda-graph-backend-decode",
        "--cuda-graph-backend-prefill",
    ]
    assert sc.deprecation_targets("an env var instead") == []


def _f(opt: str, dest: str, action: str = "store", **kw: Any) -> dict[str, Any]:
    opts = [opt] if isinstance(opt, str) else list(opt)
    return {"opts": opts, "dest": dest, "action": action, **kw}


def test_detect_renames_deprecated_alias_kept_then_dropped() -> None:
    catalogs = [
        ("1.0", [_f("--old-x", "old_x")], {}),
        (
            "1.1",
            [
                _f("--new-x", "new_x"),
                _f("--old-x", "new_x", custom="DeprecatedAliasStoreAction", deprecated="--new-x"),
            ],
            {},
        ),
        ("1.2", [_f("--new-x", "new_x")], {}),
    ]
    (r,) = sc.detect_renames(catalogs)
    assert (r["old"], r["new"], r["last_with_old"], r["first_with_new"]) == (
        "--old-x",
        "--new-x",
        "1.0",
        "1.1",
    )
    assert r["alias_kept"] is True and r["old_dropped_in"] == "1.2"


def test_detect_renames_secondary_option_string() -> None:
    catalogs = [
        ("1.0", [_f("--dflash-w", "dflash_w", type="int")], {}),
        ("1.1", [_f(["--w", "--dflash-w"], "w", type="int")], {}),
    ]
    (r,) = sc.detect_renames(catalogs)
    assert (r["old"], r["new"], r.get("alias_kept")) == ("--dflash-w", "--w", True)


def test_detect_renames_gone_and_new_pairing() -> None:
    # Same dest.
    same_dest = [("1", [_f("--a", "d")], {}), ("2", [_f("--b", "d")], {})]
    assert [(r["old"], r["new"]) for r in sc.detect_renames(same_dest)] == [("--a", "--b")]
    assert "alias_kept" not in sc.detect_renames(same_dest)[0]
    # Identical help text (help read, not stored).
    same_help = [
        ("1", [_f("--a", "a")], {"--a": "The max size."}),
        ("2", [_f("--b", "b")], {"--b": "The max size."}),
    ]
    assert [(r["old"], r["new"]) for r in sc.detect_renames(same_help)] == [("--a", "--b")]
    # Same choices and type, similar names.
    ch = {"choices": ["x", "y"], "type": "str"}
    similar = [
        ("1", [_f("--sched-strategy", "s", **ch)], {}),
        ("2", [_f("--sched-strategy2", "t", **ch)], {}),
    ]
    assert [(r["old"], r["new"]) for r in sc.detect_renames(similar)] == [
        ("--sched-strategy", "--sched-strategy2")
    ]
    # Weak evidence: nothing in common but being gone/new at once.
    weak = [
        ("1", [_f("--a", "a", type="int")], {"--a": "A."}),
        ("2", [_f("--b", "b", type="int")], {"--b": "B."}),
    ]
    assert sc.detect_renames(weak) == []
    # Ambiguous: two candidates with the same help text -> no rename.
    amb = [
        ("1", [_f("--a", "a")], {"--a": "Same."}),
        ("2", [_f("--b", "b"), _f("--c", "c")], {"--b": "Same.", "--c": "Same."}),
    ]
    assert sc.detect_renames(amb) == []


def test_detect_renames_curated_entries() -> None:
    catalogs = [
        ("1", [_f("--retries", "retries", type="int")], {"--retries": "Retries."}),
        ("2", [_f("--attempts", "attempts", type="int")], {"--attempts": "Attempts."}),
        ("3", [_f("--attempts", "attempts", type="int")], {}),
    ]
    curated = [{"old": "--retries", "new": "--attempts", "evidence": "read a.py of 1 and 2"}]
    (r,) = sc.detect_renames(catalogs, curated)
    assert r == {
        "old": "--retries",
        "new": "--attempts",
        "last_with_old": "1",
        "first_with_new": "2",
        "evidence": "read a.py of 1 and 2",
    }
    # A curated rename the catalogs do not support is left out.
    assert sc.detect_renames(catalogs, [{"old": "--nope", "new": "--attempts", "evidence": "x"}]) == []


def test_ast_extract_reads_literal_add_argument_calls() -> None:
    source = """
import argparse
CHOICES = ["b", "a"]

class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

class ServerArgs:
    tp_size: int = 1
    backend: str = "a"
    dtype = None

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--tp-size", "--tp", type=int, default=ServerArgs.tp_size, help="TP.")
        parser.add_argument("--backend", choices=CHOICES, default=ServerArgs.backend)
        parser.add_argument("--fast", action="store_true")
        parser.add_argument("--flag", action=argparse.BooleanOptionalAction)
        parser.add_argument("--old", action=DeprecatedAction)
        parser.add_argument("--dtype", default=get_dtype())
        parser.add_argument(name_from_somewhere)
"""
    flags = {f["opts"][0]: f for f in sc.catalog_flags(sc.ast_extract(source))}
    assert set(flags) == {"--tp-size", "--backend", "--fast", "--flag", "--old", "--dtype"}
    assert flags["--tp-size"] == {
        "opts": ["--tp-size", "--tp"],
        "dest": "tp_size",
        "action": "store",
        "type": "int",
        "default": 1,
    }
    assert flags["--backend"]["choices"] == ["a", "b"] and flags["--backend"]["default"] == "a"
    assert flags["--fast"] == {"opts": ["--fast"], "dest": "fast", "action": "store_true"}
    assert flags["--flag"]["opts"] == ["--flag", "--no-flag"] and flags["--flag"]["action"] == "bool_optional"
    assert flags["--old"]["action"] == "store_const" and flags["--old"]["custom"] == "DeprecatedAction"
    assert flags["--dtype"]["default_repr"] == "get_dtype()"


def test_check_skips_hand_written_overlays(tmp_path: Path) -> None:
    overlay = tmp_path / "1.0+x.json"
    overlay.write_text(
        json.dumps({"schema": sc.SCHEMA, "release": "1.0+x", "method": "overlay", "flags": []})
    )
    generated = tmp_path / "1.0.json"
    generated.write_text(json.dumps({"schema": sc.SCHEMA, "release": "1.0", "method": "parser", "flags": []}))
    assert sc.is_overlay(overlay) and not sc.is_overlay(generated)
