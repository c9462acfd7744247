"""hostlib/systemd_unit.py: systemctl show parsing, unit state decisions, journal JSON."""

from __future__ import annotations

import json

import pytest

from sglbench.hostlib import systemd_unit as su

RUNNING = """Id=sglang-a-tp1.service
LoadState=loaded
ActiveState=active
SubState=running
Result=success
InvocationID=abc
MainPID=42
ExecMainCode=0
ExecMainStatus=0
ExecMainStartTimestampMonotonic=1000
ExecMainExitTimestampMonotonic=0
"""


def state(text: str, **over: str) -> su.UnitState:
    props = su.parse_show(text)
    props.update(over)
    return su.unit_state_from_props("x.service", props)


def test_running_unit() -> None:
    s = state(RUNNING)
    assert s.running and not s.ended
    assert s.invocation_id == "abc"
    assert s.exec_main_status is None
    assert s.unit == "sglang-a-tp1.service"


def test_main_exit_during_start_post_counts_as_ended() -> None:
    # systemd keeps the unit activating/start-post while ExecStartPost runs, even though the server died
    s = state(RUNNING, ActiveState="activating", SubState="start-post", ExecMainCode="1", ExecMainStatus="1",
              ExecMainExitTimestampMonotonic="2000", MainPID="0")  # fmt: skip
    assert s.main_exited and s.ended
    assert s.exec_main_code == "exited" and s.exec_main_status == 1
    assert "status 1" in s.describe()


def test_failed_and_inactive_units_have_ended() -> None:
    assert state(RUNNING, ActiveState="failed", SubState="failed").ended
    assert state(RUNNING, ActiveState="inactive", SubState="dead").ended
    assert state(RUNNING, ActiveState="activating", SubState="start").running


def test_exit_code_from_a_previous_start_does_not_end_a_new_one() -> None:
    s = state(RUNNING, ExecMainCode="1", ExecMainExitTimestampMonotonic="500")  # exit before this start
    assert not s.main_exited and s.running


def test_read_unit_state_uses_the_runner() -> None:
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return 0, RUNNING, ""

    s = su.read_unit_state("sglang-a-tp1.service", runner)
    assert s.main_pid == 42
    assert calls[0][:3] == ["systemctl", "show", "--no-pager"]
    assert calls[0][-1] == "sglang-a-tp1.service"


def test_journal_argv_selects_one_invocation_from_both_fields() -> None:
    argv = su.journal_argv("abc")
    assert "_SYSTEMD_INVOCATION_ID=abc" in argv and "INVOCATION_ID=abc" in argv
    assert argv[argv.index("_SYSTEMD_INVOCATION_ID=abc") + 1] == "+"
    assert "--output=json" in argv and not any(a.startswith("-n") or a.startswith("--lines") for a in argv)


def test_parse_journal_json() -> None:
    lines = [
        {"__REALTIME_TIMESTAMP": "2000000", "SYSLOG_IDENTIFIER": "systemd", "_PID": "1", "MESSAGE": "exited"},
        {"__REALTIME_TIMESTAMP": "1000000", "SYSLOG_IDENTIFIER": "sglang-a", "_PID": "9", "MESSAGE": "ready"},
        {"__REALTIME_TIMESTAMP": "1500000", "SYSLOG_IDENTIFIER": "sglang-a", "MESSAGE": [104, 105, 255]},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\nnot json\n"
    entries = su.parse_journal_json(text)
    assert [e.message for e in entries] == ["ready", "hi\ufffd", "exited"]
    assert su.messages_text(entries) == "ready\nhi\ufffd\nexited\n"
    rendered = su.render_journal(entries)
    assert rendered.splitlines()[0] == "1970-01-01T00:00:01.000000+00:00 sglang-a[9]: ready"
    assert su.first_entry_time(entries, "exit") == 2000000
    assert su.first_entry_time(entries, "nope") is None


def _journal_runner(outputs: list[str], rc: int = 0) -> tuple[list[list[str]], su.Runner]:
    """journalctl that returns each of ``outputs`` in turn (the last one from then on)."""
    calls: list[list[str]] = []

    def runner(argv: object) -> tuple[int, str, str]:
        assert isinstance(argv, list)
        calls.append(argv)
        if "--sync" in argv:
            return 0, "", ""
        text = outputs[min(len([c for c in calls if "--sync" not in c]) - 1, len(outputs) - 1)]
        return rc, text, "no journal" if rc else ""

    return calls, runner


def _lines(*messages: str) -> str:
    return "\n".join(
        json.dumps({"__REALTIME_TIMESTAMP": str(i), "MESSAGE": m}) for i, m in enumerate(messages)
    )


def test_the_journal_of_a_running_start_is_read_once_after_a_sync() -> None:
    calls, runner = _journal_runner([_lines("a"), _lines("a", "b")])
    entries = su.read_start_journal("inv1", runner, settle_s=0.0)
    assert [e.message for e in entries] == ["a"]
    assert calls[0] == ["journalctl", "--sync"] and len(calls) == 2


def test_the_journal_of_an_exited_start_is_read_until_two_reads_agree() -> None:
    calls, runner = _journal_runner([_lines("a"), _lines("a", "traceback"), _lines("a", "traceback")])
    slept: list[float] = []
    entries = su.read_start_journal("inv1", runner, settle_s=5.0, clock=lambda: 0.0, sleep=slept.append)
    assert [e.message for e in entries] == ["a", "traceback"] and len(slept) == 2
    assert len([c for c in calls if "--sync" not in c]) == 3


def test_the_settle_ends_at_its_deadline_and_a_failing_journalctl_names_the_invocation() -> None:
    clock = iter([0.0, 0.5, 1.5])
    _calls, runner = _journal_runner([_lines("a"), _lines("a", "b"), _lines("a", "b", "c")])
    entries = su.read_start_journal(
        "inv1", runner, settle_s=1.0, clock=lambda: next(clock), sleep=lambda s: None
    )
    assert len(entries) == 2
    _calls, failing = _journal_runner([""], rc=1)
    with pytest.raises(RuntimeError, match=r"journalctl failed for invocation inv1 \(rc=1\): no journal"):
        su.read_start_journal("inv1", failing)


def test_redaction_replaces_every_secret_and_keeps_the_rest() -> None:
    entries = su.parse_journal_json(_lines("key sk-1 and tok-2", "plain"))
    out = su.redact_entries(entries, ["sk-1", "", "tok-2"])
    assert [e.message for e in out] == ["key <redacted> and <redacted>", "plain"]
    assert su.redact_entries(entries, []) == entries
