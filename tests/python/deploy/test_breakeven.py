"""Break-even map and deploy table on constructed curves: a clear crossover, none (speculative always or
never faster), CIs straddling 1, interpolated levels, SLOs, and the crossover rule on hand numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import recordfactory as rf

from sglbench import results, summarize
from sglbench.deploy import answer, breakeven, schema

AR = {1: 40.0, 2: 80.0, 4: 150.0, 8: 280.0, 16: 480.0}  # scales with the batch
SATURATING = {1: 90.0, 2: 160.0, 4: 220.0, 8: 250.0, 16: 260.0}  # speculative: fast alone, flat when busy


def _answer(root: Path) -> answer.Answer:
    (a,) = answer.compute(results.load(root / "run1"))
    return a


def _pair(a: answer.Answer, config: str) -> schema.Pair:
    return next(p for p in a.breakeven.pairs if p.config == config)


def test_clear_crossover_between_the_levels_where_the_speedup_falls_below_one(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR)
    rf.curve(tmp_path, "dflash", SATURATING, algorithm="DFLASH")
    a = _answer(tmp_path)
    p = _pair(a, "dflash")
    assert [lv.verdict for lv in p.levels] == ["faster", "faster", "faster", "slower", "slower"]
    assert p.faster_up_to == 4.0 and p.faster_levels == [1.0, 2.0, 4.0]
    c = p.crossover
    assert c.status == "crosses" and c.between == ["c4", "c8"] and c.crossings == 1
    # The point estimate: speedups 220/150 at c4 and 250/280 at c8, interpolated in log load.
    s4, s8 = 220 / 150, 250 / 280
    want = math.exp(math.log(4) + (s4 - 1) / (s4 - s8) * (math.log(8) - math.log(4)))
    assert c.estimate.value == pytest.approx(want)
    assert c.estimate.ci_low is not None and c.estimate.ci_high is not None
    assert 4 < c.estimate.ci_low < c.estimate.value < c.estimate.ci_high < 8
    assert c.replicates_crossing == 1.0
    (row,) = a.breakeven.deploy
    assert row.text == "dflash up to concurrency 4, then ar (measured to concurrency 16)"
    assert [(s.config, s.from_point, s.to_point) for s in row.segments] == [
        ("dflash", "c1", "c4"),
        ("ar", "c8", "c16"),
    ]
    assert row.breakeven == "dflash" and row.crossover == c


def test_the_speedup_interval_at_a_common_level_is_the_summary_tables(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR)
    rf.curve(tmp_path, "dflash", SATURATING, algorithm="DFLASH", spread=0.08)
    res = results.load(tmp_path / "run1")
    table = summarize.summary_table(res)
    (a,) = answer.compute(res)
    for lv in _pair(a, "dflash").levels:
        row = table[(table.config == "dflash") & (table.point == lv.point)].iloc[0]
        assert (lv.speedup, lv.ci_low, lv.ci_high) == (row.speedup, row.speedup_ci_low, row.speedup_ci_high)


def test_speculative_faster_at_every_level_has_no_crossover_in_range(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR)
    rf.curve(tmp_path, "ddtree", {c: 2.0 * v for c, v in AR.items()}, algorithm="DDTREE")
    a = _answer(tmp_path)
    c = _pair(a, "ddtree").crossover
    assert c.status == "faster throughout" and c.estimate.value is None
    assert c.estimate.ci_low_beyond == c.estimate.ci_high_beyond == "above"
    assert c.replicates_crossing == 0.0
    (row,) = a.breakeven.deploy
    assert row.text == "ddtree at every measured level (concurrency 1 to 16)"


def test_speculative_never_faster_leaves_the_baseline_everywhere(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR)
    rf.curve(tmp_path, "eagle", {c: 0.7 * v for c, v in AR.items()}, algorithm="EAGLE")
    a = _answer(tmp_path)
    p = _pair(a, "eagle")
    assert p.crossover.status == "not faster at the lowest level" and p.faster_up_to is None
    assert {lv.verdict for lv in p.levels} == {"slower"}
    assert a.breakeven.deploy[0].text == "ar at every measured level (concurrency 1 to 16)"


def test_noisy_intervals_straddling_one_are_no_evidence_of_a_gain(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR, spread=0.3)
    rf.curve(tmp_path, "dflash", {c: 1.05 * v for c, v in AR.items()}, algorithm="DFLASH", spread=0.3)
    a = _answer(tmp_path)
    p = _pair(a, "dflash")
    assert all(lv.speedup and lv.speedup > 1 for lv in p.levels)  # faster on the estimate ...
    assert {lv.verdict for lv in p.levels} == {"within noise"}  # ... but never beyond noise
    assert all(lv.ci_low is not None and lv.ci_low < 1 < (lv.ci_high or 0) for lv in p.levels)
    assert a.breakeven.deploy[0].segments[0].config == "ar"
    assert a.breakeven.deploy[0].text.startswith("ar at every measured level")


def test_a_level_one_side_did_not_measure_is_interpolated_in_log_load(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", {1: 40.0, 2: 80.0, 4: 150.0})
    rf.curve(tmp_path, "dflash", {1: 90.0, 4: 200.0}, algorithm="DFLASH")
    p = _pair(_answer(tmp_path), "dflash")
    lv2 = next(lv for lv in p.levels if lv.level == 2.0)
    assert lv2.measured == "baseline"  # the config is the interpolated side
    w = (math.log(2) - math.log(1)) / (math.log(4) - math.log(1))
    assert lv2.speedup == pytest.approx(((1 - w) * 90.0 + w * 200.0) / 80.0)
    assert [lv.measured for lv in p.levels] == ["both", "baseline", "both"]


def test_a_config_missing_its_slo_is_not_deployed_where_it_misses(tmp_path: Path) -> None:
    slo = {"ttft_ms_p99": 150.0}
    rf.curve(tmp_path, "ar", AR, slo=slo)
    # faster everywhere, but its TTFT p99 (twice the p50 in the factory) breaks 150 ms from c4 on
    rf.curve(
        tmp_path,
        "dflash",
        {c: 2.0 * v for c, v in AR.items()},
        algorithm="DFLASH",
        slo=slo,
        ttft={1: 40.0, 2: 60.0, 4: 90.0, 8: 120.0, 16: 150.0},
    )
    row = _answer(tmp_path).breakeven.deploy[0]
    assert row.text == "dflash up to concurrency 2, then ar (measured to concurrency 16)"


def test_no_baseline_says_so(tmp_path: Path) -> None:
    rf.curve(tmp_path, "dflash", SATURATING, algorithm="DFLASH")
    a = _answer(tmp_path)
    assert a.breakeven.pairs == []
    (row,) = a.breakeven.deploy
    assert row.baseline is None and row.segments == [] and "no algorithm-none config" in row.notes[0]


def test_crossing_rule_on_hand_numbers() -> None:
    u = np.log([1.0, 2.0, 4.0])
    s = np.array([[2.0, 2.0, 0.9, 1.2], [1.5, 0.5, 0.8, 1.1], [0.5, 0.4, 0.7, 1.05]])
    got = breakeven.crossing_log(u, s)
    # col 0: between 2 and 4, halfway (1.5 -> 0.5) in log load: 2 * sqrt(2)
    assert math.exp(got[0]) == pytest.approx(2 * math.sqrt(2))
    # col 1: between 1 and 2, (2 - 1) / (2 - 0.5) of the way
    assert math.exp(got[1]) == pytest.approx(math.exp((1 / 1.5) * math.log(2)))
    assert got[2] == -math.inf and got[3] == math.inf


def test_a_curve_that_dips_and_recovers_counts_its_crossings(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", AR)
    rf.curve(tmp_path, "dflash", {1: 90.0, 2: 60.0, 4: 220.0, 8: 250.0, 16: 260.0}, algorithm="DFLASH")
    c = _pair(_answer(tmp_path), "dflash").crossover
    assert c.status == "crosses" and c.between == ["c1", "c2"]  # the first fall below 1
    assert c.crossings == 3
