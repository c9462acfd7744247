"""Host/controller clock offset from one round trip, NTP style.

The controller notes when it sent the module call (``sent``) and when the answer came back
(``received``); the host notes when the module began (``host_started``) and just before it returned
(``host_ended``). With offset = host clock - controller clock, the usual four-timestamp estimate is

    offset = ((host_started - sent) + (host_ended - received)) / 2
    delay  = (received - sent) - (host_ended - host_started)

and the true offset lies within ``offset ± delay / 2`` when the two legs of the trip are the only
unknown (the asymmetry between them is what the uncertainty bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClockOffset:
    """Host clock minus controller clock, seconds; all None when unknown (no controller times, or
    times that contradict each other)."""

    offset_s: float | None
    uncertainty_s: float | None
    round_trip_s: float | None
    reason: str | None = None  # why the offset is unknown

    @property
    def known(self) -> bool:
        return self.offset_s is not None

    def to_controller(self, host_t: float) -> float | None:
        """A host epoch time on the controller's clock, None while the offset is unknown."""
        return None if self.offset_s is None else host_t - self.offset_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset_s": self.offset_s,
            "uncertainty_s": self.uncertainty_s,
            "round_trip_s": self.round_trip_s,
            "reason": self.reason,
        }


def unknown(reason: str) -> ClockOffset:
    return ClockOffset(None, None, None, reason)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def estimate(sent: Any, received: Any, host_started: Any, host_ended: Any) -> ClockOffset:
    """The offset and its uncertainty from one call; unknown (with the reason) when a time is missing or
    not finite, when the answer came before the call or the host ended before it started."""
    t1, t4, t2, t3 = _finite(sent), _finite(received), _finite(host_started), _finite(host_ended)
    if t1 is None or t4 is None:
        return unknown("no controller send/receive times")
    if t2 is None or t3 is None:
        return unknown("no host start/end times")
    if t4 < t1:
        return unknown("controller received before it sent")
    if t3 < t2:
        return unknown("host ended before it started")
    offset = ((t2 - t1) + (t3 - t4)) / 2.0
    # The host's own time can exceed the round trip by the clocks' rounding; the trip is never negative.
    delay = max(0.0, (t4 - t1) - (t3 - t2))
    return ClockOffset(offset, delay / 2.0, t4 - t1)


def from_dict(doc: Any) -> ClockOffset:
    """A recorded offset back (the inverse of :meth:`ClockOffset.to_dict`); unknown for anything else."""
    if not isinstance(doc, dict):
        return unknown("not recorded")
    off = _finite(doc.get("offset_s"))
    if off is None:
        return unknown(str(doc.get("reason") or "not recorded"))
    return ClockOffset(off, _finite(doc.get("uncertainty_s")), _finite(doc.get("round_trip_s")))
