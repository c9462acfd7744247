"""plugins/action/sglbench_record.py: the record contract check and atomic writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

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


# -- record.json built from the play's facts ----------------------------------------------------------------
INSTANCE = {
    "name": "eagle-tp2",
    "tp": 2,
    "config": "eagle",
    "algorithm": "EAGLE",
    "model_path": "/models/m",
    "draft_model_path": "/models/d",
    "port": 30001,
    "gpus": [0, 1],
    "args": {"mem_fraction_static": 0.8},
    "extra_args": ["--trust-remote-code"],
    "env": {"A": "1"},
    "unit": "sglang-eagle-tp2.service",
    "argv": ["python3", "-m", "sglang.launch_server", "--tp", "2"],
}


def _facts(**over: object) -> dict[str, object]:
    """Facts as the cycle hands them to the action (config.yml, 'Write the record')."""
    facts: dict[str, object] = {
        "simulated": "True",  # an untyped template result: read as a boolean
        "run_id": "run1",
        "host": "simhost",
        "instance": INSTANCE,
        "outcome": "ok",
        "failure": None,
        "timings": {
            "started_at": 100.0,
            "stop_started_at": 101.0,
            "start_started_at": 103.5,
            "health_started_at": 104.0,
            "moved_on_at": 120.0,
        },
        "wait": {
            "ready": True,
            "outcome": "ready",
            "elapsed_s": 15.0,
            "time_to_ready_s": 14.0,
            "ready_at": 118.0,
            "invocation_id": "from-wait",
            "http_statuses": {"200": 3},
        },
        "journal": {
            "invocation_id": "from-journal",
            "ready_logged_at": 117.5,
            "startup": {"max_total_num_tokens": 4096},
            "journal": "line\n",
            "entries": 42,
        },
        "gpu_free": {"killed": [7], "report": "freed", "waited_s": 0.5},
        "plan": {"max_total_num_tokens": 4000, "max_running_requests": 8},
        "capacity": {"match": False},
        "server_info": {"max_total_num_tokens": 4096, "effective_max_running_requests": 8},
        "benchmark": None,
        "identity": {"hash": "abc"},
        "resume": {"fresh": False},
    }
    facts.update(over)
    return facts


def test_the_record_is_built_from_the_facts_the_play_gathered() -> None:
    doc = json.loads(action.record_text(_facts(), {"unit.service": "[Unit]\n"}, ended_at=130.0))
    assert doc["schema"] == action.ATTEMPT_SCHEMA and doc["simulated"] is True
    assert (doc["run_id"], doc["host"], doc["instance"], doc["tp"]) == ("run1", "simhost", "eagle-tp2", 2)
    assert doc["config"] == {
        "name": "eagle",
        **{k: INSTANCE[k] for k in ("algorithm", "model_path", "draft_model_path", "port", "gpus")},
        **{k: INSTANCE[k] for k in ("args", "extra_args", "env")},
    }
    # The journal's invocation id wins over the readiness wait's; the unit file is named when written.
    assert doc["unit"] == {
        "name": "sglang-eagle-tp2.service",
        "file": "unit.service",
        "invocation_id": "from-journal",
    }
    assert doc["argv"] == INSTANCE["argv"]
    t = doc["timings"]
    assert (t["started_at"], t["ended_at"], t["total_s"]) == (100.0, 130.0, 30.0)
    assert (t["stop_s"], t["start_s"], t["health_s"], t["time_to_ready_s"]) == (2.5, 0.5, 15.0, 14.0)
    assert (t["ready_logged_at"], t["ready_seen_at"], t["moved_on_at"]) == (117.5, 118.0, 120.0)
    # The phase entries as the cycle took them, for the overhead split (sglbench.overhead).
    phase_starts = ("stop_started_at", "start_started_at", "health_started_at", "bench_started_at")
    assert tuple(t[k] for k in phase_starts) == (101.0, 103.5, 104.0, None)
    assert t["failure_seen_at"] is None and t["exited_at"] is None and t["failure_reported_at"] is None
    assert doc["stop"] == {"skipped": False, "killed": [7], "report": "freed", "waited_s": 0.5}
    assert doc["observed"] == {
        "server_info": {"max_total_num_tokens": 4096, "effective_max_running_requests": 8},
        "startup": {"max_total_num_tokens": 4096},
        "http_statuses": {"200": 3},
    }
    assert doc["journal"] == {"file": "journal.log", "entries": 42}
    assert (doc["capacity"], doc["identity"], doc["resume"]) == (
        {"match": False},
        {"hash": "abc"},
        {"fresh": False},
    )


def test_a_failed_start_records_what_is_known_and_nothing_else() -> None:
    """The unit ended before it was ready: no health phase, no journal, the stop was skipped."""
    facts = _facts(
        outcome="failed",
        failure={"phase": "health", "cause": "cuda_oom", "message": "CUDA out of memory"},
        timings={"started_at": 100.0, "start_started_at": 101.0, "failure_reported_at": 109.0},
        wait={
            "ready": False,
            "outcome": "unit_ended",
            "ready_at": 108.0,
            "exited_at": 107.5,
            "invocation_id": "w",
        },
        journal=None,
        gpu_free={},
        simulated=False,
    )
    doc = json.loads(action.record_text(facts, {"unit.service": None}, ended_at=110.0))
    t = doc["timings"]
    assert t["stop_s"] is None and t["start_s"] is None and t["ready_seen_at"] is None
    assert (t["failure_seen_at"], t["exited_at"], t["failure_reported_at"]) == (108.0, 107.5, 109.0)
    assert doc["unit"] == {"name": "sglang-eagle-tp2.service", "file": None, "invocation_id": "w"}
    assert doc["stop"] == {"skipped": True, "killed": [], "report": "", "waited_s": None}
    assert doc["journal"] == {"file": None, "entries": None}
    assert doc["observed"]["startup"] is None and doc["simulated"] is False


def test_the_built_record_reads_back_through_the_contract(tmp_path: Path) -> None:
    from sglbench.records import parse_record

    failure = {"phase": "bench", "cause": "server_exited", "message": "died", "lines": ["Traceback"]}
    facts = _facts(outcome="failed", failure=failure, journal={"startup": {"max_running_requests": 6}})
    rec = parse_record(json.loads(action.record_text(facts, {}, ended_at=130.0)), tmp_path / "record.json")
    assert (rec.run_id, rec.host, rec.instance, rec.tp, rec.outcome) == (
        "run1",
        "simhost",
        "eagle-tp2",
        2,
        "failed",
    )
    assert rec.config.algorithm == "EAGLE" and rec.config.port == 30001 and rec.simulated
    assert (
        rec.failure is not None
        and rec.failure.cause == "server_exited"
        and rec.failure.lines == ["Traceback"]
    )
    assert (rec.kv_tokens_predicted, rec.kv_tokens_observed) == (4000, 4096)
    assert rec.max_running_requests_observed == 8 and rec.timings.total_s == 30.0
    assert rec.argv == INSTANCE["argv"]


def test_record_facts_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(AnsibleActionFail, match="run_id"):
        action.record_text(_facts(run_id=None), {})
    with pytest.raises(AnsibleActionFail, match=r"unknown field.*colour"):
        action.record_text(_facts(colour="blue"), {})
    with pytest.raises(AnsibleActionFail, match="mapping"):
        action.record_text(["not", "facts"], {})


def _module(monkeypatch: pytest.MonkeyPatch, args: dict[str, object]) -> Any:
    from types import SimpleNamespace

    am = object.__new__(action.ActionModule)
    am._task = SimpleNamespace(args=args, check_mode=False)
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    return am


def test_the_action_writes_the_built_record_first_then_the_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "run1" / "simhost" / "eagle-tp2"
    files = {"unit.service": "[Unit]\n", "journal.log": "line\n"}
    out = _module(monkeypatch, {"dir": str(d), "record": _facts(), "files": files}).run()
    assert out["written"] == ["record.json", "unit.service", "journal.log"]
    doc = json.loads((d / "record.json").read_text())
    assert doc["unit"]["file"] == "unit.service" and doc["timings"]["ended_at"] > 0
    assert (d / "journal.log").read_text() == "line\n"


def test_a_record_given_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = {
        "dir": str(tmp_path),
        "record": _facts(),
        "files": {"record.json": {"schema": action.ATTEMPT_SCHEMA}},
    }
    with pytest.raises(AnsibleActionFail, match="not both"):
        _module(monkeypatch, args).run()
    assert list(tmp_path.iterdir()) == []


def test_an_attempt_that_ended_before_its_resume_step_moves_the_previous_record_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "eagle-tp2"
    _module(monkeypatch, {"dir": str(d), "record": _facts(), "files": {"journal.log": "first\n"}}).run()
    first = (d / "record.json").read_text()
    args = {"dir": str(d), "record": _facts(), "files": {"journal.log": "second\n"}, "move_previous": True}
    out = _module(monkeypatch, args).run()
    assert sorted(out["moved"]) == ["journal.log", "record.json"]
    kept = list((d / "previous").glob("*/record.json"))
    assert len(kept) == 1 and kept[0].read_text() == first
    assert (kept[0].parent / "journal.log").read_text() == "first\n"
    assert (d / "journal.log").read_text() == "second\n"
    # without it the record is replaced in place, as when the resume step has already moved the old one
    again = _module(monkeypatch, {"dir": str(d), "record": _facts(), "files": {}}).run()
    assert again["moved"] == [] and len(list((d / "previous").iterdir())) == 1
