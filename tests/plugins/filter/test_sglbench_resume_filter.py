"""plugins/filter/sglbench_resume.py: identity hash and prompt records as the playbook sees them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "sglbench_resume_filter", REPO / "plugins/filter/sglbench_resume.py"
)
assert _spec is not None and _spec.loader is not None
flt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flt)


def test_filters_are_registered() -> None:
    assert set(flt.FilterModule().filters()) == {"sglbench_attempt_identity", "sglbench_prompt_records"}


def test_prompt_records_mix_shipped_sets_and_files(tmp_path: Path) -> None:
    own = tmp_path / "mine.jsonl"
    own.write_text('# comment\n{"id": "x1", "prompt": "hello"}\n')
    recs = flt.sglbench_prompt_records(["math", str(own)])
    cats = {r["category"] for r in recs}
    assert "math" in cats and recs[-1] == {"id": "x1", "category": "user", "prompt": "hello"}
    synth = flt.sglbench_prompt_records("synthetic:8")
    assert all(len(r["input_ids"]) == 8 for r in synth)


def test_prompt_records_name_the_bad_set() -> None:
    with pytest.raises(AnsibleFilterError, match="nope"):
        flt.sglbench_prompt_records(["math", "nope"])
    with pytest.raises(AnsibleFilterError, match="no prompt set"):
        flt.sglbench_prompt_records([])


def test_identity_changes_with_the_prompts() -> None:
    a = flt.sglbench_attempt_identity({"prompts": flt.sglbench_prompt_records(["math"])})
    b = flt.sglbench_attempt_identity({"prompts": flt.sglbench_prompt_records(["code"])})
    assert a["hash"] != b["hash"] and a["doc"]["prompts"]["count"] > 0
    with pytest.raises(AnsibleFilterError, match="mapping"):
        flt.sglbench_attempt_identity(["not", "a", "mapping"])


def test_workload_sources_as_the_playbook_sends_them(tmp_path: Path) -> None:
    share = tmp_path / "share.json"
    share.write_text(
        '[{"id": "c1", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]'
    )
    recs = flt.sglbench_prompt_records([f"sharegpt:{share}", "shared-prefix:2x3:5:2"], 4)
    assert recs[0] == {"id": "c1", "category": "sharegpt", "prompt": "hi"}
    assert [r["category"] for r in recs[1:]] == ["shared-prefix"] * 6
    assert recs[1:] != flt.sglbench_prompt_records(["shared-prefix:2x3:5:2"], 5)  # seeded by the bench seed
    with pytest.raises(AnsibleFilterError, match="shared-prefix"):
        flt.sglbench_prompt_records(["shared-prefix:2"])


def test_a_trace_is_refused_beside_other_sets_before_a_server_starts(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}\n')
    (rec,) = flt.sglbench_prompt_records([f"trace:{trace}"])
    assert rec["token_blocks"] == {"blocks": [1, 2], "length": 600, "salt": rec["id"]}
    assert rec["max_new_tokens"] == 4 and rec["arrival_s"] == 0.0
    with pytest.raises(AnsibleFilterError, match="cannot be mixed with other prompt sets"):
        flt.sglbench_prompt_records([f"trace:{trace}", "math"])
