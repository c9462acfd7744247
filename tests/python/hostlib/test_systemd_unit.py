"""hostlib/systemd_unit.py: systemctl show parsing, unit state decisions, journal JSON."""

from __future__ import annotations

import json

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
