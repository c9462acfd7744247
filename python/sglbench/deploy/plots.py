"""The report's plots of the deployment answer: the break-even map and the per-GPU Pareto frontier."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from sglbench.deploy import schema
from sglbench.deploy.answer import Answer
from sglbench.deploy.levels import LOAD_CONCURRENCY
from sglbench.deploy.text import model_name
from sglbench.plotting import Plot, legend, png, tp_axes

TP_MARKERS = {1: "o", 2: "P", 4: "s", 8: "^"}
BREAKEVEN_TITLE = "Break-even: speedup over the baseline by load"
FRONTIER_TITLE = "Per-GPU Pareto frontier: tok/s per GPU vs tok/s per user"


def _load_axis(ax: Any, load: str, levels: Sequence[float]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(levels))
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("concurrent requests" if load == LOAD_CONCURRENCY else "requests/s (Poisson)")


def _crossover_mark(ax: Any, c: schema.Crossover, color: str, y: float = 1.0) -> None:
    """A diamond at the crossover on the break-even line (``y``: nudged off it a little per config so
    that several stay apart), its 95% CI as a horizontal bar (to the end of the compared range, with an
    arrow, when a bound lies beyond it)."""
    e = c.estimate
    if c.status != "crosses" or e.value is None or c.range_low is None or c.range_high is None:
        return
    lo = e.ci_low if e.ci_low is not None else (c.range_low if e.ci_low_beyond == "below" else e.value)
    hi = e.ci_high if e.ci_high is not None else (c.range_high if e.ci_high_beyond == "above" else e.value)
    ax.plot([lo, hi], [y, y], color=color, lw=4, alpha=0.45, solid_capstyle="butt")
    ax.plot([e.value], [y], "D", color=color, ms=8, mec="#111111", mew=0.8)
    for beyond, x, arrow in ((e.ci_low_beyond, lo, "<"), (e.ci_high_beyond, hi, ">")):
        if beyond:
            ax.plot([x], [y], arrow, color=color, ms=7)


def plot_breakeven(answers: Sequence[Answer], colors: dict[str, str]) -> Plot:
    key = "breakeven"
    pairs = [(a, p) for a in answers for p in a.breakeven.pairs if any(lv.speedup for lv in p.levels)]
    if not pairs:
        reason = "no speculative config has an algorithm-none baseline measured at a common load range"
        return Plot(key, BREAKEVEN_TITLE, None, "", reason)
    panels = sorted({(p.tp, p.load) for _, p in pairs})
    fig, axes = tp_axes(len(panels), width=5.0, height=3.8)
    hosts = {p.host for _, p in pairs}
    models = {p.model_path for _, p in pairs}
    for ax, (tp, load) in zip(axes, panels, strict=True):
        levels: list[float] = []
        here = [p for _a, p in pairs if (p.tp, p.load) == (tp, load)]
        for j, p in enumerate(here):
            color = colors.get(p.config, "#333333")
            label = p.config + (f" @ {p.host}" if len(hosts) > 1 else "")
            if len(models) > 1:
                label += f" ({model_name(p.model_path)})"
            lvs = [lv for lv in p.levels if lv.speedup is not None]
            xs = [lv.level for lv in lvs]
            levels += xs
            ax.plot(xs, [lv.speedup for lv in lvs], "-o", color=color, label=label, lw=1.8, ms=4)
            with_ci = [lv for lv in lvs if lv.ci_low is not None and lv.ci_high is not None]
            if with_ci:
                ax.fill_between(
                    [lv.level for lv in with_ci],
                    [lv.ci_low for lv in with_ci],
                    [lv.ci_high for lv in with_ci],
                    color=color,
                    alpha=0.2,
                    lw=0,
                )
            _crossover_mark(ax, p.crossover, color, 1.0 + 0.04 * (j - (len(here) - 1) / 2))
        ax.axhline(1.0, color="#333333", lw=1, ls="--")
        _load_axis(ax, load, levels)
        ax.set_title(f"TP {tp}")
        ax.set_ylabel("speedup over algorithm none (x)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    legend(axes)
    cap = (
        "Each speculative config's throughput over the algorithm-none config of the same host, TP, model and "
        "prompt set at each load; band = 95% bootstrap CI. Diamond on the dashed line = break-even (the load "
        "where the speedup falls to 1, interpolated in log load), bar = its 95% CI (an arrow: the bound lies "
        "beyond the loads compared). Above the line, speculative decoding pays."
    )
    return Plot(key, BREAKEVEN_TITLE, png(fig), cap)


def plot_frontier(answers: Sequence[Answer], colors: dict[str, str]) -> Plot:
    key = "frontier"
    groups = [g for a in answers for g in a.frontier.groups if any(p.tok_s_per_user for p in g.points)]
    if not groups:
        return Plot(key, FRONTIER_TITLE, None, "", "no point has both a throughput and a TPOT")
    fig = Figure(figsize=(max(6.5, 5.2 * len(groups)), 4.2))
    axes = [fig.add_subplot(1, len(groups), i + 1) for i in range(len(groups))]
    hosts = {g.host for g in groups}
    for ax, g in zip(axes, groups, strict=True):
        pts = [p for p in g.points if p.tok_s_per_user is not None]
        for p in pts:
            marker = TP_MARKERS.get(p.tp, "D")
            face = colors.get(p.config, "#333333") if p.on_frontier else "none"
            ax.plot(
                [p.tok_s_per_user],
                [p.tok_s_per_gpu],
                marker,
                mfc=face,
                mec=colors.get(p.config, "#333333"),
                ms=7 if p.on_frontier else 5,
                ls="none",
            )
        front = sorted((p for p in pts if p.on_frontier), key=lambda p: p.tok_s_per_user or 0.0)
        ax.plot(
            [p.tok_s_per_user for p in front], [p.tok_s_per_gpu for p in front], "-", color="#111111", lw=1.2
        )
        for p in front:
            if p.tok_s_per_gpu_ci_low is not None and p.tok_s_per_gpu_ci_high is not None:
                ax.plot(
                    [p.tok_s_per_user] * 2,
                    [p.tok_s_per_gpu_ci_low, p.tok_s_per_gpu_ci_high],
                    "-",
                    color="#555555",
                    lw=1,
                )
            ax.annotate(
                f"TP{p.tp} {p.point}",
                (p.tok_s_per_user or 0.0, p.tok_s_per_gpu),
                textcoords="offset points",
                xytext=(5, 4),
                fontsize=7,
                color="#444444",
            )
        for p in pts:
            if p.knee:
                ax.plot(
                    [p.tok_s_per_user],
                    [p.tok_s_per_gpu],
                    "*",
                    ms=18,
                    mfc="none",
                    mec="#b3261e",
                    mew=1.6,
                    label="knee",
                )
        where = f"{model_name(g.model_path)}, {g.prompt_set}" + (f" @ {g.host}" if len(hosts) > 1 else "")
        ax.set_title(where, fontsize=10)
        ax.set_xlabel("tok/s per user (1000 / TPOT p50)")
        ax.set_ylabel("output tok/s per GPU")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    for cfg in sorted({p.config for g in groups for p in g.points}):
        axes[-1].plot([], [], "s", color=colors.get(cfg, "#333333"), ls="none", label=cfg)
    for tp, marker in sorted(TP_MARKERS.items()):
        if any(p.tp == tp for g in groups for p in g.points):
            axes[-1].plot([], [], marker, mfc="none", mec="#333333", ls="none", label=f"TP {tp}")
    legend(axes, sort=False)
    cap = (
        "Every config, TP size and load level: output tok/s per GPU (throughput / TP size, so a TP8 server "
        "and eight TP1 servers compare directly) against each request's decode rate. Filled markers and the "
        "black line = the Pareto frontier (no other point is better on both axes), vertical bars = 95% CI of "
        "tok/s per GPU; red star = the knee (the frontier point farthest above the line between its ends, "
        "axes scaled to [0, 1]); marker shape = TP size."
    )
    return Plot(key, FRONTIER_TITLE, png(fig), cap)
