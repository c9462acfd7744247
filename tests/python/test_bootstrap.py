"""sglbench.bootstrap: the interval of a per-repeat figure's mean (energy per token)."""

from __future__ import annotations

import math

import pytest

from sglbench import bootstrap


def test_two_repeats_give_the_exact_resampling_range() -> None:
    # Resampling two repeats gives means 2 (p=1/4), 3 (1/2), 4 (1/4): the 95% interval is [2, 4].
    est = bootstrap.mean_of_repeats([2.0, 4.0], label="x")
    assert est.value == 3.0 and (est.ci_low, est.ci_high) == (2.0, 4.0)


def test_interval_contains_the_mean_and_is_seeded() -> None:
    values = [1.0, 1.2, 0.9, 1.1, 1.05]
    a = bootstrap.mean_of_repeats(values, seed=3, label="c")
    assert a.ci_low <= a.value <= a.ci_high and a.ci_low < a.ci_high
    b = bootstrap.mean_of_repeats(values, seed=3, label="c")
    assert (b.value, b.ci_low, b.ci_high) == (a.value, a.ci_low, a.ci_high)


@pytest.mark.parametrize("values", [[], [float("nan")], [None]])
def test_no_values_no_estimate(values: list) -> None:
    est = bootstrap.mean_of_repeats(values)
    assert math.isnan(est.value) and math.isnan(est.ci_low)


def test_one_repeat_has_no_interval_and_non_finite_repeats_are_left_out() -> None:
    est = bootstrap.mean_of_repeats([5.0, float("inf")])
    assert est.value == 5.0 and math.isnan(est.ci_low) and math.isnan(est.ci_high)
