"""The per-GPU Pareto frontier: output tok/s per GPU against tok/s per user over every config, TP size and
load level of one host, model and prompt set.

Method (also in ``docs/deploy.md``):

- **Per GPU**: mean output tok/s / TP size (the GPUs one server uses); its interval is the summary's
  tok/s interval / TP size. Per GPU, a TP8 server and eight TP1 servers on the same eight GPUs are
  compared directly.
- **Per user**: 1000 / TPOT p50 (ms, mean over repeats): the decode rate one request sees.
- **Frontier**: a point is on it when no other point of the group has at least its per-GPU and
  per-user rates and more of one (points without a TPOT are left out). Both axes are wanted high.
- **Knee**: among the frontier's inner points, the one farthest above the straight line between the
  frontier's two end points once both axes are scaled to [0, 1] over the frontier (the Kneedle
  distance, x + y - 1 in the scaled axes); none with fewer than three frontier points or when no inner
  point lies above the line.
- **Against TP1 replicas**: for a point at TP > 1, the best per-GPU rate of the group's TP1 points
  that reach at least its per-user rate (what TP1 servers on the same GPUs would give at that
  interactivity) and the ratio to it; null when no TP1 point reaches that per-user rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sglbench.deploy import schema
from sglbench.deploy.levels import E2E_P50, Series

METHOD = (__doc__ or "").split("Method (also in ``docs/deploy.md``):", 1)[-1].strip()
KNEE_RULE = (
    "frontier point farthest above the line between the frontier's end points, both axes scaled to [0, 1] "
    "over the frontier (Kneedle distance)"
)


def _point(s: Series, i: int) -> schema.FrontierPoint:
    lv = s.levels[i]
    tp = s.key.tp

    def per_gpu(v: float | None) -> float | None:
        return None if v is None else v / tp

    return schema.FrontierPoint(
        config=s.key.config,
        algorithm=s.key.algorithm,
        tp=tp,
        point=lv.point,
        load=lv.load,
        level=lv.level,
        tok_s=lv.tok_s,
        tok_s_per_gpu=lv.tok_s / tp,
        tok_s_per_gpu_ci_low=per_gpu(lv.tok_s_ci_low),
        tok_s_per_gpu_ci_high=per_gpu(lv.tok_s_ci_high),
        tok_s_per_user=schema.finite(lv.per_user_tok_s),
        e2e_ms_p50=schema.finite(lv.metric(E2E_P50)),
        on_frontier=False,
        knee=False,
        valid=lv.valid,
    )


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which (x, y) points no other point dominates (at least as high on both axes, higher on one)."""
    out = []
    for i, (x, y) in enumerate(points):
        dominated = any((a >= x and b >= y) and (a > x or b > y) for j, (a, b) in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def knee(points: Sequence[tuple[float, float]]) -> tuple[int | None, str]:
    """Index (into ``points``, the frontier) of the knee by :data:`KNEE_RULE`, or None and why not."""
    if len(points) < 3:
        return None, f"{len(points)} frontier point(s): a knee needs three"
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    dx, dy = max(xs) - min(xs), max(ys) - min(ys)
    if dx <= 0 or dy <= 0:
        return None, "the frontier is flat on one axis"
    order = sorted(range(len(points)), key=lambda i: xs[i])
    inner = order[1:-1]
    dist = {i: (xs[i] - min(xs)) / dx + (ys[i] - min(ys)) / dy - 1.0 for i in inner}
    best = max(inner, key=lambda i: dist[i])
    if dist[best] <= 0:
        return None, "no inner frontier point lies above the line between the end points"
    return best, ""


def _tp1_replicas(points: list[schema.FrontierPoint]) -> list[schema.FrontierPoint]:
    tp1 = [p for p in points if p.tp == 1 and p.tok_s_per_user is not None]
    out = []
    for p in points:
        if p.tp == 1 or p.tok_s_per_user is None:
            out.append(p)
            continue
        reach = [
            q.tok_s_per_gpu
            for q in tp1
            if q.tok_s_per_user is not None and q.tok_s_per_user >= p.tok_s_per_user
        ]
        best = max(reach) if reach else None
        ratio = p.tok_s_per_gpu / best if best else None
        out.append(replace(p, tp1_replicas_tok_s_per_gpu=best, vs_tp1_replicas=ratio))
    return out


def group_frontier(
    host: str, model_path: str | None, prompt_set: str, members: Sequence[Series]
) -> schema.FrontierGroup:
    pts = [_point(s, i) for s in members for i in range(len(s.levels))]
    usable = [i for i, p in enumerate(pts) if p.tok_s_per_user is not None]
    xy = [(pts[i].tok_s_per_user or 0.0, pts[i].tok_s_per_gpu) for i in usable]
    on = pareto(xy)
    front = [usable[k] for k, flag in enumerate(on) if flag]
    k, why = knee([(pts[i].tok_s_per_user or 0.0, pts[i].tok_s_per_gpu) for i in front])
    knee_at = front[k] if k is not None else None
    pts = [replace(p, on_frontier=i in front, knee=i == knee_at) for i, p in enumerate(pts)]
    pts = _tp1_replicas(pts)
    if not usable:
        why = "no point has a TPOT (per-user rate unknown)"
    return schema.FrontierGroup(
        host=host,
        model_path=model_path,
        prompt_set=prompt_set,
        knee_rule=KNEE_RULE,
        knee_reason=why,
        points=pts,
    )


def frontiers(series: Sequence[Series]) -> list[schema.FrontierGroup]:
    """One frontier per (host, model, prompt set) of one run, over every TP size, config and load mode."""
    by: dict[tuple[str, str | None, str], list[Series]] = {}
    for s in series:
        by.setdefault((s.key.host, s.key.model_path, s.key.prompt_set), []).append(s)
    return [group_frontier(h, m, p, members) for (h, m, p), members in by.items()]
