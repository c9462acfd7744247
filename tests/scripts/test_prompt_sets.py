"""scripts/prompt_sets.py and the shipped prompt sets it extends: the committed files are its output,
the hand-written prompts keep their ids and text, each sized category holds its count, and a changed
set changes the identity (and so every point hash) of an attempt that sends it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sglbench import resume
from sglbench.hostlib import prompts

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "prompt_sets.py"
# sha256 of the canonical JSON of each category's hand-written records as first shipped: results on
# disk name these ids, so neither ids nor text may change.
HANDWRITTEN = {
    "math": (18, "98ec08be868eb355ee48e9495b5fe195f899226968a5cf9786097532595e5ffb"),
    "code": (18, "b6d11ca1e1a04af33c0a9db5a95c5bfeca0c765a5ac634691360541fd1ec6a23"),
    "chat": (18, "bd5042492546b5039eef03d893edc8bcd865b4ccaf38501cc0ed6675a7339b1e"),
    "summarize": (16, "21232debd2e6f8e56f5052e82d4ed56f7bcc23ca98b6dabdd9e964a0c474e776"),
    "long-context": (6, "b50e90714c5574eced093a1cfb49968307574e54c92d1797b1c82635cfe589d6"),
}
MAX_SHIPPED_BYTES = 1 << 20  # text, not megabytes


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("prompt_sets_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ps = _load_script()


def _digest(records: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()


def test_committed_sets_are_the_generator_output() -> None:
    assert ps.main(["--check"]) == 0


def test_check_fails_on_an_edited_file_and_the_generator_restores_it(tmp_path: Path) -> None:
    for f in ps.PROMPTS_DIR.glob("*.jsonl"):
        shutil.copy(f, tmp_path / f.name)
    chat = tmp_path / "chat.jsonl"
    committed = chat.read_text(encoding="utf-8")
    chat.write_text(committed.replace('"chat-150"', '"chat-15x"'), encoding="utf-8")
    assert ps.main(["--check", "--dir", str(tmp_path)]) == 1
    assert ps.main(["--dir", str(tmp_path)]) == 0
    assert chat.read_text(encoding="utf-8") == committed


@pytest.mark.parametrize("category", sorted(HANDWRITTEN))
def test_hand_written_prompts_keep_their_ids_and_text(category: str) -> None:
    count, digest = HANDWRITTEN[category]
    _, handwritten = ps.split((ps.PROMPTS_DIR / f"{category}.jsonl").read_text(encoding="utf-8"))
    assert len(handwritten) == count and _digest(handwritten) == digest
    loaded = prompts.load_shipped_set(category)
    assert [p.id for p in loaded[:count]] == [r["id"] for r in handwritten]


@pytest.mark.parametrize("category", sorted(ps.SIZED))
def test_sized_categories_hold_their_count_of_distinct_prompts(category: str) -> None:
    loaded = prompts.load_shipped_set(category)
    assert len(loaded) == ps.PER_CATEGORY
    assert len({p.id for p in loaded}) == len({p.text for p in loaded}) == ps.PER_CATEGORY
    assert all(p.category == category for p in loaded)


def test_shipped_data_stays_small() -> None:
    assert sum(f.stat().st_size for f in ps.PROMPTS_DIR.glob("*.jsonl")) < MAX_SHIPPED_BYTES


def test_a_changed_set_changes_the_attempt_identity_and_every_point_hash() -> None:
    full = [p.to_param() for p in prompts.resolve_prompt_source("math,code,chat")]
    handwritten: list[dict[str, Any]] = []
    for category in ("math", "code", "chat"):
        handwritten += ps.split((ps.PROMPTS_DIR / f"{category}.jsonl").read_text(encoding="utf-8"))[1]
    parts = {"config": {"name": "dflash"}, "load": {"concurrency": [1, 4], "repeats": 2}}
    new = resume.attempt_identity({**parts, "prompts": full})
    old = resume.attempt_identity({**parts, "prompts": handwritten})
    assert new["doc"]["prompts"]["count"] == 3 * ps.PER_CATEGORY and old["doc"]["prompts"]["count"] == 54
    assert new["hash"] != old["hash"]
    assert new == resume.attempt_identity({**parts, "prompts": list(full)})  # same set, same identity
    new_points = resume.expected_points(new["hash"], parts["load"], None)
    old_points = resume.expected_points(old["hash"], parts["load"], None)
    assert [p["key"] for p in new_points] == [p["key"] for p in old_points]
    assert not {p["hash"] for p in new_points} & {p["hash"] for p in old_points}
