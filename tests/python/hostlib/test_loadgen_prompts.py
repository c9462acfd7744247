"""Prompt sources: shipped sets, user JSONL, inline parameters and synthetic token ids."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sglbench.hostlib import prompts


def test_every_shipped_set_loads_with_unique_ids_and_its_category():
    all_ids = []
    for name in prompts.SHIPPED_SETS:
        items = prompts.load_shipped_set(name)
        assert len(items) >= 5, name
        assert {p.category for p in items} == {name}
        assert all(p.text and p.kind == "text" for p in items)
        all_ids += [p.id for p in items]
    assert len(all_ids) == len(set(all_ids))
    mixed = prompts.resolve_prompt_source("mixed")
    assert len(mixed) == len(all_ids)


def test_long_context_is_longer_than_the_rest():
    longest_short = max(len(p.text or "") for p in prompts.resolve_prompt_source("math,code,chat"))
    assert min(len(p.text or "") for p in prompts.load_shipped_set("long-context")) > 5 * longest_short


def test_user_jsonl_kinds_and_defaults(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(
        "# comment\n\n"
        + json.dumps({"prompt": "hi"})
        + "\n"
        + json.dumps({"id": "m", "category": "chat", "messages": [{"role": "user", "content": "yo"}]})
        + "\n"
        + json.dumps({"input_ids": [1, 2, 3]})
        + "\n"
        + json.dumps("plain string")
        + "\n"
    )
    got = prompts.resolve_prompt_source(str(f))
    assert [p.kind for p in got] == ["text", "messages", "input_ids", "text"]
    assert got[0].id == "mine:3" and got[0].category == "user"
    assert got[1].as_text() == "yo" and got[0].as_messages() == [{"role": "user", "content": "hi"}]
    with pytest.raises(prompts.PromptError, match="token ids only"):
        got[2].as_messages()


@pytest.mark.parametrize(
    ("line", "msg"),
    [
        ("{not json", "not valid JSON"),
        ('{"id": 1}', "no 'prompt'"),
        ('{"prompt": "a", "input_ids": [1]}', "only one of"),
        ('{"input_ids": [1, -2]}', "non-negative"),
        ('{"messages": [{"role": "user"}]}', "messages\\[0\\]"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path, line, msg):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(prompts.PromptError, match=msg) as exc:
        prompts.load_jsonl(f)
    assert f"{f}:2" in str(exc.value)


def test_resolve_errors_say_what_is_accepted(tmp_path):
    with pytest.raises(prompts.PromptError, match="neither a shipped set"):
        prompts.resolve_prompt_source("nope")
    with pytest.raises(prompts.PromptError, match="synthetic:1024"):
        prompts.resolve_prompt_source("synthetic:abc")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(prompts.PromptError, match="holds no prompts"):
        prompts.load_jsonl(tmp_path / "empty.jsonl")


def test_synthetic_prompts_fixed_length_and_seeded():
    a = prompts.resolve_prompt_source("synthetic:64", synthetic_n=5, seed=1)
    assert len(a) == 5 and all(len(p.input_ids or ()) == 64 for p in a)
    assert a == prompts.synthetic_prompts(5, 64, 1)
    assert a != prompts.synthetic_prompts(5, 64, 2)
    lo, hi = prompts.SYNTHETIC_ID_RANGE
    assert all(lo <= t < hi for p in a for t in p.input_ids or ())


def test_selection_is_deterministic_and_balanced():
    base = prompts.load_shipped_set("math")
    n = 2 * len(base) + 7  # two whole passes and a part of the third
    pick = prompts.select_prompts(base, n, seed=7)
    assert pick == prompts.select_prompts(base, n, seed=7)
    assert pick != prompts.select_prompts(base, n, seed=8)
    counts = Counter(p.id for p in pick)
    assert set(counts) == {p.id for p in base}
    assert sorted(set(counts.values())) == [2, 3] and sum(c == 3 for c in counts.values()) == 7


def test_params_round_trip():
    original = prompts.load_shipped_set("chat")[:3] + prompts.synthetic_prompts(1, 4, 0)
    again = prompts.prompts_from_params([p.to_param() for p in original])
    assert again == original
    with pytest.raises(prompts.PromptError, match="empty"):
        prompts.prompts_from_params([])
