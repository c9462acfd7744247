"""Attempt state and failure classification of one config attempt, on recorded journals."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sglbench import cycle
from sglbench.hostlib import sglang_logs, systemd_unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ZERO_REQUESTS_LOG = FIXTURES / "startup_logs" / "mission-qwen3.6-27b-dflash" / "server.log"
STARTUP_ONLY_LOG = FIXTURES / "startup_logs" / "qwq-32b-tp4-l4" / "server.log"
DECODE_OOM_LOG = FIXTURES / "journals" / "decode_oom_exit.log"
KILLED_LOG = FIXTURES / "journals" / "killed_mid_bench.log"

KILLED_STATE = {
    "active_state": "failed",
    "sub_state": "failed",
    "result": "signal",
    "exec_main_code": 2,
    "exec_main_status": 9,
}
EXITED_STATE = {**KILLED_STATE, "result": "exit-code", "exec_main_code": 1, "exec_main_status": 1}
RUNNING_STATE = {"active_state": "active", "sub_state": "running", "result": "success"}


def journal_result(path: Path, wait_outcome: str | None, unit_state: dict[str, Any]) -> dict[str, Any]:
    """The journal ``sglbench_stop`` returns for this journal text and unit state (its classification)."""
    lines = path.read_text().splitlines()
    entries = [systemd_unit.JournalEntry(1000 * i, "sglang", "9", line) for i, line in enumerate(lines)]
    out = sglang_logs.start_journal(entries, wait_outcome, str(unit_state.get("result", "")))
    return {**out, "unit_state": unit_state}


def at_phase(*phases: str) -> dict[str, Any]:
    state = cycle.begin("x-tp1", 100.0)
    for i, phase in enumerate(phases, start=1):
        state = cycle.enter(state, phase, 100.0 + i)
    return state


def failed_in(phase_path: tuple[str, ...], msg: Any = "boom", task: str = "some task") -> dict[str, Any]:
    return cycle.fail(at_phase(*phase_path), {"msg": msg, "failed": True}, {"name": task}, 200.0)


UP_TO = {
    "stop": ("stop",),
    "start": ("stop", "start"),
    "health": ("stop", "start", "health"),
    "probe": ("stop", "start", "health", "probe"),
    "bench": ("stop", "start", "health", "probe", "bench"),
}


# -- state -------------------------------------------------------------------------------------------
def test_begin_is_a_failed_attempt_in_the_plan_phase() -> None:
    state = cycle.begin("x-tp1", 100.0)
    assert (state["instance"], state["phase"], state["step"], state["outcome"]) == (
        "x-tp1",
        "plan",
        "plan",
        "failed",
    )
    assert state["failure"] is None and state["t"] == {"started_at": 100.0}


def test_each_phase_takes_its_timestamp_and_keeps_the_earlier_ones() -> None:
    state = at_phase("stop", "start", "health", "probe", "bench")
    assert state["t"] == {
        "started_at": 100.0,
        "stop_started_at": 101.0,
        "start_started_at": 102.0,
        "health_started_at": 103.0,
        "moved_on_at": 104.0,
        "bench_started_at": 105.0,
    }
    assert state["phase"] == state["step"] == "bench"


def test_transitions_do_not_modify_their_input() -> None:
    before = cycle.begin("x-tp1", 100.0)
    after = cycle.enter(before, "stop", 101.0)
    assert before["phase"] == "plan" and "stop_started_at" not in before["t"] and after["phase"] == "stop"


def test_unknown_phase_and_missing_state_are_refused() -> None:
    with pytest.raises(cycle.CycleError, match="unknown phase 'warmup'"):
        cycle.enter(cycle.begin("x", 1.0), "warmup", 2.0)
    with pytest.raises(cycle.CycleError, match="begin the attempt first"):
        cycle.done(None, 2.0)  # type: ignore[arg-type]


def test_done_is_ok_and_stamps_the_end_of_the_phases() -> None:
    state = cycle.done(at_phase("stop", "start", "health", "probe", "bench"), 110.5)
    assert (state["phase"], state["outcome"], state["failure"]) == ("done", "ok", None)
    assert state["t"]["done_at"] == 110.5 and state["t"]["bench_started_at"] == 105.0


# -- one host call through several phases ------------------------------------------------------------
def test_a_call_through_health_and_probe_is_stamped_back_from_when_its_result_arrived() -> None:
    started = at_phase("stop", "start")  # the start phase was entered at 102.0
    call = {"phases_entered_s": {"probe": 6.25, "health": 0.5}, "call_s": 7.0}
    state = cycle.passed(started, call, 110.0)  # the call began at 103.0: 1 s on the way there
    assert (state["phase"], state["step"]) == ("probe", "probe")
    assert state["t"]["health_started_at"] == 103.5 and state["t"]["moved_on_at"] == 109.25
    assert state["t"]["start_started_at"] == 102.0 and "health_started_at" not in started["t"]
    assert cycle.enter(state, "bench", 110.5)["t"]["bench_started_at"] == 110.5


def test_a_call_is_never_placed_before_its_phase_began_nor_after_its_result() -> None:
    started = at_phase("stop", "start")  # 102.0
    longer = cycle.passed(started, {"phases_entered_s": {"health": 0.5}, "call_s": 50.0}, 110.0)
    assert longer["t"]["health_started_at"] == 102.5  # from the phase's entry, not 60.0
    unknown = cycle.passed(started, {"phases_entered_s": {"health": 0.5}}, 110.0)
    assert unknown["t"]["health_started_at"] == 102.5
    late = cycle.passed(started, {"phases_entered_s": {"health": 30.0}, "call_s": 1.0}, 110.0)
    assert late["t"]["health_started_at"] == 110.0


@pytest.mark.parametrize("call", [{}, None, "not a mapping", {"phases_entered_s": {}, "call_s": 1.0}])
def test_a_call_that_entered_no_further_phase_changes_nothing(call: Any) -> None:
    started = at_phase("stop", "start")
    assert cycle.passed(started, call, 110.0) == started


def test_a_call_through_an_unknown_phase_or_from_one_without_a_timestamp_is_refused() -> None:
    with pytest.raises(cycle.CycleError, match=r"unknown phase.*warmup"):
        cycle.passed(at_phase("stop", "start"), {"phases_entered_s": {"warmup": 1.0}}, 110.0)
    with pytest.raises(cycle.CycleError, match="began in phase 'plan'"):
        cycle.passed(cycle.begin("x", 1.0), {"phases_entered_s": {"health": 1.0}}, 110.0)


@pytest.mark.parametrize(
    ("entered", "phase", "cause"),
    [
        ({}, "start", "start_failed"),  # systemctl start itself failed
        ({"health": 0.1}, "health", "unknown"),  # the readiness wait failed: the journal tells why
        ({"health": 0.1, "probe": 7.0}, "probe", "probe_failed"),
    ],
)
def test_a_failed_call_through_several_phases_failed_in_the_last_it_entered(
    entered: dict[str, float], phase: str, cause: str
) -> None:
    result = {"msg": "it broke", "failed": True, "phases_entered_s": entered, "call_s": 8.0}
    state = cycle.fail(at_phase("stop", "start"), result, {"name": "start | it"}, 200.0)
    assert state["failure"] == failed_in(UP_TO[phase], msg="it broke", task="start | it")["failure"]
    assert (state["phase"], state["failure"]["cause"]) == (phase, cause)
    assert state["t"]["failure_reported_at"] == 200.0
    if "probe" in entered:
        assert state["t"]["moved_on_at"] == 199.0  # began at 192.0, probed 7 s later


def test_skip_by_the_plan_is_a_planned_failure_and_no_reason_changes_nothing() -> None:
    state = cycle.begin("x-tp1", 100.0)
    assert cycle.skip(state, None) == state
    skipped = cycle.skip(state, "predicted 0 request slots")
    assert skipped["outcome"] == "skipped" and skipped["phase"] == "plan"
    assert skipped["failure"] == {
        "phase": "plan",
        "cause": "planned_failure",
        "message": "predicted 0 request slots",
        "lines": [],
    }


def test_reuse_of_a_complete_attempt_is_ok() -> None:
    state = cycle.begin("x-tp1", 100.0)
    assert cycle.reuse(state, False) == state
    reused = cycle.reuse(state, True)
    assert reused["outcome"] == "ok" and reused["reused"] is True and reused["phase"] == "plan"


def test_decide_reuses_before_it_skips_and_otherwise_enters_the_stop_phase() -> None:
    state = cycle.begin("x-tp1", 100.0)
    # a complete earlier attempt wins over the plan's verdict: nothing starts, and it is not a failure
    reused = cycle.decide(state, True, "predicted 0 request slots", 101.0)
    assert reused == cycle.reuse(state, True) and "stop_started_at" not in reused["t"]
    skipped = cycle.decide(state, False, "predicted 0 request slots", 101.0)
    assert skipped == cycle.skip(state, "predicted 0 request slots")
    going = cycle.decide(state, False, None, 101.0)
    assert going == cycle.enter(state, "stop", 101.0) and going["t"]["stop_started_at"] == 101.0


# -- failure of a phase ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phase", "cause"),
    [
        ("stop", "gpu_busy"),
        ("start", "start_failed"),
        ("health", "unknown"),
        ("probe", "probe_failed"),
        ("bench", "bench_failed"),
    ],
)
def test_the_failed_phase_gives_the_cause(phase: str, cause: str) -> None:
    state = failed_in(UP_TO[phase], msg="it broke", task="svc | do it")
    assert state["failure"] == {
        "phase": phase,
        "cause": cause,
        "message": "it broke",
        "task": "svc | do it",
        "lines": [],
    }
    assert state["outcome"] == "failed" and state["step"] == "failed"
    assert state["t"]["failure_reported_at"] == 200.0


def test_a_failure_in_the_plan_or_resume_is_plan_failed_and_a_result_without_msg_has_no_message() -> None:
    state = cycle.fail(cycle.begin("x", 1.0), {"failed": True}, {}, 2.0)
    assert state["failure"] == {
        "phase": "plan",
        "cause": "plan_failed",
        "message": "",
        "task": "",
        "lines": [],
    }


# -- classification from the journal -----------------------------------------------------------------
def test_health_failure_takes_the_cause_of_the_recorded_journal() -> None:
    wait = {"outcome": "unit_ended", "unit_state": EXITED_STATE}
    journal = journal_result(ZERO_REQUESTS_LOG, "unit_ended", EXITED_STATE)
    failure = cycle.classify_failure(failed_in(UP_TO["health"])["failure"], journal, wait)
    assert failure is not None
    assert failure["cause"] == "zero_requests"
    assert failure["lines"] == ["AssertionError: max_running_request is zero"]
    assert (failure["wait_outcome"], failure["unit_state"]) == ("unit_ended", EXITED_STATE)
    assert (failure["phase"], failure["message"]) == ("health", "boom")  # the rest is kept


def test_health_timeout_on_a_log_that_never_became_ready_is_a_readiness_timeout() -> None:
    journal = journal_result(STARTUP_ONLY_LOG, "timeout", RUNNING_STATE)
    failure = cycle.classify_failure(
        failed_in(UP_TO["health"])["failure"], journal, {"outcome": "timeout", "unit_state": RUNNING_STATE}
    )
    assert failure is not None and failure["cause"] == "readiness_timeout"
    assert failure["lines"] == STARTUP_ONLY_LOG.read_text().strip().splitlines()[-3:]


def test_health_failure_without_a_journal_is_unknown() -> None:
    failure = cycle.classify_failure(failed_in(UP_TO["health"])["failure"], {"skipped": True}, {})
    assert failure is not None
    assert (failure["cause"], failure["lines"], failure["wait_outcome"], failure["unit_state"]) == (
        "unknown",
        [],
        None,
        None,
    )


def test_server_killed_mid_benchmark_is_server_exited_with_systemds_status() -> None:
    journal = journal_result(KILLED_LOG, "ready", KILLED_STATE)
    assert journal["cause"] == "unknown"  # the server's own log says nothing: it was killed
    bench_failure = failed_in(UP_TO["bench"], msg="point c4: connection refused")["failure"]
    failure = cycle.classify_failure(bench_failure, journal, {"outcome": "ready"})
    assert failure is not None
    assert failure["cause"] == "server_exited"
    assert failure["unit_state"] == KILLED_STATE
    assert failure["message"] == (
        "the server exited during the bench phase (failed/failed, result signal, exit status 9); "
        "the client then saw: point c4: connection refused"
    )
    assert failure["phase"] == "bench" and failure["task"] == "some task"


def test_server_that_dies_of_cuda_oom_while_probed_takes_the_journals_cause() -> None:
    journal = journal_result(DECODE_OOM_LOG, "ready", EXITED_STATE)
    failure = cycle.classify_failure(failed_in(UP_TO["probe"], msg="refused")["failure"], journal, {})
    assert failure is not None and failure["cause"] == "cuda_oom"
    assert any("CUDA out of memory" in line for line in failure["lines"])
    assert failure["message"].startswith(
        "the server exited during the probe phase (failed/failed, result exit-code"
    )


def test_a_missing_unit_field_shows_as_a_question_mark() -> None:
    journal = {"cause": None, "unit_state": {"active_state": "inactive"}}
    failure = cycle.classify_failure(failed_in(UP_TO["bench"], msg="cut")["failure"], journal, {})
    assert failure is not None and failure["message"] == (
        "the server exited during the bench phase (inactive/?, result ?, exit status ?); "
        "the client then saw: cut"
    )


@pytest.mark.parametrize(
    "journal",
    [
        {"cause": None, "unit_state": RUNNING_STATE},  # still serving: the client's own failure
        {"cause": None, "unit_state": None},
        {"failed": True, "msg": "journalctl failed"},  # no unit state at all
    ],
)
def test_a_bench_failure_of_a_server_that_did_not_exit_keeps_its_cause(journal: dict[str, Any]) -> None:
    failure = failed_in(UP_TO["bench"])["failure"]
    assert cycle.classify_failure(failure, journal, {}) == failure


def test_other_phases_and_no_failure_are_not_classified() -> None:
    journal = journal_result(KILLED_LOG, "ready", KILLED_STATE)
    stop_failure = failed_in(UP_TO["stop"])["failure"]
    assert cycle.classify_failure(stop_failure, journal, {}) == stop_failure
    assert cycle.classify_failure(None, journal, {}) is None
    state = cycle.classify(cycle.done(at_phase("stop"), 103.0), journal, {}, 104.0)
    assert state["failure"] is None and state["step"] == "record" and state["outcome"] == "ok"
    assert state["t"]["record_started_at"] == 104.0


# -- record and report -------------------------------------------------------------------------------
def test_recorded_keeps_the_time_to_ready_and_summary_names_phase_and_cause() -> None:
    failed = cycle.classify(
        failed_in(UP_TO["health"]), journal_result(ZERO_REQUESTS_LOG, "unit_ended", EXITED_STATE), {}, 300.0
    )
    state = cycle.recorded(failed, {"time_to_ready_s": 5.27})
    assert state["step"] == "recorded" and state["time_to_ready_s"] == 5.27
    assert cycle.summary(state) == {
        "instance": "x-tp1",
        "outcome": "failed",
        "phase": "health",
        "cause": "zero_requests",
    }
    ok = cycle.done(at_phase("stop"), 103.0)
    assert cycle.summary(ok) == {"instance": "x-tp1", "outcome": "ok", "phase": None, "cause": None}


def test_report_lines() -> None:
    state = cycle.recorded(
        cycle.classify(failed_in(UP_TO["health"]), {"cause": "zero_requests"}, {}, 300.0), {}
    )
    assert cycle.report_lines(state, None, None) == [
        "x-tp1: failed",
        "failure: {'phase': 'health', 'cause': 'zero_requests'}",
        "time to ready (s): None",
        "KV tokens: None",
        "points: {}",
    ]
    ok = cycle.recorded(cycle.done(at_phase("stop"), 103.0), {"time_to_ready_s": 5.3})
    resume = {"expected": 4, "measured": 3, "reused": 1, "missing": 0, "moved": []}
    lines = cycle.report_lines(ok, {"max_total_num_tokens": 452325}, {"resume": resume})
    assert lines[1:] == [
        "failure: {}",
        "time to ready (s): 5.3",
        "KV tokens: 452325",
        "points: {'expected': 4, 'measured': 3, 'reused': 1, 'missing': 0}",
    ]
    reused = cycle.recorded(cycle.reuse(cycle.begin("y-tp1", 1.0), True), {})
    assert cycle.report_lines(reused, None, None)[-1] == "points: reused the completed attempt (same hash)"


# -- a recorded sim-host attempt ---------------------------------------------------------------------
SIM_EXIT = FIXTURES / "journals" / "simhost_server_exit_mid_bench"
JOURNAL_PREFIX = re.compile(r"^\S+ [^\s\[:]+(?:\[\d+\])?: ")


def test_the_recorded_exit_mid_benchmark_classifies_to_its_recorded_failure() -> None:
    recorded = json.loads((SIM_EXIT / "record_failure.json").read_text())["failure"]
    lines = (SIM_EXIT / "journal.log").read_text().splitlines()
    text = "".join(JOURNAL_PREFIX.sub("", line, count=1) + "\n" for line in lines)
    unit_state = recorded["unit_state"]
    verdict = sglang_logs.classify_start(text, "ready", unit_state["result"])
    journal = {"cause": verdict["cause"], "cause_lines": verdict["lines"], "unit_state": unit_state}
    client_saw = recorded["message"].split("; the client then saw: ", 1)[1]
    state = cycle.fail(at_phase(*UP_TO["bench"]), {"msg": client_saw}, {"name": recorded["task"]}, 200.0)
    assert state["failure"]["cause"] == "bench_failed"
    assert cycle.classify(state, journal, {"outcome": "ready"}, 300.0)["failure"] == recorded
