"""hostlib/load_points.py: the ladder and the point label the host and the controller share."""

from __future__ import annotations

import math

import pytest

from sglbench import resume
from sglbench.hostlib import load_points, loadgen


def test_ladder_doubles_and_ends_at_the_cap() -> None:
    assert load_points.concurrency_ladder(1) == [1]
    assert load_points.concurrency_ladder(8) == [1, 2, 4, 8]
    assert load_points.concurrency_ladder(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ValueError, match="cap must be >= 1"):
        load_points.concurrency_ladder(0)


@pytest.mark.parametrize(
    ("concurrency", "rate", "label"),
    [
        (4, None, "c4"),
        (None, 2.5, "r2.5"),
        (8, 2.5, "r2.5-c8"),
        (None, math.inf, "rinf"),
        (None, "inf", "rinf"),
    ],
)
def test_point_label(concurrency: int | None, rate: float | str | None, label: str) -> None:
    assert load_points.point_label(concurrency, rate) == label


def test_host_and_controller_name_points_alike() -> None:
    """The resume plan's keys are the labels the load generator gives the points it measures."""
    load = {"concurrency": [3], "request_rate": [1.5, "inf"], "repeats": 1}
    expected = [p["point"] for p in resume.expected_points("h", load, None)]
    measured = [loadgen.LoadPoint(concurrency=3, request_rate=r).label() for r in (1.5, math.inf)]
    assert expected == measured == ["r1.5-c3", "rinf-c3"]
    ladder = [p["point"] for p in resume.expected_points("h", {}, None)]
    assert ladder == [f"c{c}" for c in loadgen.concurrency_ladder(loadgen.DEFAULT_MAX_CONCURRENCY)]
    with pytest.raises(resume.ResumeError):
        resume.concurrency_ladder(0)
