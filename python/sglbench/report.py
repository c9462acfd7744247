"""``sglbench report RUN_DIR -o report.html``: one self-contained HTML page of a campaign.

The page has inline CSS and its plots as base64 PNG data URIs (no scripts, no network); the same PNGs
are written beside it as ``<stem>-<plot>.png``. Sections (:data:`SECTIONS`): at a glance, the deployment
answer (deploy table per TP, break-even pairs, limits; ``sglbench.deploy``), summary tables per TP,
throughput vs concurrency, speedup with CIs, the break-even plot, the per-GPU Pareto frontier, latency
distributions, acceptance by prompt category, multi-turn sessions by turn (when a source sent sessions),
TP scaling, energy and GPU telemetry (energy per token with CIs over repeats; per attempt, the series of
its points over the measured window), capacity (memory split per GPU from the capacity plan; KV tokens
predicted vs observed), failures with recommendations, and how the numbers were computed. A SIMULATED
banner heads the page when any data comes from the stand-in, a CPU ENGINE banner when any comes from the
real SGLang on its CPU engine.
"""

from __future__ import annotations

import argparse
import base64
import html
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from sglbench import acceptance, bootstrap, columnar, events, lossless, outfiles, turns
from sglbench.deploy import store
from sglbench.deploy import text as deploy_text
from sglbench.deploy.answer import Answer
from sglbench.deploy.plots import plot_breakeven, plot_frontier
from sglbench.hostlib import result_schema
from sglbench.plotting import Plot, config_colors
from sglbench.plotting import legend as _legend
from sglbench.plotting import png as _png
from sglbench.plotting import tp_axes as _tp_axes
from sglbench.records import RecordError
from sglbench.results import Results
from sglbench.summarize import display_rows, dropped_lines, host_list, load_or_exit, summary_table
from sglbench.telemetry import derive as telemetry
from sglbench.telemetry import series as ser

# The page's sections (h2), in order; the tests read them from here.
GLANCE = "At a glance"
DEPLOY = deploy_text.DEPLOY_HEADING
TABLES = "Results per TP phase"
THROUGHPUT = "Throughput and speedup"
BREAKEVEN = "Break-even: where speculative decoding stops paying"
FRONTIER = deploy_text.FRONTIER_HEADING
LATENCY = "Latency"
ACCEPTANCE = "Speculative acceptance"
LOSSLESS = "Losslessness at temperature 0"
SCALING = "Scaling across TP sizes"
TELEMETRY = "Energy and GPU telemetry"
CAPACITY = "Capacity"
FAILURES = "Failures and skips"
METHODS = "How the numbers were computed"
SECTIONS = (
    GLANCE, DEPLOY, TABLES, LOSSLESS, THROUGHPUT, BREAKEVEN, FRONTIER, LATENCY, ACCEPTANCE, SCALING,
    TELEMETRY, CAPACITY, FAILURES, METHODS,
)  # fmt: skip
# The request columns the plots use: the report reads no other column of the request rows.
REPORT_REQUEST_COLUMNS = ("tp", "host", "config", "category", "ok", "ttft_ms", "e2e_ms", "accept_length")
# With several hosts, a plot's series is one config on one host (``qwen3-8b-ar @ gpu-a``).
HOST_SEP = " @ "
# What to do about each failure cause (classified by hostlib/sglang_logs.py and the cycle role).
CAUSE_ADVICE = {
    "zero_requests": "SGLang computed zero request slots: the Mamba state pool cannot hold the requested "
    "running requests next to the speculative buffers. Lower --max-running-requests, raise "
    "--mem-fraction-static, or apply the planner's recommendation (sglbench run --policy autotune).",
    "not_enough_memory": "The KV/state pools do not fit after the weights: raise --mem-fraction-static, "
    "lower --context-length, or run at a larger TP size.",
    "cuda_oom": "CUDA ran out of memory while starting (CUDA graphs or activations): lower "
    "--mem-fraction-static or --cuda-graph-max-bs.",
    "bad_args": "SGLang rejected its arguments or could not load the model: check this config's args, model "
    "and draft paths in the matrix (journal.log has the exact error).",
    "port_in_use": "The port was taken: stop the other server or give the config another port.",
    "readiness_timeout": "The server never became ready before the deadline: read journal.log; large models "
    "may need a longer sglbench_ready_timeout_s.",
    "gpu_busy": "The GPUs were not free after stopping every SGLang unit: another process holds them.",
    "planned_failure": "The capacity planner predicted this start would fail, so it was not started (policy "
    "skip). Use --policy autotune to run the recommended flags, or --policy force to try anyway.",
    "start_failed": "systemd could not start the unit: see unit.service and journal.log beside the record.",
    "probe_failed": "The server started but /server_info did not answer: see journal.log.",
    "bench_failed": "The benchmark did not complete: see the record's failure message and journal.log.",
    "server_exited": "The server exited while it was probed or benchmarked (after starting fine): the "
    "failure lines are the exception from its journal (journal.log); points measured before are kept.",
}
MEMORY_PARTS = [
    ("weights", "#4c72b0"),
    ("KV cache", "#55a868"),
    ("Mamba state", "#c44e52"),
    ("speculative reservation", "#8172b2"),
    ("CUDA graphs", "#ccb974"),
    ("free for activations", "#dddddd"),
    ("CUDA context / other", "#999999"),
]


# -- helpers --------------------------------------------------------------------------------------
def by_host(frame: pd.DataFrame, several_hosts: bool) -> pd.DataFrame:
    """The frame the plots draw: with several hosts, ``config`` (and ``baseline``, on the same host by
    construction) become ``<config> @ <host>``, so every series is one config on one host and no plot
    pools two hosts' figures; with one host, the frame itself."""
    if not several_hosts or not len(frame):
        return frame
    out = frame.copy()
    for col in ("config", "baseline"):
        if col in out:
            named = out[col].notna()
            out[col] = out[col].astype(object)
            hosts = out.loc[named, "host"].astype(str)
            out.loc[named, col] = out.loc[named, col].astype(str) + HOST_SEP + hosts
    return out


def several_hosts(res: Results) -> bool:
    return len(res.hosts) > 1


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if _nan(v) else format(float(v), spec)


def memory_split(plan: dict[str, Any]) -> dict[str, float] | None:
    """GiB per GPU by part (``MEMORY_PARTS``) from a capacity plan (Plan.to_dict()); None without one."""
    total = plan.get("gpu_mem_gib")
    if not total:
        return None

    def g(*keys: str) -> float:
        return float(sum(float(plan.get(k) or 0.0) for k in keys))

    kv = g("k_size_gib", "v_size_gib", "draft_k_size_gib", "draft_v_size_gib") or g("kv_cache_gib")
    parts = {
        "weights": g("weights_gib", "draft_weights_gib"),
        "KV cache": kv,
        "Mamba state": g("mamba_conv_gib", "mamba_ssm_gib"),
        "speculative reservation": g("spec_intermediate_ssm_gib", "spec_intermediate_conv_gib"),
        "CUDA graphs": g("cuda_graph_gib", "req_to_token_gib"),
        "free for activations": max(0.0, g("available_gpu_mem_gib")),
    }
    parts["CUDA context / other"] = max(0.0, float(total) - sum(parts.values()))
    return parts


# -- plots ----------------------------------------------------------------------------------------
def _conc_axis(ax: Any, concs: Sequence[Any]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted({int(c) for c in concs if not _nan(c)})
    ax.set_xticks(ticks, [str(c) for c in ticks])
    ax.minorticks_off()
    ax.set_xlabel("concurrent requests")


def plot_throughput(table: pd.DataFrame, colors: dict[str, str]) -> Plot:
    t = table[table["point"].notna() & table["tok_s"].notna()]
    key, title = "throughput", "Output throughput vs concurrency"
    if not len(t):
        return Plot(key, title, None, "", "no benchmark points were recorded")
    tps = sorted(t["tp"].unique())
    fig, axes = _tp_axes(len(tps))
    for ax, tp in zip(axes, tps, strict=True):
        sub = t[t["tp"] == tp]
        for cfg, g in sub.groupby("config", sort=True):
            g = g.sort_values("concurrency")
            style = "--" if str(g["algorithm"].iloc[0]).lower() == "none" else "-"
            ax.plot(g["concurrency"], g["tok_s"], style, marker="o", color=colors[cfg], label=cfg, lw=1.8)
            lo, hi = g["tok_s_ci_low"].astype(float), g["tok_s_ci_high"].astype(float)
            if lo.notna().any():
                ax.fill_between(g["concurrency"], lo, hi, color=colors[cfg], alpha=0.2, lw=0)
        _conc_axis(ax, sub["concurrency"])
        ax.set_title(f"TP {tp}")
        ax.set_ylabel("output tokens/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    _legend(axes)
    cap = (
        "Mean output tokens/s over repeats at each concurrency; shaded band = 95% bootstrap CI. "
        "Dashed lines are autoregressive baselines (algorithm none)."
    )
    return Plot(key, title, _png(fig), cap)


def _grouped_bars(t: pd.DataFrame, colors: dict[str, str], ylabel: str) -> tuple[Figure, list[Any]]:
    """One panel per TP: per concurrency, one bar per config (``value``) with 95% CI whiskers (``lo``,
    ``hi``; none where NaN). Rows with a true ``flagged`` (when the column exists) are hatched."""
    tps = sorted(t["tp"].unique())
    fig, axes = _tp_axes(len(tps), width=5.0, height=3.6)
    for ax, tp in zip(axes, tps, strict=True):
        sub = t[t["tp"] == tp]
        concs = sorted(sub["concurrency"].dropna().unique())
        cfgs = sorted(sub["config"].unique())
        width = 0.8 / max(len(cfgs), 1)
        for j, cfg in enumerate(cfgs):
            g = sub[sub["config"] == cfg]
            xs = [concs.index(c) + (j - (len(cfgs) - 1) / 2) * width for c in g["concurrency"]]
            ys = list(g["value"])
            err_lo = [0.0 if _nan(lo) else max(0.0, y - lo) for y, lo in zip(ys, g["lo"], strict=True)]
            err_hi = [0.0 if _nan(hi) else max(0.0, hi - y) for y, hi in zip(ys, g["hi"], strict=True)]
            bars = ax.bar(
                xs, ys, width=width * 0.95, color=colors.get(cfg, "#777777"), label=cfg,
                yerr=[err_lo, err_hi], capsize=3, ecolor="#333333",
            )  # fmt: skip
            flagged = g["flagged"] if "flagged" in g.columns else [False] * len(g)
            for bar, flag in zip(bars, flagged, strict=True):
                if flag:
                    bar.set_hatch("//")
        ax.set_xticks(range(len(concs)), [str(int(c)) for c in concs])
        ax.set_title(f"TP {tp}")
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    return fig, axes


def plot_speedup(table: pd.DataFrame, colors: dict[str, str]) -> Plot:
    key, title = "speedup", "Speedup over the autoregressive baseline"
    t = table[table["speedup"].notna() & (table["baseline"] != table["config"])]
    if not len(t):
        return Plot(
            key,
            title,
            None,
            "",
            "no speculative config has a baseline (algorithm none) at the same host, TP, model, prompt set "
            "and concurrency",
        )
    t = t.rename(columns={"speedup": "value", "speedup_ci_low": "lo", "speedup_ci_high": "hi"})
    fig, axes = _grouped_bars(t, colors, "speedup (x)")
    for ax in axes:
        ax.axhline(1.0, color="#333333", lw=1, ls="--")
    _legend(axes)
    cap = (
        "Throughput ratio to the algorithm-none config of the same model, TP and concurrency; whiskers = 95% "
        "bootstrap CI. Above the dashed line = faster than autoregressive."
    )
    return Plot(key, title, _png(fig), cap)


def plot_latency(res: Results, table: pd.DataFrame, colors: dict[str, str]) -> Plot:
    key, title = "latency", "Latency distributions"
    req = by_host(res.request_columns(REPORT_REQUEST_COLUMNS), several_hosts(res))
    req = req[req["ok"].astype(bool)] if len(req) else req
    if len(req) and req["ttft_ms"].notna().any():
        tps = sorted(req["tp"].unique())
        n_cfg = int(req.groupby("tp")["config"].nunique().max())
        fig = Figure(figsize=(max(7.0, len(tps) * (0.9 * n_cfg + 1.6)), 6.2))
        top: list[Any] = []
        for k, (col, metric) in enumerate(
            (("ttft_ms", "time to first token (ms)"), ("e2e_ms", "end-to-end (ms)"))
        ):
            for i, tp in enumerate(tps):
                ax = fig.add_subplot(2, len(tps), k * len(tps) + i + 1)
                sub = req[req["tp"] == tp]
                cfgs = sorted(sub["config"].unique())
                data = [sub[sub["config"] == c][col].dropna().to_numpy() for c in cfgs]
                bp = ax.boxplot(
                    data,
                    showfliers=False,
                    patch_artist=True,
                    whis=(1, 99),
                    widths=0.6,
                    medianprops={"color": "#111111"},
                )
                for patch, c in zip(bp["boxes"], cfgs, strict=True):
                    patch.set_facecolor(colors[c])
                    patch.set_alpha(0.8)
                    patch.set_label(c)
                ax.set_xticks(range(1, len(cfgs) + 1), ["" for _ in cfgs])
                if k == 0:
                    ax.set_title(f"TP {tp}")
                    top.append(ax)
                if i == 0:
                    ax.set_ylabel(metric)
                ax.set_ylim(bottom=0)
                ax.grid(True, axis="y", alpha=0.3)
        _legend(top)
        cap = (
            "Per-request distributions over every measured request of every concurrency (colour = config): "
            "box = p25-p75, black line = median, whiskers = p1-p99."
        )
        return Plot(key, title, _png(fig), cap)
    shown = result_schema.table_metrics()
    t = table[table[shown[0].column(shown[0].shown[0])].notna()]
    if not len(t):
        return Plot(key, title, None, "", "no latency was recorded")
    tps = sorted(t["tp"].unique())
    fig = Figure(figsize=(max(7.0, 4.6 * len(tps)), 3.2 * len(shown)))
    top = []
    for k, m in enumerate(shown):
        p50, p99, label = m.column(m.shown[0]), m.column(m.shown[-1]), f"{m.label} ({m.unit})"
        for i, tp in enumerate(tps):
            ax = fig.add_subplot(len(shown), len(tps), k * len(tps) + i + 1)
            sub = t[t["tp"] == tp]
            for cfg, g in sub.groupby("config", sort=True):
                g = g.sort_values("concurrency")
                ax.plot(g["concurrency"], g[p50], "-o", color=colors[cfg], label=cfg, ms=4)
                ax.fill_between(g["concurrency"], g[p50], g[p99], color=colors[cfg], alpha=0.15, lw=0)
            _conc_axis(ax, sub["concurrency"])
            ax.set_title(f"{label}, TP {tp}", fontsize=10)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            if k == 0:
                top.append(ax)
    _legend(top)
    cap = (
        "No per-request rows were kept, so this shows each point's p50 (line) to p99 (top of the band), "
        "averaged over repeats."
    )
    return Plot(key, title, _png(fig), cap)


def plot_acceptance(res: Results, table: pd.DataFrame, colors: dict[str, str]) -> Plot:
    key, title = "acceptance", "Acceptance length by prompt category"
    req = by_host(res.request_columns(REPORT_REQUEST_COLUMNS), several_hosts(res))
    if len(req) and req["accept_length"].notna().any():
        r = req[req["accept_length"].notna()]
        agg = r.groupby(["config", "category"])["accept_length"].mean().reset_index()
        cats = sorted(agg["category"].dropna().unique())
        cfgs = sorted(agg["config"].unique())
        fig = Figure(figsize=(max(7.0, 0.7 * len(cats) * max(1, len(cfgs)) + 3), 3.6))
        ax = fig.add_subplot(1, 1, 1)
        width = 0.8 / max(len(cfgs), 1)
        for j, cfg in enumerate(cfgs):
            g = agg[agg["config"] == cfg].set_index("category")
            xs = [i + (j - (len(cfgs) - 1) / 2) * width for i, c in enumerate(cats) if c in g.index]
            ys = [g.loc[c, "accept_length"] for c in cats if c in g.index]
            bars = ax.bar(xs, ys, width=width * 0.95, color=colors[cfg], label=cfg)
            ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
        ax.set_xticks(range(len(cats)), cats)
        ax.set_ylabel("accepted tokens per step")
        ax.grid(True, axis="y", alpha=0.3)
        _legend([ax])
        cap = (
            "Per-request acceptance length = completion tokens / verify steps (server counts), averaged per "
            "prompt category over every TP size and concurrency. Speculative decoding pays off where this is "
            "high."
        )
        return Plot(key, title, _png(fig), cap)
    t = table[table["accept_length"].notna()]
    if not len(t):
        return Plot(key, title, None, "", "no speculative config recorded an acceptance length")
    fig = Figure(figsize=(7.0, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    agg = t.groupby(["config", "tp"])["accept_length"].mean().reset_index()
    labels = [f"{c}\nTP{tp}" for c, tp in zip(agg["config"], agg["tp"], strict=True)]
    ax.bar(range(len(agg)), agg["accept_length"], color=[colors[c] for c in agg["config"]])
    ax.set_xticks(range(len(agg)), labels, fontsize=8)
    ax.set_ylabel("accepted tokens per step")
    ax.grid(True, axis="y", alpha=0.3)
    sets = ", ".join(sorted(table["prompt_set"].dropna().unique())) or "default"
    cap = f"No per-request rows were kept, so categories cannot be separated: mean over prompt set(s) {sets}."
    return Plot(key, title, _png(fig), cap)


def plot_scaling(table: pd.DataFrame, colors: dict[str, str]) -> Plot:
    key, title = "scaling", "Scaling TP1 → TP4 → TP8"
    t = table[table["tok_s"].notna()]
    if not len(t) or t["tp"].nunique() < 2:
        return Plot(
            key,
            title,
            None,
            "",
            "fewer than two TP sizes have throughput data (run with --tp all to see scaling)",
        )
    peak = t.loc[t.groupby(["config", "tp"])["tok_s"].idxmax()]
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    for cfg, g in peak.groupby("config", sort=True):
        g = g.sort_values("tp")
        if len(g) < 2:
            continue
        style = "--" if str(g["algorithm"].iloc[0]).lower() == "none" else "-"
        ax.plot(g["tp"], g["tok_s"], style, marker="o", color=colors[cfg], label=cfg)
        for _, r in g.iterrows():
            ax.annotate(
                f"c{int(r['concurrency'])}",
                (r["tp"], r["tok_s"]),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
                color="#555555",
            )
    tps = sorted(peak["tp"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(tps, [str(x) for x in tps])
    ax.minorticks_off()
    ax.set_xlabel("TP size (GPUs)")
    ax.set_ylabel("peak output tokens/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend([ax])
    cap = (
        "Each config's best throughput over the concurrencies it ran at each TP size (label = that "
        "concurrency). Only configs run at two or more TP sizes are drawn."
    )
    return Plot(key, title, _png(fig), cap)


def energy_table(res: Results) -> pd.DataFrame:
    """J/token per (TP, config, concurrency): mean over repeats and its bootstrap interval over repeats
    (``bootstrap.mean_of_repeats``), from the points frame (one config per host with several hosts)."""
    cols = [
        "tp",
        "config",
        "algorithm",
        "concurrency",
        "j_per_token",
        "lo",
        "hi",
        "n",
        "flagged",
        "simulated",
    ]
    pts = res.points
    if not len(pts) or pts["j_per_token"].isna().all():
        return pd.DataFrame(columns=cols)
    pts = by_host(pts[pts["j_per_token"].notna()], several_hosts(res))
    rows = []
    for (tp, cfg, conc), g in pts.groupby(["tp", "config", "concurrency"], sort=True, dropna=False):
        est = bootstrap.mean_of_repeats(
            list(g["j_per_token"].astype(float)), label=f"energy|{tp}|{cfg}|{conc}"
        )
        flags = g["telemetry_flags"].astype(object).fillna("").astype(str)
        rows.append(
            {
                "tp": tp,
                "config": cfg,
                "algorithm": g["algorithm"].iloc[0],
                "concurrency": conc,
                "j_per_token": est.value,
                "lo": est.ci_low,
                "hi": est.ci_high,
                "n": len(g),
                "flagged": bool(flags.str.contains("throttled|not_steady|gaps|missing_gpu").any()),
                "simulated": bool(g["simulated"].any()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def plot_energy(res: Results, colors: dict[str, str]) -> Plot:
    key, title = "energy", "Energy per output token"
    t = energy_table(res)
    if not len(t):
        return Plot(key, title, None, "", "no point has GPU telemetry with an energy figure")
    fig, axes = _grouped_bars(t.rename(columns={"j_per_token": "value"}), colors, "J / output token")
    for ax in axes:
        ax.set_ylim(bottom=0)
    _legend(axes)
    cap = (
        "GPU energy over each repeat's measured window (board power of the config's GPUs, trapezoid over "
        "the nvidia-smi samples) per output token, mean over repeats; whiskers = 95% bootstrap CI over "
        "repeats. Hatched bars: a repeat was throttled, never reached steady state or has sample gaps."
    )
    if t["simulated"].any():
        cap += " SIMULATED: power comes from the stand-in's power model, not from GPUs."
    return Plot(key, title, _png(fig), cap)


SERIES_PANELS = (  # (label, y axis, what each line is)
    ("running / queued requests", "requests"),
    ("KV usage", "share of the KV pool"),
    ("power (GPUs summed)", "W"),
    ("SM clock (mean of the GPUs)", "MHz"),
)


def _point_series(raw: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """A point's series over its measured window, time from the window's start (s)."""
    start, end = float(raw["window"]["start"]), float(raw["window"]["end"])
    server = telemetry.server_series(raw)

    def pick(cands: Any) -> list[tuple[float, float]]:
        return telemetry.pick(server, cands)[1]

    def gpu_total(column: str, mean: bool) -> list[tuple[float, float]]:
        per_gpu = telemetry.gpu_series(raw, column)
        if not per_gpu:
            return []
        # Each GPU's samples on a common time base (the first GPU's), linear between its own samples.
        base = [t for t, _ in next(iter(per_gpu.values())) if start <= t <= end]
        out = []
        for t in base:
            vals = [ser.value_at(s, t) for s in per_gpu.values()]
            total = sum(v for v in vals if v is not None)
            out.append((t, total / len(vals) if mean else total))
        return out

    def rel(s: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return [(t - start, v) for t, v in s if start <= t <= end]

    return {
        "running": rel(pick(telemetry.RUNNING)),
        "queued": rel(pick(telemetry.QUEUED)),
        "kv": rel(pick(telemetry.KV_USAGE)),
        "power": rel(gpu_total("power_w", mean=False)),
        "clock": rel(gpu_total("sm_clock_mhz", mean=True)),
    }


def plot_series(res: Results) -> list[Plot]:
    """Per attempt with telemetry, its points' series over the measured window (first repeat of each
    level): running and queued requests, KV usage, power, SM clock."""
    pts = res.points
    if not len(pts) or pts["telemetry_flags"].isna().all():
        return []
    attempts = res.attempts.set_index(["run_id", "host", "instance"])
    multi = several_hosts(res)
    multi_run = res.runs["run_id"].nunique() > 1
    plots = []
    for (run_id, host, instance), g in pts[pts["telemetry_flags"].notna()].groupby(
        ["run_id", "host", "instance"], sort=True
    ):
        record_path = Path(str(attempts.loc[(run_id, host, instance), "record_path"]))
        first = g.sort_values("repeat").groupby("point", sort=False).head(1).sort_values("concurrency")
        loaded = []
        for r in first.itertuples():
            try:
                raw = columnar.read_telemetry(record_path.parent / "points", f"{r.point}-r{r.repeat}")
            except RecordError:
                raw = None
            if raw is not None and isinstance(raw.get("window"), dict):
                loaded.append((r, _point_series(raw)))
        if not loaded:
            continue
        fig = Figure(figsize=(9.0, 7.2))
        axes = [fig.add_subplot(4, 1, i + 1) for i in range(4)]
        cmap = matplotlib_cmap(len(loaded))
        for i, (r, series) in enumerate(loaded):
            flags = f" ({r.telemetry_flags})" if r.telemetry_flags else ""
            label, color = f"{r.point} r{r.repeat}{flags}", cmap[i]
            for ax, key in zip(axes, ("running", "kv", "power", "clock"), strict=True):
                xy = series[key]
                if xy:
                    ax.plot([x for x, _ in xy], [y for _, y in xy], color=color, lw=1.3, label=label)
            if series["queued"]:
                xy = series["queued"]
                axes[0].plot([x for x, _ in xy], [y for _, y in xy], color=color, lw=1.0, ls=":")
        for ax, (name, unit) in zip(axes, SERIES_PANELS, strict=True):
            ax.set_title(name, fontsize=9, loc="left")
            ax.set_ylabel(unit, fontsize=8)
            ax.grid(True, alpha=0.3)
        axes[-1].set_xlabel("seconds since the measured window began")
        fig.tight_layout()
        _legend(axes, sort=False)
        name = f"{instance}{HOST_SEP}{host}" if multi else str(instance)
        parts = [*([run_id] if multi_run else []), *([host] if multi else []), instance]
        key = "telemetry-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(map(str, parts)))
        if multi_run:
            name += f" (run {run_id})"
        sim = " SIMULATED: from the stand-in." if bool(g["simulated"].any()) else ""
        cap = (
            "Each level's first repeat over its measured window: running requests (solid) and queued "
            "(dotted), KV pool usage, board power summed over the GPUs, mean SM clock. Flags in the legend "
            f'(docs/records.md, "Telemetry").{sim}'
        )
        plots.append(Plot(key, f"Telemetry of {name}", _png(fig), cap))
    return plots


def matplotlib_cmap(n: int) -> list[Any]:
    """``n`` colours from light to dark, one per load level."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.1 + 0.8 * i / max(n - 1, 1)) for i in range(n)]


def plot_capacity(res: Results) -> Plot:
    key, title = "capacity", "Capacity: memory split per GPU (capacity plan)"
    rows = []
    for rec in res.records:
        split = memory_split(rec.plan or {})
        if split:
            rows.append(
                (
                    f"{rec.instance}" + (f"{HOST_SEP}{rec.host}" if several_hosts(res) else ""),
                    split,
                    rec.outcome,
                )
            )
    if not rows:
        return Plot(key, title, None, "", "no attempt carries a capacity plan (no plan was made)")
    rows.sort(key=lambda r: r[0])
    fig = Figure(figsize=(9.5, 0.42 * len(rows) + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    for i, (_label, split, _o) in enumerate(rows):
        left = 0.0
        for part, color in MEMORY_PARTS:
            v = split.get(part, 0.0)
            ax.barh(i, v, left=left, color=color, edgecolor="white", lw=0.5, label=part if i == 0 else None)
            if v >= 4:
                ax.text(left + v / 2, i, f"{v:.0f}", ha="center", va="center", fontsize=7, color="#222222")
            left += v
    ax.set_yticks(
        range(len(rows)), [f"{r[0]}{'' if r[2] == 'ok' else ' (' + r[2] + ')'}" for r in rows], fontsize=8
    )
    ax.invert_yaxis()
    ax.set_xlabel("GiB per GPU")
    ax.grid(True, axis="x", alpha=0.3)
    _legend([ax], sort=False)
    cap = (
        "Predicted by the capacity planner before each start: weights (target + draft), KV cache (target + "
        "draft), Mamba conv/SSM state, the speculative decoding reservation, CUDA graphs, what is left "
        "for activations, and the CUDA context. Numbers inside bars are GiB."
    )
    return Plot(key, title, _png(fig), cap)


# -- HTML -----------------------------------------------------------------------------------------
CSS = """
body{font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f;
background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:26px;margin:8px 0 4px}
h2{font-size:20px;margin:34px 0 8px;border-bottom:2px solid #dde1e6;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}
.sub{color:#555;margin:0 0 14px}
.banner{background:#b3261e;color:#fff;padding:12px 18px;font-weight:600;font-size:16px;border-radius:6px;
margin:14px 0}
.banner small{display:block;font-weight:400;font-size:13px;opacity:.95}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:22px}.card span{color:#555;font-size:13px}
.ok{color:#1b7f3b}.bad{color:#b3261e}.warn{color:#9a6700}
.wide{overflow-x:auto;margin:6px 0 12px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%}
th,td{border:1px solid #dde1e6;padding:4px 7px;text-align:right;vertical-align:top;white-space:nowrap}
td.l,th.l{text-align:left}td.w{white-space:normal;text-align:left;min-width:220px}
th{background:#eef1f4;text-align:center;white-space:normal}
tr.failed td{background:#fdecea}tr.skipped td{background:#fff6e0}tr.base td{background:#f3f6fb}
figure{background:#fff;border:1px solid #dde1e6;border-radius:8px;margin:10px 0;padding:10px}
figure img{max-width:100%;height:auto}figcaption{color:#444;font-size:13px;margin-top:6px}
.empty{color:#666;font-style:italic;background:#fff;border:1px dashed #c8ccd1;padding:10px;border-radius:6px}
ul.find li{margin:4px 0}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f0f2f4;padding:6px 8px;border-radius:4px;white-space:pre-wrap;margin:4px 0}
.note{font-size:13px;color:#444}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _img(plot: Plot) -> str:
    if plot.png is None:
        return f'<h3>{_e(plot.title)}</h3><p class="empty">Not shown: {_e(plot.empty_reason)}.</p>'
    data = base64.b64encode(plot.png).decode()
    return (
        f'<figure id="fig-{plot.key}"><h3>{_e(plot.title)}</h3>'
        f'<img alt="{_e(plot.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(plot.caption)}</figcaption></figure>"
    )


def _html_table(
    rows: list[dict[str, str]],
    row_classes: list[str] | None = None,
    left: Sequence[str] = (),
    wrap: Sequence[str] = ("outcome",),
) -> str:
    if not rows:
        return '<p class="empty">No rows.</p>'
    cols = list(rows[0])
    head = "".join(f'<th class="{"l" if c in left else ""}">{_e(c)}</th>' for c in cols)
    body = []
    for i, r in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = "".join(
            f'<td class="{"w" if c in wrap else "l" if c in left else ""}">{_e(r.get(c, ""))}</td>'
            for c in cols
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    # A table wider than the column scrolls inside its own box; the page never scrolls sideways.
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="wide">{table}</div>'


def _flag(key: Any) -> str:
    """A launch_server flag from a ServerArgs field name or an already spelled flag."""
    k = str(key)
    return k if k.startswith("-") else "--" + k.replace("_", "-")


def _recommendation(att: dict[str, Any]) -> str:
    parts = []
    recs = att.get("recommendations") or []
    for r in recs[:2]:
        flags = " ".join(f"{_flag(k)} {v}" for k, v in (r.get("flags") or {}).items())
        slots = r.get("max_running_requests")
        kv = r.get("max_total_num_tokens")
        why = r.get("why") or ""
        text = f"Planner recommends {flags}" if flags else "Planner recommendation"
        if isinstance(kv, int):
            text += f" → {slots} request slots, {kv:,} KV tokens"
        parts.append(text + (f" ({why})." if why else "."))
    advice = CAUSE_ADVICE.get(str(att.get("cause") or ""), "")
    if advice:
        parts.append(advice)
    if not parts:
        parts.append("Read journal.log and unit.service beside the record.")
    return " ".join(parts)


CUT_ADVICE = (
    "Bring the host back, then run sglbench run again: the run resumes in place, keeps every attempt "
    "recorded on every host and measures this one again (its committed points are reused when their hash "
    "matches)."
)


def _cut_row_html(cut: dict[str, Any]) -> str:
    """A failures-table row for an attempt that began and was never recorded."""
    n = int(cut.get("points_committed") or 0)
    return (
        f'<tr class="failed"><td class="l"><b>{_e(cut["instance"])}</b>{_e(HOST_SEP + str(cut["host"]))}<br>'
        f'<span class="note">TP {_e(cut["tp"])}</span></td>'
        f'<td class="l">{events.CUT}</td><td class="l">{_e(cut.get("phase") or "-")}: '
        f"<b>{_e(cut.get('reason') or 'unknown')}</b></td>"
        f'<td class="w">never recorded: not valid; {n} point(s) committed before, kept for the resume</td>'
        f'<td class="w">{_e(CUT_ADVICE)}</td></tr>'
    )


def failures_section(res: Results) -> str:
    bad = res.attempts[res.attempts["outcome"] != "ok"]
    if not len(bad) and not len(res.cut):
        return '<p class="ok">Every config attempt started, answered and was benchmarked.</p>'
    out = [
        '<table><thead><tr><th class="l">attempt</th><th class="l">outcome</th>'
        '<th class="l">phase: cause</th><th class="l">what happened</th><th class="l">what to do</th>'
        "</tr></thead><tbody>"
    ]
    for att in bad.sort_values(["tp", "config"]).to_dict("records"):
        lines = att.get("failure_lines") or []
        evidence = f"<pre>{_e(chr(10).join(lines[:4]))}</pre>" if lines else ""
        host = f"{HOST_SEP}{att['host']}" if several_hosts(res) else ""
        outcome = "planned skip" if att["outcome"] == "skipped" else "failed"
        out.append(
            f'<tr class="{att["outcome"]}"><td class="l"><b>{_e(att["instance"])}</b>{_e(host)}<br>'
            f'<span class="note">{_e(att["algorithm"])}, TP {_e(att["tp"])}</span></td>'
            f'<td class="l">{outcome}</td><td class="l">{_e(att.get("failure_phase") or "-")}: '
            f"<b>{_e(att.get('cause') or 'unknown')}</b></td>"
            f'<td class="w">{_e((att.get("failure_message") or "").strip()[:400])}{evidence}'
            f'<br><span class="note">record: {_e(att["record_path"])}</span></td>'
            f'<td class="w">{_e(_recommendation(att))}</td></tr>'
        )
    out += [_cut_row_html(cut) for cut in res.cut.sort_values(["tp", "host", "instance"]).to_dict("records")]
    out.append("</tbody></table>")
    return "".join(out)


def capacity_table(res: Results) -> str:
    rows, classes = [], []
    for a in res.attempts.sort_values(["tp", "config"]).to_dict("records"):
        kp, ko = a["kv_tokens_predicted"], a["kv_tokens_observed"]
        err = "-"
        if not _nan(kp) and not _nan(ko) and ko:
            err = f"{(float(kp) - float(ko)) / float(ko) * 100:+.1f}%"
        rows.append(
            {
                "attempt": a["instance"] + (f"{HOST_SEP}{a['host']}" if several_hosts(res) else ""),
                "outcome": a["outcome"],
                "KV tokens predicted": "-" if _nan(kp) else f"{int(kp):,}",
                "KV tokens observed": "-" if _nan(ko) else f"{int(ko):,}",
                "prediction error": err,
                "max running requests predicted": _fmt(a["max_running_requests_predicted"], ".0f"),
                "observed": _fmt(a["max_running_requests_observed"], ".0f"),
                "time to ready (s)": _fmt(a["time_to_ready_s"]),
            }
        )
        classes.append("" if a["outcome"] == "ok" else a["outcome"])
    return _html_table(rows, classes, left=("attempt", "outcome"))


def findings(res: Results, table: pd.DataFrame) -> list[str]:
    """Plain-language headline lines for the top of the page."""
    out = []
    pts = table[table["tok_s"].notna()]
    many = several_hosts(res)

    def on(row: Any) -> str:
        return f" on {row['host']}" if many else ""

    for tp in sorted(pts["tp"].unique()):
        sub = pts[pts["tp"] == tp]
        best = sub.loc[sub["tok_s"].idxmax()]
        line = (
            f"TP {tp}: highest throughput <b>{_e(best['config'])}</b>{_e(on(best))} at concurrency "
            f"{int(best['concurrency']) if not _nan(best['concurrency']) else '-'}: "
            f"{best['tok_s']:,.0f} tok/s"
        )
        if not _nan(best["speedup"]) and best["baseline"] != best["config"]:
            ci = ""
            if not _nan(best["speedup_ci_low"]):
                ci = f" (95% CI {best['speedup_ci_low']:.2f}–{best['speedup_ci_high']:.2f})"
            line += f", {best['speedup']:.2f}x the autoregressive baseline{ci}"
        out.append(line + ".")
        spec = sub[sub["speedup"].notna() & (sub["baseline"] != sub["config"])]
        if len(spec):
            slower = spec[spec["speedup_ci_high"] < 1]
            if len(slower):
                names = ", ".join(
                    sorted(
                        {
                            f"{r['config']}{on(r)} (c{int(r['concurrency'])})"
                            for r in slower.to_dict("records")
                        }
                    )
                )
                out.append(f"TP {tp}: slower than autoregressive beyond noise: {_e(names)}.")
    bad = res.attempts[res.attempts["outcome"] != "ok"]
    for a in bad.sort_values(["tp", "config"]).to_dict("records"):
        verb = "was skipped by the capacity plan" if a["outcome"] == "skipped" else "failed"
        cause = _e(a.get("cause") or "unknown")
        out.append(
            f'<span class="bad">{_e(a["instance"])}{_e(on(a))} {verb}</span>: {cause} — see Failures below.'
        )
    failing = table[table[lossless.COLUMN] == lossless.FAIL] if lossless.COLUMN in table else table[:0]
    for name in sorted(set(failing["config"])):
        out.append(
            f'<span class="bad">{_e(name)} is not lossless</span>: its output tokens differ from the '
            f"baseline's at temperature 0, so its speedup is not for the same output — see {LOSSLESS} below."
        )
    for line in dropped_lines(res):
        out.append(f'<span class="bad">Dropped out</span>: {_e(line)}.')
    if not len(pts):
        out.append(
            "No benchmark points were recorded in this run: the tables show start-up and capacity only."
        )
    return out


def _metric_legend() -> str:
    """``TTFT = time to first token, ITL = inter-token latency (p50 / p99)`` from the metric list."""
    shown = result_schema.table_metrics()
    stats = sorted({" / ".join(m.shown) for m in shown})
    return ", ".join(f"{m.label} = {m.meaning}" for m in shown) + f" ({'; '.join(stats)})"


def _banners(res: Results) -> list[str]:
    """The SIMULATED and CPU ENGINE banners, each when some attempt needs it."""
    a = res.attempts
    parts = []
    if res.simulated:
        n_sim = int(a["simulated"].sum())
        scope = "every attempt" if n_sim == len(a) else f"{n_sim} of {len(a)} attempts (marked SIM)"
        parts.append(
            '<div class="banner">SIMULATED DATA — not measured on real GPUs'
            f"<small>{scope} in this report ran against the SGLang stand-in (sim host). The numbers "
            "check the pipeline end to end; do not use them to choose a configuration.</small></div>"
        )
    if res.cpu_engine:
        n_cpu = int(a["cpu_engine"].sum())
        scope = "every attempt" if n_cpu == len(a) else f"{n_cpu} of {len(a)} attempts (marked CPU)"
        parts.append(
            '<div class="banner">CPU ENGINE — the real SGLang on a CPU, not GPU figures'
            f"<small>{scope} in this report ran against the real SGLang on its CPU engine (--device cpu; "
            "on the real-SGLang sim host: tiny random-weight models). The numbers check the pipeline "
            "against the real server; they are neither simulated nor GPU figures.</small></div>"
        )
    return parts


def _overview(res: Results, table: pd.DataFrame, title: str) -> list[str]:
    """Title, the run line, the outcome cards and the at-a-glance findings."""
    a = res.attempts
    n_ok, n_skip, n_fail = (int((a["outcome"] == o).sum()) for o in ("ok", "skipped", "failed"))
    hosts = host_list(res)
    runs = ", ".join(res.runs["run_id"])
    started = res.runs["started_at"].dropna()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(started.min()))) if len(started) else "-"
    n_requests = len(res.request_columns(REPORT_REQUEST_COLUMNS))
    return [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">Run {_e(runs)} · host(s) {_e(hosts)} · started {when} · '
        f"{len(a)} config attempts, {len(res.points)} benchmark points, {n_requests} requests</p>",
        '<div class="cards">'
        f'<div class="card"><b class="ok">{n_ok}</b><span>attempts ok</span></div>'
        f'<div class="card"><b class="warn">{n_skip}</b><span>skipped by the capacity plan</span></div>'
        f'<div class="card"><b class="bad">{n_fail}</b><span>failed to start or run</span></div>'
        f'<div class="card"><b>{table["tp"].nunique() if len(table) else 0}</b><span>TP phases</span></div>'
        "</div>",
        f"<h2>{GLANCE}</h2><ul class='find'>"
        + "".join(f"<li>{f}</li>" for f in findings(res, table))
        + "</ul>",
    ]


def _tables(table: pd.DataFrame) -> list[str]:
    """The summary table of each TP phase, failed/skipped/baseline rows marked."""
    parts = [
        f"<h2>{TABLES}</h2>",
        "<p class='note'>One row per config and concurrency. Output tok/s: mean over repeats [95% "
        "bootstrap CI]. Speedup: over the algorithm-none config of the same model at the same TP and "
        f"concurrency. {_metric_legend()}. Capacity: "
        "KV-cache tokens and max running requests, predicted by the planner / observed from the "
        "server.</p>",
    ]
    for tp, grp in table.groupby("tp", sort=True):
        classes = [
            "failed"
            if r.outcome == events.CUT
            else r.outcome
            if r.outcome in ("failed", "skipped")
            else "base"
            if r.baseline == r.config
            else ""
            for r in grp.itertuples()
        ]
        parts.append(f"<h3>TP {tp}</h3>")
        parts.append(
            _html_table(
                display_rows(grp), classes, left=("config", "algorithm", "outcome", "host", "run", "prompts")
            )
        )
    return parts


def _deploy(answers: Sequence[Answer]) -> list[str]:
    """The deploy table of each TP size, the break-even pairs behind it and each config's limit."""
    parts = [f"<h2>{DEPLOY}</h2>", f"<p class='note'>{_e(deploy_text.DEPLOY_NOTE)}</p>"]
    left = ("model", "prompts", "load", "deploy", "config", "baseline", "notes", "host", "run", "evidence")
    tps = sorted({r.tp for a in answers for r in a.breakeven.deploy})
    if not tps:
        parts.append('<p class="empty">No config has a measured load level: nothing to deploy.</p>')
    for tp in tps:
        parts.append(f"<h3>TP {tp}: deploy table</h3>")
        parts.append(_html_table(deploy_text.deploy_rows(answers, tp), left=left, wrap=("deploy", "notes")))
        pairs = deploy_text.pair_rows(answers, tp)
        if pairs:
            parts.append(f"<h3>TP {tp}: speculative vs baseline</h3>")
            parts.append(
                "<p class='note'>Speedup at each load with its 95% bootstrap CI; * = that side was not "
                "measured there and is interpolated in log load between its neighbouring levels.</p>"
            )
            parts.append(_html_table(pairs, left=left, wrap=("speedup by level [95% CI]",)))
    parts.append(f"<h3>{_e(deploy_text.LIMITS_HEADING)}</h3>")
    parts.append(f"<p class='note'>{_e(deploy_text.limits_note(answers))}</p>")
    parts.append(_html_table(deploy_text.limit_rows(answers), left=left, wrap=("evidence",)))
    return parts


def _figures(res: Results, plots: list[Plot], answers: Sequence[Answer]) -> list[str]:
    """The plot sections, the capacity table and the failures."""
    by_key = {p.key: p for p in plots}
    frontier_notes = [f"<p class='note'>{_e(line)}</p>" for line in deploy_text.knee_lines(answers)]
    return [
        f"<h2>{THROUGHPUT}</h2>",
        _img(by_key["throughput"]),
        _img(by_key["speedup"]),
        f"<h2>{BREAKEVEN}</h2>",
        _img(by_key["breakeven"]),
        f"<h2>{FRONTIER}</h2>",
        _img(by_key["frontier"]),
        *frontier_notes,
        f"<h2>{LATENCY}</h2>",
        _img(by_key["latency"]),
        f"<h2>{ACCEPTANCE}</h2>",
        _img(by_key["acceptance"]),
        *_acceptance_positions(res),
        *_turns(res),
        f"<h2>{SCALING}</h2>",
        _img(by_key["scaling"]),
        f"<h2>{TELEMETRY}</h2>",
        _img(by_key["energy"]),
        *[_img(p) for p in plots if p.key.startswith("telemetry-")],
        f"<h2>{CAPACITY}</h2>",
        _img(by_key["capacity"]),
        capacity_table(res),
        f"<h2>{FAILURES}</h2>",
        failures_section(res),
    ]


def _methods(res: Results) -> list[str]:
    """How the numbers were computed, and where the page came from."""
    return [
        f"<h2>{METHODS}</h2><ul class='note'>"
        "<li>Throughput is output tokens over the measured window of each repeat (warm-up excluded); "
        "the table shows the mean over repeats.</li>"
        f"<li>Intervals: seeded percentile bootstrap ({bootstrap.DEFAULT_BOOT} replicates, seed "
        f"{bootstrap.DEFAULT_SEED}) resampling repeats and, where per-request rows exist, requests within "
        "each repeat. Speedup intervals resample the config and its baseline independently. A single "
        "repeat without request rows has no interval.</li>"
        "<li>Points the load generator marked invalid (client could not keep up) are flagged in the "
        "outcome column.</li>"
        "<li>Failure causes come from the server journal (classified by sglbench) or the capacity "
        "plan; the record, unit file and journal of each attempt sit in the run directory.</li>"
        f"{_telemetry_method(res)}</ul>",
        f"<p class='note'>Generated by sglbench report from {_e(', '.join(res.runs['run_dir']))}. "
        "This file is self-contained: no scripts, no network.</p>",
    ]


def _telemetry_method(res: Results) -> str:
    """How the telemetry figures were computed, when any point has them."""
    if not len(res.points) or res.points["telemetry_flags"].isna().all():
        return ""
    return (
        "<li>Telemetry: GPU power, clocks and throttle reasons from nvidia-smi and the server's own "
        "counters, sampled on the GPU host around each point and cut exactly to its measured window "
        "(values interpolated at the edges). Energy is the trapezoid integral of board power over the "
        "window; steady state is MSER-5 on running requests; the host/controller clock offset and its "
        "uncertainty are recorded per point (docs/records.md, &quot;Telemetry&quot;).</li>"
    )


def _tables_by_tp(
    heading: str, note: str, table: pd.DataFrame, rows: Callable[[pd.DataFrame], Any], left: tuple[str, ...]
) -> list[str]:
    """A heading (``<h2>``/``<h3>`` markup), its note and one table of ``rows(group)`` per TP; nothing for an
    empty ``table``."""
    if not len(table):
        return []
    parts = [heading, f"<p class='note'>{_e(note)}</p>"]
    for tp, grp in table.groupby("tp", sort=True):
        parts.append(f"<h4>TP {tp}</h4>")
        parts.append(_html_table(rows(grp), left=left))
    return parts


def _acceptance_positions(res: Results) -> list[str]:
    """Acceptance per draft position, per point and per category, for configs whose server returned
    per-request acceptance histograms (nothing otherwise)."""
    positions = acceptance.position_table(acceptance.histograms(res))
    heading = f"<h3>{acceptance.HEADING}</h3>"
    left = ("config", "point", "category")
    return _tables_by_tp(heading, acceptance.NOTE, positions, acceptance.display_rows, left)


def _turns(res: Results) -> list[str]:
    """Multi-turn sessions by turn index (TTFT, cached share of the prompt), for attempts that sent
    session turns (nothing otherwise)."""
    heading, left = f"<h2>{turns.HEADING}</h2>", ("config", "point", "turn")
    return _tables_by_tp(heading, turns.NOTE, turns.turn_table(res), turns.display_rows, left)


def _lossless(gate: pd.DataFrame) -> list[str]:
    """The gate's verdict for every speculative config: share of requests matching the baseline's tokens
    exactly and where the others first diverge."""
    parts = [
        f"<h2>{LOSSLESS}</h2>",
        "<p class='note'>Each speculative config's output token ids compared request by request with the "
        "algorithm-none config of the same model and TP on the same host, same prompts, greedy sampling. "
        f"A config that does not match is marked '{lossless.MARK}' beside its speedup. Not applicable to "
        "sampled runs (temperature &gt; 0) or without token ids (native API only).</p>",
    ]
    if not len(gate):
        parts.append('<p class="empty">No speculative config finished: nothing to compare.</p>')
        return parts

    def pos(v: Any) -> str:
        return "-" if _nan(v) else str(int(v))

    rows = [
        {
            "config": str(g["config"]),
            "algorithm": str(g["algorithm"]),
            "TP": str(g["tp"]),
            "host": str(g["host"]),
            "baseline": str(g["baseline"] or "-"),
            lossless.HEADER: {"pass": "yes", "fail": "NO"}.get(g[lossless.COLUMN], "n/a"),
            "exact": f"{g['n_exact']}/{g['n_compared']}" if g["n_compared"] else "-",
            "first divergence min / p50 / max": " / ".join(
                pos(g[c]) for c in ("first_divergence_min", "first_divergence_p50", "first_divergence_max")
            ),
            "why n/a": str(g["reason"] or ""),
        }
        for g in gate.to_dict("records")
    ]
    classes = ["failed" if g[lossless.COLUMN] == lossless.FAIL else "" for g in gate.to_dict("records")]
    parts.append(_html_table(rows, classes, left=("config", "algorithm", "host", "baseline", "why n/a")))
    return parts


def build_html(
    res: Results, table: pd.DataFrame, plots: list[Plot], *, title: str, answers: Sequence[Answer] = ()
) -> str:
    gate = lossless.gate(res)
    head = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{CSS}</style></head><body><main>"
    )
    parts = [
        head,
        *_banners(res),
        *_overview(res, table, title),
        *_deploy(answers),
        *_tables(table),
        *_lossless(gate),
        *_figures(res, plots, answers),
        *_methods(res),
        "</main></body></html>",
    ]
    return "\n".join(parts)


def render(res: Results, out: Path, *, title: str | None = None) -> list[Path]:
    """Write ``out`` (HTML) and the PNGs beside it; return the written paths."""
    table = summary_table(res)
    answers = store.answers(res, prog="report", table=table)
    series = by_host(table, several_hosts(res))
    colors = config_colors([str(c) for c in series["config"].dropna()])
    # The deployment answer's plots name plain configs (each answer is one host's).
    deploy_colors = config_colors(list(res.attempts["config"]) if len(res.attempts) else [])
    plots = [
        plot_throughput(series, colors),
        plot_speedup(series, colors),
        plot_breakeven(answers, deploy_colors),
        plot_frontier(answers, deploy_colors),
        plot_latency(res, series, colors),
        plot_acceptance(res, series, colors),
        plot_scaling(series, colors),
        plot_energy(res, colors),
        *plot_series(res),
        plot_capacity(res),
    ]
    runs = ", ".join(res.runs["run_id"])
    doc = build_html(res, table, plots, title=title or f"sglbench report — {runs}", answers=answers)
    out.parent.mkdir(parents=True, exist_ok=True)
    files = [(out.with_name(f"{out.stem}-{p.key}.png"), p.png) for p in plots if p.png is not None]
    # All or nothing (outfiles.write_files): the PNGs, then the page that embeds them.
    outfiles.write_files([*files, (out, doc.encode("utf-8"))])
    return [out, *(path for path, _ in files)]


def run_report(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() not in (".html", ".htm"):
        print(f"sglbench report: error: -o {args.out}: give an .html file name", file=sys.stderr)
        return 2
    res = load_or_exit(args.run_dirs, "report")
    if res is None:
        return 2
    try:
        outfiles.prepare_out(args.out, example="report.html")
        written = render(res, args.out, title=args.title)
    except (outfiles.OutputError, OSError, RecordError) as exc:  # RecordError: damaged request rows
        print(f"sglbench report: error: {exc}", file=sys.stderr)
        return 2
    if res.simulated:
        print("sglbench report: SIMULATED data (sim host) — the report says so at the top")
    if res.cpu_engine:
        print("sglbench report: CPU ENGINE data (real SGLang, --device cpu) — the report says so at the top")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
