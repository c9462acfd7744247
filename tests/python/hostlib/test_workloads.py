"""Workload sources: ShareGPT files (JSON list or JSONL, first turn) and seeded shared-prefix groups,
resolved as prompt sets, and the attempt identity following their content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglbench import resume
from sglbench.hostlib import prompts, workloads

CONVS = [
    {
        "id": "a1",
        "conversations": [{"from": "human", "value": "Why is the sky blue?"}, {"from": "gpt", "value": "x"}],
    },
    {"id": "a2", "conversations": [{"from": "human", "value": "only one turn"}]},
    {"conversation": [{"from": "human", "value": "Name three rivers."}, {"from": "gpt", "value": "y"}]},
]


def _write(path: Path, records: list, jsonl: bool) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records) if jsonl else json.dumps(records)
    path.write_text(text)
    return path


@pytest.mark.parametrize("jsonl", [False, True])
def test_sharegpt_first_turns_of_conversations_with_two_turns(tmp_path, jsonl):
    path = _write(tmp_path / ("s.jsonl" if jsonl else "s.json"), CONVS, jsonl)
    got = prompts.resolve_prompt_source(f"sharegpt:{path}")
    assert [(p.id, p.category, p.text) for p in got] == [
        ("a1", "sharegpt", "Why is the sky blue?"),
        ("s:2", "sharegpt", "Name three rivers."),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"conversations": "no"}]', "'conversations' list"),
        ('[{"conversations": [{"from": "human"}, {"value": "y"}]}]', r"conversations\[0\] needs"),
        ('[{"conversations": [1, 2]}', "not valid JSON"),
        ('[{"conversations": [{"value": "a"}]}]', "no conversation with two turns"),
        ('{"conversations": []}\nnot json\n', ":2: not valid JSON"),
    ],
)
def test_sharegpt_errors_name_the_place_and_the_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(prompts.PromptError, match=message) as err:
        prompts.resolve_prompt_source(f"sharegpt:{path}")
    assert "\n" not in str(err.value)  # one line
    with pytest.raises(prompts.PromptError, match="cannot read ShareGPT file"):
        prompts.resolve_prompt_source(f"sharegpt:{tmp_path / 'missing.json'}")


def test_shared_prefix_groups_share_their_system_prompt():
    got = prompts.resolve_prompt_source("shared-prefix:3x4:40:8", seed=1)
    assert len(got) == 12 and {p.category for p in got} == {"shared-prefix"}
    systems = {p.id: p.text.split("\n\n")[0] for p in got}
    for g in range(3):
        assert len({systems[f"sp-g{g}-q{q}"] for q in range(4)}) == 1
    assert len(set(systems.values())) == 3
    assert len({p.text.split("\n\n")[1] for p in got}) == 12  # every question differs
    assert len(systems["sp-g0-q0"].split()) == 40 + 3  # "System prompt 0." + 40 words


def test_shared_prefix_is_seeded():
    a = [p.text for p in prompts.resolve_prompt_source("shared-prefix:2x2", seed=5)]
    assert a == [p.text for p in prompts.resolve_prompt_source("shared-prefix:2x2", seed=5)]
    assert a != [p.text for p in prompts.resolve_prompt_source("shared-prefix:2x2", seed=6)]


@pytest.mark.parametrize(
    "spec", ["shared-prefix:4", "shared-prefix:0x3", "shared-prefix:2x2:10", "shared-prefix:1000x1000"]
)
def test_bad_shared_prefix_spec(spec):
    with pytest.raises(prompts.PromptError, match="shared-prefix"):
        prompts.resolve_prompt_source(spec)


def test_identity_hash_follows_the_sources_content(tmp_path):
    path = _write(tmp_path / "s.json", CONVS, False)

    def identity(spec: str, seed: int = 0) -> str:
        records = [p.to_param() for p in prompts.resolve_prompt_source(spec, seed=seed)]
        return resume.attempt_identity({"config": "c", "prompt_sets": [spec], "prompts": records})["hash"]

    before = identity(f"sharegpt:{path}")
    assert identity(f"sharegpt:{path}") == before
    changed = [dict(CONVS[0], conversations=[{"value": "Why is grass green?"}, {"value": "x"}]), *CONVS[1:]]
    _write(path, changed, False)
    assert identity(f"sharegpt:{path}") != before  # same path, other content: another attempt
    assert identity("shared-prefix:2x2", seed=1) != identity("shared-prefix:2x2", seed=2)
    assert identity("shared-prefix:2x2:10:5") != identity("shared-prefix:2x2:10:6")


def test_workload_error_is_a_prompt_error():
    assert issubclass(workloads.WorkloadError, prompts.PromptError)
