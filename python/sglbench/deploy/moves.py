"""What moved in the deployment answer between two runs (``sglbench compare``): crossovers and limits.

- **Crossover**: pairs are matched on host, TP, config, baseline, model, prompt set and load mode (the
  host left out when the runs used different host names, as the cell comparison does). B's crossover
  moved when it lies outside A's 95% interval. A crossover beyond the range compared is the open interval
  it stands for (above the highest level, or below the lowest): it moved when that whole interval lies
  outside A's interval. Without an interval in A nothing is flagged.
- **Limit**: series matched the same way. A limit holds from its level up to the next level A measured
  (its interval; unbounded above when A measured nothing higher): B's limit moved when its level lies
  outside that interval, or when its label changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sglbench import tables
from sglbench.deploy import schema
from sglbench.deploy.answer import Answer
from sglbench.deploy.levels import level_text
from sglbench.deploy.limits import holds_at
from sglbench.deploy.text import crossover_text, model_name

HEADING = "Deployment answer: what moved beyond its interval"


@dataclass(frozen=True)
class Move:
    kind: str  # "crossover" or "limit"
    tp: int
    config: str
    prompt_set: str
    model_path: str | None
    was: str
    now: str
    why: str


def _span(c: schema.Crossover) -> tuple[float, float] | None:
    """The loads a crossover stands for: its estimate, or the open range beyond the levels compared."""
    e = c.estimate
    if c.status == "crosses" and e.value is not None:
        return e.value, e.value
    if c.status == "faster throughout" and c.range_high is not None:
        return c.range_high, math.inf
    if c.status == "not faster at the lowest level" and c.range_low is not None:
        return 0.0, c.range_low
    return None


def _interval(c: schema.Crossover) -> tuple[float, float] | None:
    e = c.estimate
    lo = e.ci_low if e.ci_low is not None else (0.0 if e.ci_low_beyond == "below" else None)
    hi = e.ci_high if e.ci_high is not None else (math.inf if e.ci_high_beyond == "above" else None)
    if e.ci_low is None and e.ci_low_beyond == "above":
        lo = c.range_high
    if e.ci_high is None and e.ci_high_beyond == "below":
        hi = c.range_low
    return None if lo is None or hi is None else (lo, hi)


def crossover_moved(a: schema.Crossover, b: schema.Crossover) -> bool:
    span, ci = _span(b), _interval(a)
    if span is None or ci is None:
        return False
    return span[1] < ci[0] or span[0] > ci[1]


def _keys(host: str, use_host: bool, *rest: object) -> tuple[object, ...]:
    return (host if use_host else None, *rest)


def moves(a: Sequence[Answer], b: Sequence[Answer], *, use_host: bool) -> list[Move]:
    out: list[Move] = []
    pa = {
        _keys(p.host, use_host, p.tp, p.config, p.baseline, p.model_path, p.prompt_set, p.load): p
        for x in a
        for p in x.breakeven.pairs
    }
    for x in b:
        for p in x.breakeven.pairs:
            k = _keys(p.host, use_host, p.tp, p.config, p.baseline, p.model_path, p.prompt_set, p.load)
            old = pa.get(k)
            if old is not None and crossover_moved(old.crossover, p.crossover):
                out.append(
                    Move(
                        "crossover",
                        p.tp,
                        p.config,
                        p.prompt_set,
                        p.model_path,
                        crossover_text(old.crossover, p.load),
                        crossover_text(p.crossover, p.load),
                        f"B's break-even against {p.baseline} lies outside A's 95% CI",
                    )
                )
    la = {
        _keys(lim.host, use_host, lim.tp, lim.config, lim.model_path, lim.prompt_set, lim.load): lim
        for x in a
        for lim in x.limits.limits
    }
    for x in b:
        for lim in x.limits.limits:
            k = _keys(lim.host, use_host, lim.tp, lim.config, lim.model_path, lim.prompt_set, lim.load)
            old = la.get(k)
            if old is None:
                continue
            level = lim.limit_level if lim.limit_level is not None else 0.0
            why = []
            if not holds_at(old, level):
                hi = "and up" if old.next_level is None else f"up to {old.next_level:g}"
                why.append(f"limit outside A's interval ({_lvl(old)} {hi})")
            if old.label != lim.label:
                why.append(f"label {old.label} -> {lim.label}")
            if why:
                out.append(
                    Move(
                        "limit",
                        lim.tp,
                        lim.config,
                        lim.prompt_set,
                        lim.model_path,
                        f"{old.label} at {_lvl(old)}",
                        f"{lim.label} at {_lvl(lim)}",
                        "; ".join(why),
                    )
                )
    return out


def _lvl(lim: schema.Limit) -> str:
    return (
        level_text(lim.load, lim.limit_level) if lim.limit_level is not None else "none (SLO fails at once)"
    )


def section(found: Sequence[Move]) -> str:
    """Markdown lines for ``sglbench compare``."""
    lines = [f"## {HEADING}\n"]
    if not found:
        lines.append("No crossover or limit moved beyond its interval.")
        return "\n".join(lines)
    rows = [
        {
            "what": m.kind,
            "TP": str(m.tp),
            "config": m.config,
            "model": model_name(m.model_path),
            "prompts": m.prompt_set,
            "A": m.was,
            "B": m.now,
            "why": m.why,
        }
        for m in found
    ]
    lines.append(tables.markdown(rows))
    return "\n".join(lines)
