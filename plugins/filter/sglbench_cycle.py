"""Controller-side Jinja filters that move one config attempt of ``roles/sglang_cycle`` from phase to phase.

Each filter takes the attempt state (the ``__sglang_cycle_state`` fact) and returns the next one; the
pure logic and its documentation live in :mod:`sglbench.cycle` (standard library only), tested in
``tests/python/test_cycle.py``; this file only exposes it and supplies the clock.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from ansible.errors import AnsibleFilterError  # noqa: E402

from sglbench import cycle  # noqa: E402


def _guard(name: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except cycle.CycleError as err:
        raise AnsibleFilterError(f"{name}: {err}") from err


def sglbench_cycle_begin(instance: str) -> dict[str, Any]:
    """``{{ sglang_cycle_instance.name | sglbench_cycle_begin }}``: a new attempt, in the plan phase."""
    return cycle.begin(str(instance), time.time())


def sglbench_cycle_enter(state: Any, phase: str) -> dict[str, Any]:
    """``{{ __sglang_cycle_state | sglbench_cycle_enter('stop') }}``: enter a phase, now."""
    return _guard("sglbench_cycle_enter", cycle.enter, state, phase, time.time())


def sglbench_cycle_passed(state: Any, result: Any) -> dict[str, Any]:
    """``{{ __sglang_cycle_state | sglbench_cycle_passed(result) }}``: the phases one host call went
    through (its ``phases_entered_s`` and ``call_s``), timestamped back from now, when its result arrived."""
    return _guard("sglbench_cycle_passed", cycle.passed, state, result, time.time())


def sglbench_cycle_done(state: Any) -> dict[str, Any]:
    return _guard("sglbench_cycle_done", cycle.done, state, time.time())


def sglbench_cycle_decide(state: Any, complete: Any, reason: Any) -> dict[str, Any]:
    """``{{ __sglang_cycle_state | sglbench_cycle_decide(complete, skip_reason) }}``: reused, skipped by the
    plan, or into the stop phase, now."""
    why = None if reason is None else str(reason)
    return _guard("sglbench_cycle_decide", cycle.decide, state, bool(complete), why, time.time())


def sglbench_cycle_fail(state: Any, failed_result: Any, failed_task: Any) -> dict[str, Any]:
    """``{{ __sglang_cycle_state | sglbench_cycle_fail(ansible_failed_result, ansible_failed_task) }}``."""
    return _guard("sglbench_cycle_fail", cycle.fail, state, failed_result, failed_task, time.time())


def sglbench_cycle_classify(state: Any, journal: Any, wait: Any) -> dict[str, Any]:
    return _guard("sglbench_cycle_classify", cycle.classify, state, journal, wait, time.time())


def sglbench_cycle_recorded(state: Any, wait: Any) -> dict[str, Any]:
    return _guard("sglbench_cycle_recorded", cycle.recorded, state, wait)


def sglbench_cycle_summary(state: Any) -> dict[str, Any]:
    return _guard("sglbench_cycle_summary", cycle.summary, state)


def sglbench_cycle_report(state: Any, probe_info: Any, benchmark: Any) -> list[str]:
    return _guard("sglbench_cycle_report", cycle.report_lines, state, probe_info, benchmark)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglbench_cycle_begin": sglbench_cycle_begin,
            "sglbench_cycle_enter": sglbench_cycle_enter,
            "sglbench_cycle_passed": sglbench_cycle_passed,
            "sglbench_cycle_done": sglbench_cycle_done,
            "sglbench_cycle_decide": sglbench_cycle_decide,
            "sglbench_cycle_fail": sglbench_cycle_fail,
            "sglbench_cycle_classify": sglbench_cycle_classify,
            "sglbench_cycle_recorded": sglbench_cycle_recorded,
            "sglbench_cycle_summary": sglbench_cycle_summary,
            "sglbench_cycle_report": sglbench_cycle_report,
        }
