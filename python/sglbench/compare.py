"""``sglbench compare RUN_A RUN_B``: what changed between two campaigns, regressions beyond noise flagged.

Cells are matched on (host, TP, config, prompt set, load point). The host is left out of the match only
when each run has one host and they differ (the same campaign on a renamed or another host); with
several hosts in a run, cells are matched per host and two hosts' figures are never pooled into one
cell. For each matched cell with throughput in both runs:

- ratio = mean tok/s in B / mean tok/s in A, with a 95% percentile-bootstrap interval from independent
  replicates of both runs (same method as the summary, :mod:`sglbench.bootstrap`);
- **regression** when the whole interval lies below 1 and the ratio is below ``1 - min_effect``
  (default 2%): slower beyond noise and by a margin worth reading;
- **improvement** symmetrically (interval above 1, ratio above ``1 + min_effect``);
- otherwise **unchanged** (within noise). Without a noise estimate (one repeat, no request rows) the
  interval is unknown and only a change beyond ``--no-ci-threshold`` (default 10%) is flagged.

Outcome changes are reported too: ok in A but failed or skipped in B is a regression; the reverse is
an improvement; a cell only in B is ``new``; a cell measured in A that is missing from B (the config or
load point vanished) is a regression (``gone``). After the table (markdown only), the deployment
answer's break-even crossovers and limits that moved beyond their interval (docs/deploy.md); they do
not change the exit code. Exit code: 1 when any regression is flagged, 0 otherwise, 2 on unreadable
input.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import pandas as pd

from sglbench import bootstrap, events
from sglbench.records import RecordError
from sglbench.results import Results
from sglbench.summarize import CELL_KEYS, _samples, check_seed, fmt_ci, load_or_exit

MATCH_KEYS = ["host", "tp", "config", "prompt_set", "point"]
DEFAULT_MIN_EFFECT = 0.02
DEFAULT_NO_CI_THRESHOLD = 0.10
GONE = "regression: gone (in A, not in B)"


def _cells(res: Results, keys: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    samples = _samples(res.points, res.request_tokens()) if len(res.points) else {}
    conc = {}
    for row in res.points.itertuples(index=False):
        conc[(row.config, row.tp, row.point)] = row.concurrency
    for full_key, s in samples.items():
        d = dict(zip(CELL_KEYS, full_key, strict=True))
        k = tuple(d[c] for c in keys)
        cell = out.setdefault(k, {"samples": [], "outcome": "ok"})
        cell["samples"].extend(s)
        cell["concurrency"] = conc.get((d["config"], d["tp"], d["point"]))
    return out


def _outcomes(res: Results, keys: list[str]) -> dict[tuple[Any, ...], tuple[str, Any]]:
    """(outcome, cause) per attempt key; an attempt cut when its host dropped out is ``cut``."""
    out = {
        tuple(att[c] for c in keys): (att["outcome"], att["cause"]) for att in res.attempts.to_dict("records")
    }
    for cut in res.cut.to_dict("records"):
        out.setdefault(tuple(cut[c] for c in keys), (events.CUT, cut["reason"]))
    return out


COLUMNS_AFTER_KEYS = [
    "concurrency",
    "outcome_a",
    "outcome_b",
    "tok_s_a",
    "tok_s_b",
    "ratio",
    "ratio_ci_low",
    "ratio_ci_high",
    "status",
]
Outcome = tuple[Any, Any]  # (outcome, cause) of one attempt; (None, None) when the run has none


def _cell_row(
    d: dict[str, Any],
    x: dict[str, Any] | None,
    y: dict[str, Any] | None,
    out_a: Outcome,
    out_b: Outcome,
    *,
    min_effect: float,
    no_ci_threshold: float,
    seed: int,
    n_boot: int,
) -> dict[str, Any]:
    """One matched cell with points in A, B or both: tok/s, the B/A ratio with its CI and the status.

    ``d`` holds the cell's match keys (and only them) on entry; the row is built in it."""
    label = "compare|" + "|".join(map(str, d.values()))
    d["concurrency"] = (y or x or {}).get("concurrency")
    d["outcome_a"], d["outcome_b"] = out_a[0], out_b[0]
    sa, sb = (x or {}).get("samples") or [], (y or {}).get("samples") or []
    d["tok_s_a"] = sum(s.throughput for s in sa) / len(sa) if sa else math.nan
    d["tok_s_b"] = sum(s.throughput for s in sb) / len(sb) if sb else math.nan
    d["ratio"] = d["ratio_ci_low"] = d["ratio_ci_high"] = math.nan
    if out_a[0] == "ok" and out_b[0] not in (None, "ok"):
        d["status"] = f"regression: now {out_b[0]} ({out_b[1] or 'unknown'})"
    elif out_b[0] == "ok" and out_a[0] not in (None, "ok"):
        d["status"] = f"improvement: was {out_a[0]} ({out_a[1] or 'unknown'})"
    elif x is None:
        d["status"] = "new"
    elif y is None:  # measured in A, nothing in B: a config or load point vanished
        d["status"] = GONE
    else:
        est = bootstrap.ratio(sb, sa, seed=seed, label=label, n_boot=n_boot)
        d["ratio"], d["ratio_ci_low"], d["ratio_ci_high"] = est.value, est.ci_low, est.ci_high
        d["status"] = classify(est, min_effect=min_effect, no_ci_threshold=no_ci_threshold)
    return d


def _attempt_status(out_a: Outcome, out_b: Outcome) -> str:
    """Status of an attempt without points in either run (both failed/skipped, or in one run only)."""
    if out_a[0] is None:
        return "new"
    if out_b[0] is None:
        return GONE if out_a[0] == "ok" else "gone"
    if out_a == out_b:
        return "unchanged"
    return f"changed: {out_a[1] or out_a[0]} -> {out_b[1] or out_b[0]}"


def _attempt_row(att_keys: list[str], ak: tuple[Any, ...], out_a: Outcome, out_b: Outcome) -> dict[str, Any]:
    d = dict(zip(att_keys, ak, strict=True))
    d.update(
        prompt_set=None,
        point=None,
        concurrency=None,
        outcome_a=out_a[0],
        outcome_b=out_b[0],
        tok_s_a=math.nan,
        tok_s_b=math.nan,
        ratio=math.nan,
        ratio_ci_low=math.nan,
        ratio_ci_high=math.nan,
        status=_attempt_status(out_a, out_b),
    )
    return d


def _by_str(keys: Any) -> list[tuple[Any, ...]]:
    return sorted(keys, key=lambda t: tuple(str(x) for x in t))


def compare(
    a: Results,
    b: Results,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    no_ci_threshold: float = DEFAULT_NO_CI_THRESHOLD,
    seed: int = bootstrap.DEFAULT_SEED,
    n_boot: int = bootstrap.DEFAULT_BOOT,
) -> pd.DataFrame:
    """One row per matched cell: tok/s in A and B, ratio with CI, and a status (see module docstring)."""
    keys = match_keys(set(a.attempts["host"]), set(b.attempts["host"]))
    ca, cb = _cells(a, keys), _cells(b, keys)
    att_keys = [k for k in keys if k not in ("prompt_set", "point")]
    oa, ob = _outcomes(a, att_keys), _outcomes(b, att_keys)
    none: Outcome = (None, None)
    rows = []
    for k in _by_str(set(ca) | set(cb)):
        d: dict[str, Any] = dict(zip(keys, k, strict=True))
        ak = tuple(d[c] for c in att_keys)
        rows.append(
            _cell_row(
                d,
                ca.get(k),
                cb.get(k),
                oa.get(ak, none),
                ob.get(ak, none),
                min_effect=min_effect,
                no_ci_threshold=no_ci_threshold,
                seed=seed,
                n_boot=n_boot,
            )
        )
    with_points = {tuple(dict(zip(keys, k, strict=True))[c] for c in att_keys) for k in set(ca) | set(cb)}
    for ak in _by_str(set(oa) | set(ob)):
        if ak not in with_points:
            rows.append(_attempt_row(att_keys, ak, oa.get(ak, none), ob.get(ak, none)))
    return pd.DataFrame(rows, columns=[*keys, *COLUMNS_AFTER_KEYS])


def match_keys(hosts_a: set[str], hosts_b: set[str]) -> list[str]:
    """The cell keys: without the host only when each run has one host and they differ."""
    if len(hosts_a) == 1 and len(hosts_b) == 1 and hosts_a != hosts_b:
        return [k for k in MATCH_KEYS if k != "host"]
    return MATCH_KEYS


def classify(est: bootstrap.Estimate, *, min_effect: float, no_ci_threshold: float) -> str:
    """The documented rule (module docstring) applied to a B/A throughput ratio."""
    if math.isnan(est.value):
        return "unchanged"
    if math.isnan(est.ci_low) or math.isnan(est.ci_high):
        if est.value < 1 - no_ci_threshold:
            return "regression (no CI)"
        if est.value > 1 + no_ci_threshold:
            return "improvement (no CI)"
        return "unchanged"
    if est.ci_high < 1 and est.value < 1 - min_effect:
        return "regression"
    if est.ci_low > 1 and est.value > 1 + min_effect:
        return "improvement"
    return "unchanged"


def to_markdown(table: pd.DataFrame, a: Results, b: Results) -> str:
    lines = []
    if a.simulated or b.simulated:
        lines.append("**SIMULATED: at least one run comes from the SGLang stand-in (sim host).**\n")
    if a.cpu_engine or b.cpu_engine:
        lines.append(
            "**CPU ENGINE: at least one run comes from the real SGLang on its CPU engine (--device cpu): "
            "not GPU figures.**\n"
        )
    ra, rb = ", ".join(a.runs["run_id"]), ", ".join(b.runs["run_id"])
    n_reg = int(table["status"].str.startswith("regression").sum())
    n_imp = int(table["status"].str.startswith("improvement").sum())
    lines.append(f"# sglbench compare: A = {ra}  ->  B = {rb}\n")
    lines.append(
        f"{n_reg} regression(s), {n_imp} improvement(s), {len(table)} cell(s). Rule: B/A tok/s ratio with a "
        "95% bootstrap CI; regression when the CI is entirely below 1 and the drop exceeds the minimum "
        "effect; outcome ok -> failed/skipped is a regression.\n"
    )
    order = table.assign(_r=~table["status"].str.startswith(("regression", "improvement")))
    by_host = "host" in table and table["host"].nunique() > 1
    order = order.sort_values(
        ["_r", "tp", *(["host"] if by_host else []), "config", "concurrency"],
        kind="stable",
        na_position="last",
    )
    cols = [
        "status",
        "tp",
        *(["host"] if by_host else []),
        "config",
        "prompt_set",
        "concurrency",
        "A tok/s",
        "B tok/s",
        "B/A [95% CI]",
        "outcome A -> B",
    ]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for _, r in order.iterrows():
        cells = [
            f"**{r['status']}**" if str(r["status"]).startswith("regression") else str(r["status"]),
            str(r["tp"]),
            *([str(r["host"])] if by_host else []),
            str(r["config"]),
            str(r["prompt_set"] if r["prompt_set"] is not None else "-"),
            "-" if r["concurrency"] is None or pd.isna(r["concurrency"]) else str(int(r["concurrency"])),
            fmt_ci(r["tok_s_a"], None, None),
            fmt_ci(r["tok_s_b"], None, None),
            fmt_ci(r["ratio"], r["ratio_ci_low"], r["ratio_ci_high"], ".3f"),
            f"{r['outcome_a'] or '-'} -> {r['outcome_b'] or '-'}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def deploy_moves(a: Results, b: Results, *, seed: int) -> str:
    """The deployment answers' crossovers and limits that moved (``sglbench.deploy.moves``), as markdown."""
    from sglbench.deploy import moves, store  # the deployment answer builds on the summary this module uses

    use_host = bool(set(a.attempts["host"]) & set(b.attempts["host"]))
    found = moves.moves(
        store.answers(a, prog="compare", seed=seed),
        store.answers(b, prog="compare", seed=seed),
        use_host=use_host,
    )
    return moves.section(found)


def run_compare(args: argparse.Namespace) -> int:
    if not (0 <= args.min_effect < 1) or not (0 <= args.no_ci_threshold < 1):
        print(
            "sglbench compare: error: --min-effect and --no-ci-threshold are fractions in [0, 1)",
            file=sys.stderr,
        )
        return 2
    if not check_seed(args.seed, "compare"):
        return 2
    a = load_or_exit([args.run_a], "compare")
    b = load_or_exit([args.run_b], "compare") if a is not None else None
    if a is None or b is None:
        return 2
    try:
        table = compare(
            a, b, min_effect=args.min_effect, no_ci_threshold=args.no_ci_threshold, seed=args.seed
        )
    except RecordError as exc:  # request rows damaged past the file's footer, found when read
        print(f"sglbench compare: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "csv":
        sys.stdout.write(table.to_csv(index=False))
    else:
        print(to_markdown(table, a, b))
        print()
        print(deploy_moves(a, b, seed=args.seed))
    return 1 if table["status"].str.startswith("regression").any() else 0
