"""plugins/action/sglbench_record.py: the record contract check and atomic writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleActionFail

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "sglbench_record_action", REPO / "plugins/action/sglbench_record.py"
)
assert _spec and _spec.loader
action = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(action)


def test_record_must_carry_the_schema() -> None:
    action.check_record(json.dumps({"schema": "sglbench.attempt/1"}))
    with pytest.raises(AnsibleActionFail, match="schema"):
        action.check_record(json.dumps({"schema": "other/1"}))
    with pytest.raises(AnsibleActionFail, match="not valid JSON"):
        action.check_record("{")


def test_write_atomic_leaves_no_temp_files(tmp_path: Path) -> None:
    action.write_atomic(str(tmp_path / "record.json"), "{}", 0o644)
    action.write_atomic(str(tmp_path / "record.json"), '{"a": 1}', 0o644)
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
    assert json.loads((tmp_path / "record.json").read_text()) == {"a": 1}


def test_mappings_are_written_as_json() -> None:
    assert json.loads(action._text("x.json", {"a": [1, 2]})) == {"a": [1, 2]}
    assert action._text("journal.log", "line\n") == "line\n"
