"""Clock-event reasons (``clocks_event_reasons.active`` in nvidia-smi, a bit mask) and which of them
mean the GPU was slowed by heat or power.

The bits are NVML's ``nvmlClocksEventReason*`` / ``nvmlClocksThrottleReason*`` values (NVML API
reference, "NvmlClocksEventReasons"; DCGM's ``DCGM_CLOCKS_EVENT_REASON_*`` are the same map). Idle,
application-clock, sync-boost and display-clock events are not throttling: a point is flagged only
for the power and thermal ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sglbench.telemetry.series import Series

REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
POWER = 0x4 | 0x80  # software power cap, hardware power brake
THERMAL = 0x20 | 0x40  # software and hardware thermal slowdown
# HW slowdown is raised for heat, an external power brake or too high a power draw (NVML): either kind.
THROTTLE = POWER | THERMAL | 0x8
THROTTLE_NAMES = frozenset(name for bit, name in REASONS.items() if bit & THROTTLE)


def mask(value: Any) -> int | None:
    """A sample's mask as an int (the contract sends an int; a hex string is read too); None if absent."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value == value and value >= 0 and value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def throttled(value: int) -> bool:
    return bool(value & THROTTLE)


def names(value: int) -> list[str]:
    """The reasons set in a mask, known bits by name, unknown ones as hex."""
    out = [name for bit, name in REASONS.items() if value & bit]
    rest = value & ~sum(REASONS)
    if rest:
        out.append(hex(rest))
    return out


def throttled_share(masks: Mapping[int, Series], start: float, end: float) -> float | None:
    """Share of ``[start, end]`` during which any GPU's mask (held from each sample to the next, the
    first sample's also before it) had a throttling bit set; None without masks or window."""
    masks = {g: s for g, s in masks.items() if s}
    if not masks or not (end > start):
        return None
    events = sorted((t, g, throttled(int(m))) for g, s in masks.items() for t, m in s)
    state = {g: throttled(int(s[0][1])) for g, s in masks.items()}
    on = sum(state.values())
    inside, last = 0.0, start
    for t, g, value in events:
        if t > last:
            if on:
                inside += min(t, end) - last
            last = min(t, end)
        if t >= end:
            break
        on += int(value) - int(state[g])
        state[g] = value
    if last < end and on:
        inside += end - last
    return inside / (end - start)


def reasons_in(masks: Mapping[int, Series], start: float, end: float) -> list[str]:
    """The throttling reasons any GPU reported by a sample inside ``[start, end]``, sorted."""
    seen: set[str] = set()
    for s in masks.values():
        for t, m in s:
            if start <= t <= end and throttled(int(m)):
                seen.update(n for n in names(int(m)) if n in THROTTLE_NAMES)
    return sorted(seen)
