from __future__ import annotations

import pytest

from sglbench.telemetry import throttle


def test_bits_follow_nvml() -> None:
    assert throttle.names(0x4) == ["sw_power_cap"]
    assert throttle.names(0x40 | 0x1) == ["gpu_idle", "hw_thermal_slowdown"]
    assert throttle.names(0x1000) == ["0x1000"]
    for bit in (0x4, 0x8, 0x20, 0x40, 0x80):
        assert throttle.throttled(bit)
    for bit in (0x0, 0x1, 0x2, 0x10, 0x100):
        assert not throttle.throttled(bit)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4, 4),
        ("0x0000000000000020", 0x20),
        (64.0, 64),
        (None, None),
        (True, None),
        (-1, None),
        ("[N/A]", None),
    ],
)
def test_mask_reads_ints_and_hex(value: object, expected: int | None) -> None:
    assert throttle.mask(value) == expected


def test_share_is_the_union_over_gpus() -> None:
    g0 = [(0.0, 0.0), (2.0, 0x4), (4.0, 0.0)]  # power-capped 2 .. 4
    g1 = [(0.0, 0.0), (3.0, 0x40), (6.0, 0.0)]  # thermal 3 .. 6
    g2 = [(0.0, 0x1), (10.0, 0x1)]  # idle the whole time: not throttling
    share = throttle.throttled_share({0: g0, 1: g1, 2: g2}, 0.0, 10.0)
    assert share == pytest.approx(0.4)
    assert throttle.reasons_in({0: g0, 1: g1}, 0.0, 10.0) == ["hw_thermal_slowdown", "sw_power_cap"]
    assert throttle.throttled_share({0: g0}, 5.0, 10.0) == 0.0
    assert throttle.throttled_share({}, 0.0, 10.0) is None
    # A mask set before the window holds into it until the next sample.
    assert throttle.throttled_share({0: [(-1.0, 0x20), (1.0, 0.0)]}, 0.0, 4.0) == pytest.approx(0.25)
