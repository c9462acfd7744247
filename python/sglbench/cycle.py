"""One config attempt of ``roles/sglang_cycle`` as data: its phase state and its failure, as pure functions.

The play keeps one fact, ``__sglang_cycle_state`` (:data:`STATE_FACT`), and moves it with the
``sglbench_cycle_*`` filters (plugins/filter/sglbench_cycle.py) from phase to phase:

    begin -> plan -> (resume: reuse) -> stop -> start -> health -> probe -> bench -> done
                                            \\-> skipped (the plan said no)   \\-> failed (rescue)
    then, whatever happened: record (failure classified from the journal) -> recorded

One host call may cross phases (the start, the readiness wait and the probe are one module call): it
reports when it entered each (``phases_entered_s``, seconds after it began) and how long it took
(``call_s``), and :func:`passed` moves the state through them when its result arrives, timestamped back
from then; a failed call is taken through the phases it entered before its failure is noted (:func:`fail`).

Every transition is a ``set_fact`` whose result carries the whole state, so the ansible-runner event
of that task is the machine-readable progress event ``sglbench.events`` folds (``step`` names the
transition). The role's ``vars/main.yml`` exposes the parts other files read under their own names
(``__sglang_cycle_phase``, ``__sglang_cycle_t``, ``__sglang_cycle_outcome``, ``__sglang_cycle_failure``).

Failure causes: the phase that failed gives the cause (:data:`PHASE_CAUSE`); a failed health phase
takes the journal's cause (the journal the final stop, ``sglbench_stop``, reads first;
:func:`sglbench.hostlib.sglang_logs.classify_start`); a server that exits while probed or benchmarked is
``server_exited`` unless its journal names a better cause (CUDA OOM at decode, ...). Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

STATE_FACT = "__sglang_cycle_state"
# Phase -> key of the timestamp taken when the attempt enters it (record.json "timings").
PHASE_TIMESTAMP = {
    "stop": "stop_started_at",
    "start": "start_started_at",
    "health": "health_started_at",
    "probe": "moved_on_at",
    "bench": "bench_started_at",
}
# When the attempt had passed every phase (done), and when its record began (after the final stop).
DONE_TIMESTAMP = "done_at"
RECORD_TIMESTAMP = "record_started_at"
# The keys of a host call's result that say when it entered each phase (seconds after it began) and how
# long it took.
ENTERED_KEY = "phases_entered_s"
CALL_KEY = "call_s"
# Phase -> cause of a failure in it; a health failure is classified from the journal instead.
PHASE_CAUSE = {
    "stop": "gpu_busy",
    "start": "start_failed",
    "probe": "probe_failed",
    "bench": "bench_failed",
    "plan": "plan_failed",
}
EXIT_PHASES = ("probe", "bench")
EXITED_STATES = ("failed", "inactive", "deactivating")
# Journal causes that say nothing more than "it exited": the exit itself is the cause then.
VAGUE_CAUSES = (None, "unknown", "readiness_timeout")
STEPS = ("plan", *PHASE_TIMESTAMP, "done", "skipped", "failed", "record", "recorded")
REPORT_KEYS = ("phase", "cause")
POINT_KEYS = ("expected", "measured", "reused", "missing")


class CycleError(ValueError):
    """A transition the attempt cannot make (unknown phase, no state)."""


def begin(instance: str, at: float) -> dict[str, Any]:
    """A new attempt of ``instance``: in the plan phase, failed until a phase says otherwise."""
    return {
        "instance": instance,
        "step": "plan",
        "phase": "plan",
        "outcome": "failed",
        "failure": None,
        "reused": False,
        "time_to_ready_s": None,
        "t": {"started_at": at},
    }


def _state(state: Any) -> dict[str, Any]:
    if not isinstance(state, Mapping) or "instance" not in state:
        raise CycleError(f"not an attempt state (begin the attempt first): {state!r}")
    return dict(state)


def enter(state: Mapping[str, Any], phase: str, at: float) -> dict[str, Any]:
    """The attempt enters ``phase`` at ``at`` (one of :data:`PHASE_TIMESTAMP`)."""
    if phase not in PHASE_TIMESTAMP:
        raise CycleError(f"unknown phase {phase!r}; one of {', '.join(PHASE_TIMESTAMP)}")
    new = _state(state)
    new.update(step=phase, phase=phase, t={**new["t"], PHASE_TIMESTAMP[phase]: at})
    return new


def passed(state: Mapping[str, Any], call: Any, at: float) -> dict[str, Any]:
    """A host call that began in the attempt's current phase went on through further phases. ``call`` is
    its result: ``phases_entered_s`` maps each phase it entered to the seconds after it began, ``call_s``
    is how long it took. Its result arrived at ``at``, so it began at ``at - call_s`` (never before the
    current phase's entry): the round trip (there and back) counts to the phase it began in. The attempt
    is then in the last phase the call entered. A call that entered no further phase leaves the state as
    it is."""
    new = _state(state)
    call = call if isinstance(call, Mapping) else {}
    entered = call.get(ENTERED_KEY)
    if not isinstance(entered, Mapping) or not entered:
        return new
    unknown = [p for p in entered if p not in PHASE_TIMESTAMP]
    if unknown:
        names = ", ".join(map(str, unknown))
        raise CycleError(f"unknown phase(s) {names}; one of {', '.join(PHASE_TIMESTAMP)}")
    began = (new["t"] or {}).get(PHASE_TIMESTAMP.get(new["phase"], ""))
    if began is None:
        raise CycleError(f"the call began in phase {new['phase']!r}, which has no entry timestamp")
    call_s = call.get(CALL_KEY)
    base = float(began)
    if isinstance(call_s, (int, float)) and not isinstance(call_s, bool) and math.isfinite(call_s):
        base = max(base, at - float(call_s))
    order = sorted(entered.items(), key=lambda kv: float(kv[1]))
    stamps = {PHASE_TIMESTAMP[p]: min(at, base + float(off)) for p, off in order}
    last = order[-1][0]
    return {**new, "step": last, "phase": last, "t": {**new["t"], **stamps}}


def done(state: Mapping[str, Any], at: float) -> dict[str, Any]:
    """Every phase passed at ``at``: the attempt is ok."""
    new = _state(state)
    return {**new, "step": "done", "phase": "done", "outcome": "ok", "t": {**new["t"], DONE_TIMESTAMP: at}}


def reuse(state: Mapping[str, Any], complete: bool) -> dict[str, Any]:
    """A complete previous attempt with the same hash is kept: ok without starting anything."""
    new = _state(state)
    return {**new, "outcome": "ok", "reused": True} if complete else new


def skip(state: Mapping[str, Any], reason: str | None) -> dict[str, Any]:
    """The plan kept the server from starting (``reason``); without a reason nothing changes."""
    new = _state(state)
    if reason is None:
        return new
    failure = {"phase": "plan", "cause": "planned_failure", "message": reason, "lines": []}
    return {**new, "step": "skipped", "outcome": "skipped", "failure": failure}


def decide(state: Mapping[str, Any], complete: bool, reason: str | None, at: float) -> dict[str, Any]:
    """What the plan and the resume check decided, in one step: a complete earlier attempt with the same
    hash is kept (:func:`reuse`); else a plan that keeps the server from starting skips the attempt
    (:func:`skip`, ``reason``); else the attempt enters the stop phase at ``at``, its server's first."""
    if complete:
        return reuse(state, True)
    if reason is not None:
        return skip(state, reason)
    return enter(state, "stop", at)


def fail(state: Mapping[str, Any], failed_result: Any, failed_task: Any, at: float) -> dict[str, Any]:
    """The rescue: the failed task (``ansible_failed_task``, ``ansible_failed_result``) of the current
    phase, its cause from :data:`PHASE_CAUSE` (``unknown`` for a phase that has none). A failed host call
    that crossed phases failed in the last one it entered (:func:`passed`)."""
    result = failed_result if isinstance(failed_result, Mapping) else {}
    task = failed_task if isinstance(failed_task, Mapping) else {}
    new = passed(state, result, at)
    phase = new["phase"]
    failure = {
        "phase": phase,
        "cause": PHASE_CAUSE.get(phase, "unknown"),
        "message": result.get("msg", ""),
        "task": task.get("name", ""),
        "lines": [],
    }
    return {**new, "step": "failed", "failure": failure, "t": {**new["t"], "failure_reported_at": at}}


def _field(mapping: Mapping[str, Any], key: str) -> str:
    """A unit-state field as the message shows it: ``?`` when absent."""
    return str(mapping[key]) if key in mapping else "?"


def exit_message(phase: str, unit_state: Mapping[str, Any], client_message: Any) -> str:
    """What the failure says when the server exited under the client."""
    return (
        f"the server exited during the {phase} phase ({_field(unit_state, 'active_state')}/"
        f"{_field(unit_state, 'sub_state')}, result {_field(unit_state, 'result')}, exit status "
        f"{_field(unit_state, 'exec_main_status')}); the client then saw: {client_message}"
    )


def server_exited(journal: Mapping[str, Any]) -> bool:
    """The journal's unit state shows a server that is no longer running."""
    if "unit_state" not in journal:
        return False
    state = journal.get("unit_state") or {}
    return isinstance(state, Mapping) and state.get("active_state", "") in EXITED_STATES


def classify_failure(
    failure: Mapping[str, Any] | None, journal: Mapping[str, Any] | None, wait: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The failure with what the journal (``sglbench_stop``'s ``journal``) and the readiness wait
    (``sglang_service_wait``) add: a health failure takes the journal's cause; an exit during the probe
    or the benchmark becomes ``server_exited`` or the journal's cause. Other failures are unchanged."""
    if failure is None:
        return None
    out = dict(failure)
    journal = journal or {}
    wait = wait or {}
    if out.get("phase") == "health":
        out.update(
            cause=journal.get("cause") or "unknown",
            lines=journal.get("cause_lines", []),
            wait_outcome=wait.get("outcome"),
            unit_state=wait.get("unit_state"),
        )
    elif out.get("phase") in EXIT_PHASES and server_exited(journal):
        unit_state = journal.get("unit_state") or {}
        cause = journal.get("cause") or None
        out.update(
            cause=cause if cause not in VAGUE_CAUSES else "server_exited",
            lines=journal.get("cause_lines", []),
            unit_state=unit_state,
            message=exit_message(out["phase"], unit_state, out.get("message")),
        )
    return out


def classify(
    state: Mapping[str, Any], journal: Mapping[str, Any] | None, wait: Mapping[str, Any] | None, at: float
) -> dict[str, Any]:
    """The attempt's record begins at ``at``: its failure (if any) classified (:func:`classify_failure`)."""
    new = _state(state)
    failure = classify_failure(new["failure"], journal, wait)
    return {**new, "step": "record", "failure": failure, "t": {**new["t"], RECORD_TIMESTAMP: at}}


def recorded(state: Mapping[str, Any], wait: Mapping[str, Any] | None) -> dict[str, Any]:
    """The record is written: the attempt's last event, with its time to ready."""
    new = _state(state)
    return {**new, "step": "recorded", "time_to_ready_s": (wait or {}).get("time_to_ready_s")}


def summary(state: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the host's outcome list (``sglbench_failure_summary`` reads it)."""
    failure = state.get("failure") or {}
    return {
        "instance": state["instance"],
        "outcome": state["outcome"],
        "phase": failure.get("phase"),
        "cause": failure.get("cause"),
    }


def _subset(mapping: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in (mapping or {}).items() if k in keys} if isinstance(mapping, Mapping) else {}


def report_lines(
    state: Mapping[str, Any], probe_info: Mapping[str, Any] | None, benchmark: Mapping[str, Any] | None
) -> list[str]:
    """The play's human report of the attempt (outcome, failure, time to ready, KV tokens, points)."""
    points: Any = (
        "reused the completed attempt (same hash)"
        if state.get("reused")
        else _subset((benchmark or {}).get("resume"), POINT_KEYS)
    )
    return [
        f"{state['instance']}: {state['outcome']}",
        f"failure: {_subset(state.get('failure'), REPORT_KEYS)}",
        f"time to ready (s): {state.get('time_to_ready_s')}",
        f"KV tokens: {(probe_info or {}).get('max_total_num_tokens')}",
        f"points: {points}",
    ]
