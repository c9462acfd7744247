"""plugins/filter/sglbench_cycle.py: the attempt state as the playbook moves it (clock supplied)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "sglbench_cycle_filter", REPO / "plugins/filter/sglbench_cycle.py"
)
assert _spec is not None and _spec.loader is not None
flt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flt)
F = flt.FilterModule().filters()


def test_every_transition_is_registered() -> None:
    names = ("begin", "enter", "passed", "done", "decide", "fail", "classify", "recorded")
    names += ("summary", "report")
    assert set(F) == {f"sglbench_cycle_{n}" for n in names}


def test_a_failed_benchmark_through_the_filters() -> None:
    before = time.time()
    state = F["sglbench_cycle_begin"]("x-tp1")
    for phase in ("stop", "start"):
        state = F["sglbench_cycle_enter"](state, phase)
    state = F["sglbench_cycle_passed"](state, {"phases_entered_s": {"health": 0.01, "probe": 0.02}})
    state = F["sglbench_cycle_enter"](state, "bench")
    state = F["sglbench_cycle_fail"](state, {"msg": "refused"}, {"name": "bench | Measure"})
    journal = {"cause": None, "cause_lines": [], "unit_state": {"active_state": "failed"}}
    state = F["sglbench_cycle_classify"](state, journal, {})
    state = F["sglbench_cycle_recorded"](state, {"time_to_ready_s": 1.5})
    t = state["t"]
    assert (
        before
        <= t["started_at"]
        <= t["stop_started_at"]
        <= t["start_started_at"]
        <= t["bench_started_at"]
        <= t["failure_reported_at"]
        <= t["record_started_at"]
    )
    # from the call's offsets, never after now (when its result arrived)
    assert t["start_started_at"] <= t["health_started_at"] <= t["moved_on_at"] <= t["bench_started_at"]
    assert F["sglbench_cycle_summary"](state) == {
        "instance": "x-tp1",
        "outcome": "failed",
        "phase": "bench",
        "cause": "server_exited",
    }
    assert F["sglbench_cycle_report"](state, None, None)[0] == "x-tp1: failed"


def test_a_skip_and_a_reuse() -> None:
    state = F["sglbench_cycle_begin"]("x-tp1")
    assert F["sglbench_cycle_decide"](state, 0, "no KV room")["failure"]["cause"] == "planned_failure"
    assert F["sglbench_cycle_decide"](state, 1, None)["outcome"] == "ok"
    assert F["sglbench_cycle_decide"](state, 0, None)["phase"] == "stop"
    done = F["sglbench_cycle_done"](state)
    assert done["outcome"] == "ok" and done["t"]["done_at"] >= state["t"]["started_at"]


def test_errors_name_the_filter() -> None:
    with pytest.raises(AnsibleFilterError, match="sglbench_cycle_enter: unknown phase 'warmup'"):
        F["sglbench_cycle_enter"](F["sglbench_cycle_begin"]("x"), "warmup")
    with pytest.raises(AnsibleFilterError, match="sglbench_cycle_done: not an attempt state"):
        F["sglbench_cycle_done"]({})
    with pytest.raises(AnsibleFilterError, match="sglbench_cycle_passed: unknown phase"):
        started = F["sglbench_cycle_enter"](F["sglbench_cycle_begin"]("x"), "start")
        F["sglbench_cycle_passed"](started, {"phases_entered_s": {"up": 1}})
