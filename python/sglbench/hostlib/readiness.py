"""Waiting for an SGLang server to become ready while watching its systemd unit (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.readiness``. :func:`wait_ready` is pure:
the unit check, the health probe, the clock and the sleep are injected, so the decision logic is
tested without timing. One poll = one unit check (a ``systemctl show``) + one health probe; the
loop returns as soon as the health endpoint answers 200 or the unit is no longer running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

READY = "ready"
UNIT_ENDED = "unit_ended"
TIMEOUT = "timeout"


@dataclass
class WaitResult:
    outcome: str  # READY | UNIT_ENDED | TIMEOUT
    elapsed_s: float
    polls: int
    last_status: int | None  # last HTTP status seen (None: nothing answered)
    unit: Any = None  # the last unit state snapshot (UnitState or a test double)
    statuses: dict[str, int] = field(default_factory=dict)  # HTTP status -> count

    @property
    def ready(self) -> bool:
        return self.outcome == READY


def wait_ready(
    check_unit: Callable[[], Any],
    probe: Callable[[float], int | None],
    timeout_s: float,
    interval_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    probe_timeout_s: float = 2.0,
) -> WaitResult:
    """Poll until the health probe answers 200, the unit ends, or ``timeout_s`` passes.

    ``check_unit()`` returns an object with a boolean ``ended``; ``probe(timeout)`` returns the HTTP
    status or None. The unit is checked before every probe and once more after a failed probe, so a
    dead server is noticed within one interval, never after the deadline.
    """
    start = clock()
    deadline = start + timeout_s
    polls = 0
    last_status: int | None = None
    statuses: dict[str, int] = {}
    unit = None
    while True:
        unit = check_unit()
        if unit.ended:
            return WaitResult(UNIT_ENDED, clock() - start, polls, last_status, unit, statuses)
        remaining = deadline - clock()
        if remaining <= 0:
            return WaitResult(TIMEOUT, clock() - start, polls, last_status, unit, statuses)
        polls += 1
        last_status = probe(max(0.05, min(probe_timeout_s, remaining)))
        key = str(last_status)
        statuses[key] = statuses.get(key, 0) + 1
        if last_status == 200:
            return WaitResult(READY, clock() - start, polls, last_status, unit, statuses)
        remaining = deadline - clock()
        if remaining <= 0:
            unit = check_unit()
            outcome = UNIT_ENDED if unit.ended else TIMEOUT
            return WaitResult(outcome, clock() - start, polls, last_status, unit, statuses)
        sleep(min(interval_s, remaining))
