"""The deployment answer as text: the deploy table per TP (first in ``sglbench summarize``), the break-even
pairs, the limits and the frontier, as markdown or aligned columns (``sglbench.tables``); and the
cells the report's HTML tables share with them."""

from __future__ import annotations

from collections.abc import Sequence

from sglbench import tables
from sglbench.deploy import schema
from sglbench.deploy.answer import Answer
from sglbench.deploy.levels import short_level
from sglbench.deploy.limits import LABELS, limit_text

DEPLOY_HEADING = "Deployment answer"
LIMITS_HEADING = "Limits: why each config's highest load is where it is"
FRONTIER_HEADING = "Per-GPU Pareto frontier"
DEPLOY_NOTE = (
    "Per TP size: which config to run up to which load. A speculative config is chosen at a level only "
    "when its speedup's 95% bootstrap CI lies above 1 there (and it meets the declared SLO); otherwise the "
    "autoregressive baseline. Break-even: the load where the quoted config's speedup falls to 1, "
    "interpolated in log load, with its 95% CI from the bootstrap replicates (an open bound lies beyond "
    "the levels compared)."
)


def model_name(path: str | None) -> str:
    return "-" if not path else path.rstrip("/").rsplit("/", 1)[-1]


def _num(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def crossover_text(c: schema.Crossover | None, load: str) -> str:
    """``5.3 [4.1, 7.0]``, ``>8 [5.2, >8]``, ``<1``: a crossover and its interval in load units."""
    if c is None or c.status == "no common levels":
        return "-"
    lo_end = short_level(load, c.range_low)
    hi_end = short_level(load, c.range_high)
    e = c.estimate
    if c.status == "crosses":
        head = short_level(load, e.value)
    elif c.status == "faster throughout":
        head = f">{hi_end}"
    else:
        head = f"<{lo_end}"
    ends = {"below": f"<{lo_end}", "above": f">{hi_end}"}

    def bound(value: float | None, beyond: str) -> str | None:
        return ends[beyond] if beyond else short_level(load, value) if value is not None else None

    lo, hi = bound(e.ci_low, e.ci_low_beyond), bound(e.ci_high, e.ci_high_beyond)
    if lo is None or hi is None or (e.ci_low_beyond and e.ci_low_beyond == e.ci_high_beyond):
        return head  # no interval, or every replicate beyond the same end: the head says it all
    return f"{head} [{lo}, {hi}]"


def _speedups(p: schema.Pair) -> str:
    cells = []
    for lv in p.levels:
        ci = f" [{_num(lv.ci_low)}, {_num(lv.ci_high)}]" if lv.ci_low is not None else ""
        mark = "" if lv.measured == "both" else "*"
        cells.append(f"{short_level(p.load, lv.level)}{mark}: {_num(lv.speedup)}x{ci}")
    return "; ".join(cells)


def _where(a: Answer, host: str, multi_run: bool, multi_host: bool) -> dict[str, str]:
    d = {}
    if multi_run:
        d["run"] = a.run_id
    if multi_host:
        d["host"] = host
    return d


def _multi(answers: Sequence[Answer]) -> tuple[bool, bool]:
    hosts = {r.host for a in answers for r in a.breakeven.deploy} | {
        g.host for a in answers for g in a.frontier.groups
    }
    return len(answers) > 1, len(hosts) > 1


def deploy_rows(answers: Sequence[Answer], tp: int) -> list[dict[str, str]]:
    multi_run, multi_host = _multi(answers)
    rows = []
    for a in answers:
        for r in a.breakeven.deploy:
            if r.tp != tp:
                continue
            d = _where(a, r.host, multi_run, multi_host)
            d.update(
                model=model_name(r.model_path),
                prompts=r.prompt_set,
                load=r.load,
                deploy=r.text,
                **{
                    "break-even [95% CI]": (f"{r.breakeven}: " if r.breakeven else "")
                    + crossover_text(r.crossover, r.load)
                },
                notes="; ".join(r.notes),
            )
            rows.append(d)
    return rows


def pair_rows(answers: Sequence[Answer], tp: int) -> list[dict[str, str]]:
    multi_run, multi_host = _multi(answers)
    rows = []
    for a in answers:
        for p in a.breakeven.pairs:
            if p.tp != tp:
                continue
            d = _where(a, p.host, multi_run, multi_host)
            d.update(
                model=model_name(p.model_path),
                prompts=p.prompt_set,
                config=p.config,
                baseline=p.baseline,
                **{
                    "speedup by level [95% CI]": _speedups(p),
                    "faster (CI > 1) up to": short_level(p.load, p.faster_up_to),
                    "break-even [95% CI]": crossover_text(p.crossover, p.load),
                },
            )
            rows.append(d)
    return rows


def limit_rows(answers: Sequence[Answer]) -> list[dict[str, str]]:
    multi_run, multi_host = _multi(answers)
    rows = []
    for a in answers:
        for lim in sorted(a.limits.limits, key=lambda x: (x.tp, x.host, str(x.model_path), x.config)):
            d = _where(a, lim.host, multi_run, multi_host)
            d.update(
                TP=str(lim.tp),
                config=lim.config,
                prompts=lim.prompt_set,
                limit=limit_text(lim),
                evidence="; ".join(lim.evidence),
            )
            rows.append(d)
    return rows


def frontier_rows(answers: Sequence[Answer]) -> list[dict[str, str]]:
    multi_run, multi_host = _multi(answers)
    rows = []
    for a in answers:
        for g in a.frontier.groups:
            front = sorted((p for p in g.points if p.on_frontier), key=lambda p: -(p.tok_s_per_user or 0.0))
            for p in front:
                d = _where(a, g.host, multi_run, multi_host)
                ci = (
                    f" [{p.tok_s_per_gpu_ci_low:.1f}, {p.tok_s_per_gpu_ci_high:.1f}]"
                    if p.tok_s_per_gpu_ci_low is not None and p.tok_s_per_gpu_ci_high is not None
                    else ""
                )
                d.update(
                    model=model_name(g.model_path),
                    prompts=g.prompt_set,
                    config=p.config,
                    TP=str(p.tp),
                    level=f"{p.point}",
                    **{
                        "tok/s per GPU [95% CI]": f"{p.tok_s_per_gpu:.1f}{ci}",
                        "tok/s per user": _num(p.tok_s_per_user, ".1f"),
                        "E2E p50 ms": _num(p.e2e_ms_p50, ".0f"),
                        "knee": "knee" if p.knee else "",
                        "vs TP1 replicas": _vs_tp1(p),
                    },
                )
                rows.append(d)
    return rows


def _vs_tp1(p: schema.FrontierPoint) -> str:
    if p.tp == 1:
        return "-"
    if p.vs_tp1_replicas is None:
        return "no TP1 point this fast per user"
    return f"{p.vs_tp1_replicas:.2f}x"


def knee_lines(answers: Sequence[Answer]) -> list[str]:
    """One line per frontier group: its knee, or why it has none."""
    out = []
    for a in answers:
        for g in a.frontier.groups:
            where = f"{model_name(g.model_path)}, {g.prompt_set}" + (
                f", {g.host}" if _multi(answers)[1] else ""
            )
            k = next((p for p in g.points if p.knee), None)
            if k is None:
                out.append(f"Knee ({where}): none, {g.knee_reason}.")
            else:
                out.append(
                    f"Knee ({where}): {k.config} TP{k.tp} {k.point}, {k.tok_s_per_gpu:.1f} tok/s per GPU at "
                    f"{k.tok_s_per_user or 0:.1f} tok/s per user."
                )
    return out


def _tps(answers: Sequence[Answer]) -> list[int]:
    return sorted({r.tp for a in answers for r in a.breakeven.deploy})


def deploy_section(answers: Sequence[Answer], fmt: str) -> str:
    """The deploy table per TP and the break-even pairs behind it."""
    h2, h3 = ("## ", "### ") if fmt == "md" else ("", "")
    parts = [f"{h2}{DEPLOY_HEADING}\n", DEPLOY_NOTE + "\n"]
    if not _tps(answers):
        parts.append("No config has a measured load level: nothing to deploy.\n")
    for tp in _tps(answers):
        parts.append(f"{h3}TP {tp}: deploy table\n")
        parts.append(tables.render(deploy_rows(answers, tp), fmt) + "\n")
        pairs = pair_rows(answers, tp)
        if pairs:
            parts.append(f"{h3}TP {tp}: speculative vs baseline (* = one side interpolated)\n")
            parts.append(tables.render(pairs, fmt) + "\n")
    return "\n".join(parts)


def limits_note(answers: Sequence[Answer]) -> str:
    declared = sorted(
        {f"{k} <= {v:g}" for a in answers for lim in a.limits.limits for k, v in lim.slo.declared.items()}
    )
    slo = ", ".join(declared) if declared else "none declared (bench.slo)"
    return (
        f"Labels: {', '.join(LABELS)} (docs/deploy.md). SLOs: {slo}. The labels come from the client's "
        "figures and the server's slots; the server's own counters during each point are in the telemetry."
    )


def limits_section(answers: Sequence[Answer], fmt: str) -> str:
    h2 = "## " if fmt == "md" else ""
    body = tables.render(limit_rows(answers), fmt)
    return "\n".join([f"{h2}{LIMITS_HEADING}\n", limits_note(answers) + "\n", body, ""])


def frontier_section(answers: Sequence[Answer], fmt: str) -> str:
    h2 = "## " if fmt == "md" else ""
    rule = next((g.knee_rule for a in answers for g in a.frontier.groups), "")
    note = (
        "Frontier points only (no other point has both more tok/s per GPU and more tok/s per user). "
        f"tok/s per user = 1000 / TPOT p50. Knee: {rule}. vs TP1 replicas: per-GPU rate over that of the "
        "best TP1 point reaching the same per-user rate."
    )
    knees = "\n".join(knee_lines(answers))
    body = tables.render(frontier_rows(answers), fmt)
    return "\n".join([f"{h2}{FRONTIER_HEADING}\n", note + "\n", body + "\n", knees, ""])
