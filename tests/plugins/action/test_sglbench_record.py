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


def test_a_full_results_disk_fails_with_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """the record step on a full disk. The play's always-stop still runs (config.yml);
    the failure itself must name the file and the cause, not dump a traceback."""
    import errno
    from types import SimpleNamespace

    am = object.__new__(action.ActionModule)
    record = {"schema": "sglbench.attempt/1"}
    am._task = SimpleNamespace(
        args={"dir": str(tmp_path / "run" / "a-tp1"), "files": {"record.json": record}}, check_mode=False
    )
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def full(path: str, text: str, mode: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(action, "write_atomic", full)
    with pytest.raises(AnsibleActionFail) as err:
        am.run()
    msg = str(err.value)
    assert msg.startswith("results could not be written on the controller: ")
    assert "a-tp1/record.json: No space left on device" in msg and "\n" not in msg
