"""Per-GPU Pareto frontier: dominated points, the knee, and TP8 against eight TP1 servers."""

from __future__ import annotations

from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import results
from sglbench.deploy import answer, frontier, schema


def _group(root: Path) -> schema.FrontierGroup:
    (a,) = answer.compute(results.load(root / "run1"))
    (g,) = a.frontier.groups
    return g


def _pt(g: schema.FrontierGroup, config: str, tp: int, point: str) -> schema.FrontierPoint:
    return next(p for p in g.points if (p.config, p.tp, p.point) == (config, tp, point))


def test_pareto_marks_only_undominated_points() -> None:
    pts = [(10.0, 100.0), (20.0, 80.0), (15.0, 70.0), (20.0, 80.0), (30.0, 10.0)]
    # (15, 70) is dominated by (20, 80); equal points do not dominate each other
    assert frontier.pareto(pts) == [True, True, False, True, True]


def test_knee_is_the_inner_point_farthest_above_the_chord() -> None:
    front = [(10.0, 100.0), (40.0, 95.0), (60.0, 60.0), (100.0, 10.0)]
    k, why = frontier.knee(front)
    assert k == 1 and why == ""  # scaled: (0.33, 0.94) is 0.28 above x + y = 1, (0.56, 0.56) only 0.11
    assert frontier.knee(front[:2]) == (None, "2 frontier point(s): a knee needs three")
    sagging = [(10.0, 100.0), (50.0, 20.0), (100.0, 10.0)]
    assert frontier.knee(sagging)[0] is None


def test_a_dominated_config_is_off_the_frontier(tmp_path: Path) -> None:
    # "slow" has less throughput at a lower per-user rate than "ar" at every level; "fast" at c1 has more
    # of both than "ar" at c1
    rf.curve(tmp_path, "ar", {1: 40.0, 4: 150.0, 16: 480.0}, itl={1: 20.0, 4: 25.0, 16: 30.0})
    rf.curve(tmp_path, "slow", {1: 30.0, 4: 100.0}, algorithm="NGRAM", itl={1: 40.0, 4: 50.0})
    rf.curve(tmp_path, "fast", {1: 90.0}, algorithm="DFLASH", itl={1: 8.0})
    g = _group(tmp_path)
    on = {(p.config, p.point) for p in g.points if p.on_frontier}
    assert on == {("ar", "c4"), ("ar", "c16"), ("fast", "c1")}
    assert len(g.points) == 6
    assert _pt(g, "fast", 1, "c1").tok_s_per_user == pytest.approx(1000 / 8.0)


def test_tp8_is_judged_per_gpu_against_tp1_servers_at_the_same_interactivity(tmp_path: Path) -> None:
    rf.curve(tmp_path, "ar", {1: 50.0, 8: 200.0, 32: 400.0}, itl={1: 10.0, 8: 20.0, 32: 40.0})
    rf.curve(tmp_path, "ar", {1: 200.0, 8: 1200.0}, tp=8, itl={1: 4.0, 8: 12.0})
    g = _group(tmp_path)
    tp8 = _pt(g, "ar", 8, "c8")
    assert tp8.tok_s_per_gpu == pytest.approx(1200.0 / 8)
    assert tp8.tok_s_per_gpu_ci_low == pytest.approx(_ci_low(tmp_path, 8, "c8") / 8)
    # 1000/12 = 83 tok/s per user: only the TP1 c1 point (100 per user, 50 tok/s per GPU) is as fast
    assert tp8.tp1_replicas_tok_s_per_gpu == pytest.approx(50.0)
    assert tp8.vs_tp1_replicas == pytest.approx(150.0 / 50.0)
    # 250 per user at TP8 c1: no TP1 point is that fast for one user
    tp8_c1 = _pt(g, "ar", 8, "c1")
    assert tp8_c1.tp1_replicas_tok_s_per_gpu is None and tp8_c1.vs_tp1_replicas is None
    assert _pt(g, "ar", 1, "c32").tok_s_per_gpu == pytest.approx(400.0)


def _ci_low(root: Path, tp: int, point: str) -> float:
    from sglbench import summarize

    t = summarize.summary_table(results.load(root / "run1"))
    return float(t[(t.tp == tp) & (t.point == point)].iloc[0].tok_s_ci_low)
