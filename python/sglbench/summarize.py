"""Per-TP summary tables of a campaign, and the ``sglbench summarize`` command.

One row per (run, host, TP, config, prompt set, load point): mean output tok/s over repeats with a
bootstrap 95% interval, the speedup over the autoregressive baseline with its interval, the latency
percentiles of the metrics the table shows (``hostlib/result_schema.METRICS``), acceptance length, KV
tokens and max running requests predicted vs observed, and the outcome (with the flags autotune
changed, when the capacity policy tuned the command).
Attempts that produced no points (planned skip, failure) get one row carrying the outcome and cause;
an attempt that began and was never recorded (its host dropped out mid-run) gets one row with outcome
``cut``, never valid, and a host that dropped out is named above the tables.

Baseline: the config with algorithm ``none`` on the same host, TP size, model, prompt set and load
point (the alphabetically first one when several match; its name is in the ``baseline`` column).
Latency columns are means over repeats of each repeat's percentile. Intervals: see
:mod:`sglbench.bootstrap`.
"""

from __future__ import annotations

import argparse
import io
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sglbench import acceptance, bootstrap, events, lossless, outfiles, tables, turns
from sglbench.hostlib import result_schema
from sglbench.overhead import campaign_overhead, overhead_lines
from sglbench.records import RecordError
from sglbench.results import Results, ResultsError, load

CELL_KEYS = ["run_id", "host", "tp", "config", "algorithm", "model_path", "prompt_set", "point"]
MAX_SEED = 2**64 - 1
SIM_BANNER = "SIMULATED: numbers below come from the SGLang stand-in (sim host), not from GPUs."
CPU_BANNER = (
    "CPU ENGINE: numbers below come from the real SGLang on its CPU engine (--device cpu, e.g. the "
    "real-SGLang sim host with tiny random-weight models): neither simulated nor GPU figures."
)
TELEMETRY_FLAGS_NOTE = (
    "Telemetry flags: throttled (power or thermal clock events in the window), not_steady (no steady state "
    "by MSER-5), gaps (missing samples), missing_gpu, clock_unknown, sampling_errors; n/m = in n of m "
    'repeats (docs/records.md, "Telemetry").'
)
TABLE_COLUMNS = [
    "run_id",
    "host",
    "tp",
    "config",
    "algorithm",
    "model_path",
    "prompt_set",
    "point",
    "concurrency",
    "n_repeats",
    "tok_s",
    "tok_s_ci_low",
    "tok_s_ci_high",
    "baseline",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    lossless.COLUMN,  # the losslessness gate's verdict for the config (python/sglbench/lossless.py)
    lossless.TEXT_COLUMN,
    *result_schema.table_metric_columns(),  # ttft_ms_p50, ttft_ms_p99, itl_ms_p50, itl_ms_p99
    "accept_length",
    *result_schema.table_telemetry_columns(),  # j_per_token, usd_per_mtok: mean over repeats
    "telemetry_flags",
    "kv_tokens_predicted",
    "kv_tokens_observed",
    "max_running_requests_predicted",
    "max_running_requests_observed",
    "outcome",
    "autotuned",
    "cause",
    "note",
    "valid",
    "simulated",
    "cpu_engine",
]


def _samples(
    points: pd.DataFrame, tokens: dict[tuple[Any, ...], np.ndarray]
) -> dict[tuple[Any, ...], list[bootstrap.RepeatSample]]:
    """Repeat samples per cell key (with per-request tokens, ``Results.request_tokens``, where kept)."""
    out: dict[tuple[Any, ...], list[bootstrap.RepeatSample]] = {}
    for row in points.itertuples(index=False):
        if row.output_throughput_tok_s is None or pd.isna(row.output_throughput_tok_s):
            continue
        toks = tokens.get((row.run_id, row.host, row.instance, row.prompt_set, row.point, row.repeat))
        dur = row.duration_s if row.duration_s is not None and not pd.isna(row.duration_s) else None
        key = tuple(getattr(row, k) for k in CELL_KEYS)
        out.setdefault(key, []).append(bootstrap.RepeatSample(float(row.output_throughput_tok_s), dur, toks))
    return out


def reason_digest(reasons: Iterable[str]) -> str:
    """Invalid-point reasons, one per kind: reasons that differ only in their numbers are one kind,
    shown by its last example (sorted) and a count, so a table cell stays readable."""
    kinds: dict[str, list[str]] = {}
    for joined in reasons:
        for reason in str(joined or "").split("; "):
            if reason.strip():
                kinds.setdefault(re.sub(r"\d+(?:\.\d+)?", "#", reason.strip()), []).append(reason.strip())
    parts = []
    for examples in kinds.values():
        examples.sort()
        parts.append(examples[-1] + (f" (x{len(examples)})" if len(examples) > 1 else ""))
    return "; ".join(parts)


def telemetry_note(table: pd.DataFrame) -> str:
    """What the telemetry columns the table shows mean ("" when it shows none)."""
    shown = [f for f in result_schema.table_telemetry() if table[f.key].notna().any()]
    notes = [f"{f.label}: {f.meaning}, mean over repeats." for f in shown]
    if (table["telemetry_flags"].astype(object).fillna("") != "").any():
        notes.append(TELEMETRY_FLAGS_NOTE)
    return " ".join(notes) + "\n" if notes else ""


def flag_digest(flags: pd.Series) -> str:
    """The telemetry flags of a cell's repeats: ``throttled 1/3, gaps 3/3`` (how many repeats had each)."""
    per_repeat = [set(str(f).split(", ")) if isinstance(f, str) and f else set() for f in flags]
    names = [*result_schema.TELEMETRY_FLAGS, "unusable"]
    return ", ".join(
        f"{name} {n}/{len(per_repeat)}" for name in names if (n := sum(name in s for s in per_repeat))
    )


def _missing_note(att: dict[str, Any]) -> str:
    n = att.get("points_missing")
    return f"{int(n)} expected point(s) missing" if n is not None and not pd.isna(n) and int(n) > 0 else ""


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: its start and its end, cut at word boundaries, with an
    ellipsis between. A failure message opens with where it happened and ends with why and what to
    change (a benchmark's: ``point c1-r0 of x-tp1 failed: prompt benchmark against <url> failed: <why>``)."""
    if len(text) <= width:
        return text
    head_n = width // 3
    head = text[:head_n].rsplit(" ", 1)[0].rstrip(" ,;:")
    tail_n = width - len(head) - 3
    tail = text[-tail_n:]
    tail = tail.split(" ", 1)[1] if " " in tail[1:] and not text[-tail_n - 1].isspace() else tail
    return f"{head} … {tail.lstrip()}"


def _fmt_cause(outcome: str, cause: Any, message: Any) -> str:
    if outcome == "ok":
        return ""
    label = "planned skip" if outcome == "skipped" else "failed"
    text = f"{label}: {cause or 'unknown'}"
    if message and isinstance(message, str):
        text += f" ({shorten(message.strip().splitlines()[0], 140)})"
    return text


def _capacity_cells(att: dict[str, Any]) -> dict[str, Any]:
    """The attempt's columns every row of it carries: capacity predicted vs observed and the outcome."""
    return {
        "kv_tokens_predicted": att["kv_tokens_predicted"],
        "kv_tokens_observed": att["kv_tokens_observed"],
        "max_running_requests_predicted": att["max_running_requests_predicted"],
        "max_running_requests_observed": att["max_running_requests_observed"],
        "outcome": att["outcome"],
        "autotuned": att.get("autotuned_flags"),
        "cause": att["cause"],
    }


def _point_row(
    key: tuple[Any, ...],
    grp: pd.DataFrame,
    att: dict[str, Any],
    samples: list[bootstrap.RepeatSample],
    *,
    seed: int,
    n_boot: int,
) -> dict[str, Any]:
    """One cell with points: throughput with its interval, latency means over repeats, the attempt's
    capacity and outcome, and a note on invalid repeats or missing points."""
    first = grp.iloc[0]
    label = "|".join(map(str, key))
    est = bootstrap.mean_throughput(samples, seed=seed, label=label, n_boot=n_boot) if samples else None
    invalid = grp[~grp["valid"].astype(bool)]
    note = ""
    if len(invalid):
        note = f"{len(invalid)}/{len(grp)} repeats invalid: " + reason_digest(invalid["invalid_reasons"])
    return {
        **dict(zip(CELL_KEYS, key, strict=True)),
        "concurrency": first.concurrency,
        "n_repeats": len(grp),
        "tok_s": est.value if est else math.nan,
        "tok_s_ci_low": est.ci_low if est else math.nan,
        "tok_s_ci_high": est.ci_high if est else math.nan,
        **{col: grp[col].astype(float).mean() for col in result_schema.table_metric_columns()},
        "accept_length": grp["accept_length_mean"].astype(float).mean(),
        **{col: grp[col].astype(float).mean() for col in result_schema.table_telemetry_columns()},
        "telemetry_flags": flag_digest(grp["telemetry_flags"]),
        **_capacity_cells(att),
        "note": note
        or _missing_note(att)
        or _fmt_cause(att["outcome"], att["cause"], att["failure_message"]),
        "valid": not len(invalid) and not _missing_note(att),
        "simulated": bool(grp["simulated"].any()),
        "cpu_engine": bool(grp["cpu_engine"].any()),
    }


def _attempt_row(att: dict[str, Any]) -> dict[str, Any]:
    """The one row of an attempt that produced no points (planned skip, failure, nothing recorded)."""
    note = _fmt_cause(att["outcome"], att["cause"], att["failure_message"])
    if att["outcome"] == "ok":
        note = "no benchmark points recorded"
    return {
        **{k: att.get(k) for k in ("run_id", "host", "tp", "config", "algorithm", "model_path")},
        "prompt_set": None,
        "point": None,
        "concurrency": None,
        "n_repeats": 0,
        **_capacity_cells(att),
        "note": note,
        "valid": att["outcome"] == "ok",
        "simulated": att["simulated"],
        "cpu_engine": att["cpu_engine"],
    }


def repeat_samples(res: Results) -> dict[tuple[Any, ...], list[bootstrap.RepeatSample]]:
    """The bootstrap's repeat samples of every cell (``CELL_KEYS``), request rows read once."""
    return _samples(res.points, res.request_tokens()) if len(res.points) else {}


def _cut_row(cut: dict[str, Any]) -> dict[str, Any]:
    """The one row of an attempt that began and was never recorded (``Results.cut``)."""
    where = f" in the {cut['phase']} phase" if isinstance(cut.get("phase"), str) else ""
    n = int(cut.get("points_committed") or 0)
    kept = f"; {n} point(s) committed before, kept for the resume" if n else ""
    return {
        **{k: cut.get(k) for k in ("run_id", "host", "tp", "config")},
        "algorithm": None,
        "model_path": None,
        "prompt_set": None,
        "point": None,
        "concurrency": None,
        "n_repeats": 0,
        "outcome": events.CUT,
        "cause": cut.get("reason"),
        "note": f"{events.CUT}: {cut.get('reason')}{where}, no record{kept}",
        "valid": False,
        "simulated": bool(cut.get("simulated")),
        "cpu_engine": bool(cut.get("cpu_engine")),
    }


def summary_table(
    res: Results,
    *,
    seed: int = bootstrap.DEFAULT_SEED,
    n_boot: int = bootstrap.DEFAULT_BOOT,
    samples: dict[tuple[Any, ...], list[bootstrap.RepeatSample]] | None = None,
) -> pd.DataFrame:
    """The tidy summary (one row per cell, see the module docstring); columns = ``TABLE_COLUMNS``.
    ``samples`` are :func:`repeat_samples` of ``res`` when the caller has them already."""
    rows: list[dict[str, Any]] = []
    pts = res.points
    samples = repeat_samples(res) if samples is None else samples
    attempts = res.attempts.set_index(["run_id", "host", "instance"]) if len(res.attempts) else None
    if len(pts):
        assert attempts is not None
        for key, grp in pts.groupby(CELL_KEYS, dropna=False, sort=False):
            first = grp.iloc[0]
            att = dict(attempts.loc[(first.run_id, first.host, first.instance)])
            rows.append(
                _point_row(tuple(key), grp, att, samples.get(tuple(key), []), seed=seed, n_boot=n_boot)
            )
    with_points = set(zip(pts["run_id"], pts["host"], pts["instance"], strict=True)) if len(pts) else set()
    rows += [
        _attempt_row(att)
        for att in res.attempts.to_dict("records")
        if (att["run_id"], att["host"], att["instance"]) not in with_points
    ]
    rows += [_cut_row(cut) for cut in res.cut.to_dict("records")]
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    if not len(table):
        return table
    _add_speedups(table, samples, seed=seed, n_boot=n_boot)
    _add_lossless(table, res)
    return table.sort_values(
        ["tp", "run_id", "host", "model_path", "algorithm", "config", "prompt_set", "concurrency"],
        key=_sort_key,
        na_position="last",
        kind="stable",
    ).reset_index(drop=True)


def _add_lossless(table: pd.DataFrame, res: Results) -> None:
    """The gate's verdict and its text on every row of a speculative config (None elsewhere)."""
    table[lossless.COLUMN] = None
    table[lossless.TEXT_COLUMN] = None
    gate = lossless.gate(res)
    verdicts = {
        (g["run_id"], g["host"], g["tp"], g["config"]): (g[lossless.COLUMN], g["text"])
        for g in gate.to_dict("records")
    }
    for i, r in table.iterrows():
        found = verdicts.get((r["run_id"], r["host"], r["tp"], r["config"]))
        if found is not None:
            table.at[i, lossless.COLUMN], table.at[i, lossless.TEXT_COLUMN] = found


def _sort_key(col: pd.Series) -> pd.Series:
    if col.name == "algorithm":  # baseline first
        return col.fillna("").map(lambda a: (0 if str(a).lower() in ("none", "") else 1, str(a)))
    if col.dtype == object:
        return col.fillna("").astype(str)
    return col


def _add_speedups(
    table: pd.DataFrame,
    samples: dict[tuple[Any, ...], list[bootstrap.RepeatSample]],
    *,
    seed: int,
    n_boot: int,
) -> None:
    table["baseline"] = pd.Series([None] * len(table), index=table.index, dtype=object)
    for c in ("speedup", "speedup_ci_low", "speedup_ci_high"):
        table[c] = table[c].astype(float)
    is_base = table["algorithm"].fillna("none").str.lower().isin(["none", ""])
    has_points = table["point"].notna()
    bases = table[is_base & has_points]
    base_by: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for _, row in bases.sort_values("config").iterrows():
        k = (row.run_id, row.host, row.tp, row.model_path, row.prompt_set, row.point)
        base_by.setdefault(k, tuple(row[c] for c in CELL_KEYS))
    for i, row in table[has_points].iterrows():
        k = (row.run_id, row.host, row.tp, row.model_path, row.prompt_set, row.point)
        den_key = base_by.get(k)
        if den_key is None:
            continue
        table.at[i, "baseline"] = den_key[CELL_KEYS.index("config")]
        num_key = tuple(row[c] for c in CELL_KEYS)
        num, den = samples.get(num_key), samples.get(den_key)
        if not num or not den:
            continue
        est = bootstrap.ratio(
            num, den, seed=seed, label="speedup|" + "|".join(map(str, num_key)), n_boot=n_boot
        )
        table.at[i, "speedup"] = est.value
        table.at[i, "speedup_ci_low"] = est.ci_low
        table.at[i, "speedup_ci_high"] = est.ci_high


# -- text output ------------------------------------------------------------------------------------
def _num(v: Any, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    try:
        return format(float(v), spec)
    except (TypeError, ValueError):
        return str(v)


def _int(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{int(v):,}"


def fmt_ci(value: Any, lo: Any, hi: Any, spec: str = ".1f", suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    s = f"{format(float(value), spec)}{suffix}"
    if lo is not None and hi is not None and not (math.isnan(float(lo)) or math.isnan(float(hi))):
        s += f" [{format(float(lo), spec)}, {format(float(hi), spec)}]"
    return s


def outcome_text(row: Any) -> str:
    tuned = row.get("autotuned") if hasattr(row, "get") else None
    tuned_text = f" (autotuned: {tuned})" if isinstance(tuned, str) and tuned else ""
    if row["outcome"] == "ok":
        return f"ok{tuned_text}" if row["valid"] else f"ok{tuned_text}, {row['note']}"
    return (row["note"] or row["outcome"]) + tuned_text


def display_rows(table: pd.DataFrame) -> list[dict[str, str]]:
    """Human-formatted cells (shared by markdown and HTML output)."""
    multi_host = table["host"].nunique() > 1
    multi_run = table["run_id"].nunique() > 1
    multi_set = table["prompt_set"].dropna().nunique() > 1
    out = []
    for _, r in table.iterrows():
        d: dict[str, str] = {}
        if multi_run:
            d["run"] = str(r["run_id"])
        if multi_host:
            d["host"] = str(r["host"])
        d["config"] = str(r["config"])
        d["algorithm"] = str(r["algorithm"]) if isinstance(r["algorithm"], str) else "-"
        if multi_set:
            d["prompts"] = r["prompt_set"] if isinstance(r["prompt_set"], str) else "-"  # NaN: no points
        d["conc"] = _int(r["concurrency"]) if r["point"] is not None else "-"
        d["output tok/s [95% CI]"] = fmt_ci(r["tok_s"], r["tok_s_ci_low"], r["tok_s_ci_high"])
        d["speedup [95% CI]"] = (
            "baseline"
            if r["baseline"] == r["config"]
            else fmt_ci(r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"], ".2f", "x")
        )
        if r[lossless.COLUMN] == lossless.FAIL:
            d["speedup [95% CI]"] += f" ({lossless.MARK})"
        if table[lossless.COLUMN].notna().any():
            is_base = isinstance(r["algorithm"], str) and lossless.is_baseline_algorithm(r["algorithm"])
            text = r[lossless.TEXT_COLUMN]
            d[lossless.HEADER] = text if isinstance(text, str) else ("baseline" if is_base else "-")
        for m in result_schema.table_metrics():
            d[m.header] = " / ".join(_num(r[m.column(stat)], m.digits) for stat in m.shown)
        d["accept len"] = _num(r["accept_length"], ".2f")
        for f in result_schema.table_telemetry():  # only when some point of the table has the figure
            if table[f.key].notna().any():
                d[f.label] = _num(r[f.key], f.digits)
        if (table["telemetry_flags"].astype(object).fillna("") != "").any():
            d["telemetry flags"] = r["telemetry_flags"] if isinstance(r["telemetry_flags"], str) else ""
        d["KV tokens pred/obs"] = f"{_int(r['kv_tokens_predicted'])} / {_int(r['kv_tokens_observed'])}"
        d["max reqs pred/obs"] = (
            f"{_int(r['max_running_requests_predicted'])} / {_int(r['max_running_requests_observed'])}"
        )
        d["outcome"] = outcome_text(r)
        if table["simulated"].any():
            d["sim"] = "SIM" if r["simulated"] else ""
        if table["cpu_engine"].any():
            d["cpu"] = "CPU" if r["cpu_engine"] else ""
        out.append(d)
    return out


def host_list(res: Results) -> str:
    """``simhost-a, simhost-b (dropped out)``: every host, those that dropped out of a run marked."""
    gone = set(res.dropped["host"])
    return ", ".join(h + (" (dropped out)" if h in gone else "") for h in res.hosts) or "-"


def dropped_lines(res: Results) -> list[str]:
    """One line per host that dropped out of a run: where, what it recorded, what it cut or never began;
    the other hosts' results are complete without it."""
    lines = []
    for d in res.dropped.to_dict("records"):
        gone = events.DroppedHost.from_dict(d)
        if gone is not None:
            run = f"run {d['run_id']}, " if res.runs["run_id"].nunique() > 1 else ""
            lines.append(f"{run}{gone.describe()}")
    return lines


def to_markdown(
    table: pd.DataFrame, res: Results, *, fmt: str = "md", first: str = "", last: str = ""
) -> str:
    """The summary as markdown (``fmt`` md) or aligned text (``text``): banners, title, ``first`` (the
    deployment answer, already rendered), the per-TP tables, then ``last``."""
    emph, h1, h2 = ("**", "# ", "## ") if fmt == "md" else ("", "", "")
    parts = []
    if res.simulated:
        parts.append(f"{emph}{SIM_BANNER}{emph}\n")
    if res.cpu_engine:
        parts.append(f"{emph}{CPU_BANNER}{emph}\n")
    runs = ", ".join(res.runs["run_id"])
    parts.append(f"{h1}sglbench summary — run(s) {runs} — host(s) {host_list(res)}\n")
    parts += [f"{emph}Dropped out: {line}{emph}\n" for line in dropped_lines(res)]
    if first:
        parts.append(first)
    parts.append(
        "Output tok/s: mean over repeats, 95% percentile-bootstrap CI over repeats and requests "
        "(seeded). Speedup: over the algorithm-none config on the same host, TP, model, prompt set and "
        "concurrency. Latencies: mean over repeats of each repeat's percentile.\n"
    )
    if table[lossless.COLUMN].notna().any():
        parts.append(lossless.NOTE + "\n")
    if note := telemetry_note(table):
        parts.append(note)
    scales = sorted(
        {float(x) for x in res.points.get("sim_time_scale", pd.Series(dtype=float)).dropna().unique()}
    )
    if scales:
        parts.append(
            f"Stand-in time scale {', '.join(f'{x:g}' for x in scales)}: rates and latencies are shown at "
            "real-world time (measured rate x scale, measured latency / scale).\n"
        )
    for tp, grp in table.groupby("tp", sort=True):
        parts.append(f"{h2}TP {tp}\n")
        parts.append(tables.render(display_rows(grp), fmt))
        parts.append("")
    positions = acceptance.position_table(acceptance.histograms(res))
    by_position = (f"{h2}{acceptance.HEADING}", acceptance.NOTE, positions, acceptance.display_rows)
    parts += _tables_by_tp(*by_position, fmt)
    parts += _tables_by_tp(f"{h2}{turns.HEADING}", turns.NOTE, turns.turn_table(res), turns.display_rows, fmt)
    if last:
        parts.append(last)
    return "\n".join(parts)


def _tables_by_tp(heading: str, note: str, table: pd.DataFrame, rows: Any, fmt: str) -> list[str]:
    """A section: its heading, its note and one table of ``rows(group)`` per TP; nothing for an empty
    ``table``."""
    if not len(table):
        return []
    parts = [f"{heading}\n", note + "\n"]
    for tp, grp in table.groupby("tp", sort=True):
        parts += [f"TP {tp}:\n", tables.render(rows(grp), fmt), ""]
    return parts


# -- the command (its arguments: python/sglbench/cli/summarize.py) -------------------------------
def load_or_exit(paths: Sequence[Path], prog: str) -> Results | None:
    try:
        return load(list(paths))
    except (ResultsError, RecordError) as exc:
        print(f"sglbench {prog}: error: {exc}", file=sys.stderr)
        return None


def check_seed(seed: int, prog: str) -> bool:
    """The bootstrap seed must be a non-negative integer (numpy's seed sequences take no negative)."""
    if 0 <= seed <= MAX_SEED:
        return True
    print(f"sglbench {prog}: error: --seed must be an integer from 0 to 2**64-1, got {seed}", file=sys.stderr)
    return False


def run_summarize(args: argparse.Namespace) -> int:
    if args.format == "parquet" and args.out is None:
        print("sglbench summarize: error: --format parquet needs -o FILE.parquet", file=sys.stderr)
        return 2
    if not bootstrap.MIN_BOOT <= args.bootstrap <= bootstrap.MAX_BOOT:
        print(
            f"sglbench summarize: error: --bootstrap must be from {bootstrap.MIN_BOOT} to "
            f"{bootstrap.MAX_BOOT} replicates, got {args.bootstrap}",
            file=sys.stderr,
        )
        return 2
    if args.overhead and args.format not in ("md", "text"):
        print(
            "sglbench summarize: error: --overhead is for --format md (the default) or text", file=sys.stderr
        )
        return 2
    if not check_seed(args.seed, "summarize"):
        return 2
    res = load_or_exit(args.run_dirs, "summarize")
    if res is None:
        return 2
    try:
        if args.out is not None:
            outfiles.prepare_out(args.out, example=f"summary.{args.format}")
        samples = repeat_samples(res)
        table = summary_table(res, seed=args.seed, n_boot=args.bootstrap, samples=samples)
        answers, stored = _deploy_answer(res, table, samples, seed=args.seed, n_boot=args.bootstrap)
        if args.format == "parquet":
            buf = io.BytesIO()
            table.to_parquet(buf, index=False)
            outfiles.write_files([(args.out, buf.getvalue())])
            print(f"wrote {args.out}")
        else:
            if args.format == "csv":
                text = table.to_csv(index=False)
            else:
                text = _with_deploy(table, res, answers, stored, args.format) + "\n"
            if args.overhead:
                text += "".join(f"\n{line}" for line in overhead_lines(campaign_overhead(res.records))) + "\n"
            if args.out:
                outfiles.write_files([(args.out, text.encode("utf-8"))])
                print(f"wrote {args.out}")
            else:
                sys.stdout.write(text)
    except (outfiles.OutputError, RecordError) as exc:  # RecordError: request rows damaged past the footer
        print(f"sglbench summarize: error: {exc}", file=sys.stderr)
        return 2
    return exit_code(res)


def summary_with_answer(
    res: Results, *, fmt: str = "md", seed: int = bootstrap.DEFAULT_SEED, n_boot: int = bootstrap.DEFAULT_BOOT
) -> str:
    """What ``sglbench summarize`` prints for ``res`` (md or text): the deployment answer first (its files
    written beside the run's hosts), then the per-TP tables, the limits and the frontier. ``sglbench run``
    ends with it too."""
    samples = repeat_samples(res)
    table = summary_table(res, seed=seed, n_boot=n_boot, samples=samples)
    answers, stored = _deploy_answer(res, table, samples, seed=seed, n_boot=n_boot)
    return _with_deploy(table, res, answers, stored, fmt)


def _deploy_answer(
    res: Results,
    table: pd.DataFrame,
    samples: dict[tuple[Any, ...], list[bootstrap.RepeatSample]],
    *,
    seed: int,
    n_boot: int,
) -> tuple[list[Any], list[Path]]:
    """Every run's deployment answer (``sglbench.deploy``, built on this module's table, hence imported
    here) and its three files written beside the run's hosts; a run directory that cannot take them is a
    warning, not a failure of the summary."""
    from sglbench.deploy import answer, store

    answers = answer.build(res, table, samples, seed=seed, n_boot=n_boot)
    try:
        return answers, store.write(answers)
    except outfiles.OutputError as exc:
        print(f"sglbench summarize: warning: deployment answer not stored: {exc}", file=sys.stderr)
        return answers, []


def _with_deploy(table: pd.DataFrame, res: Results, answers: list[Any], stored: list[Path], fmt: str) -> str:
    """The summary with the deploy table first and the limits and frontier after the per-TP tables."""
    from sglbench.deploy import text as deploy_text

    last = deploy_text.limits_section(answers, fmt) + "\n" + deploy_text.frontier_section(answers, fmt)
    if stored:
        dirs = sorted({str(p.parent) for p in stored})
        names = ", ".join(sorted({p.name for p in stored}))
        last += f"\nDeployment answer files: {names} in {', '.join(dirs)}\n"
    return to_markdown(table, res, fmt=fmt, first=deploy_text.deploy_section(answers, fmt), last=last)


def exit_code(res: Results) -> int:
    """0 when every attempt is ok, no expected point is missing, every point is valid and no host
    dropped out (no attempt cut), else 1."""
    if not len(res.attempts):
        return 1
    if (res.attempts["outcome"] != "ok").any():
        return 1
    if (res.attempts["points_missing"].fillna(0).astype(int) > 0).any():
        return 1
    if len(res.points) and not res.points["valid"].astype(bool).all():
        return 1
    if len(res.cut) or len(res.dropped):  # an attempt cut, or a host that dropped out of the run
        return 1
    return 0
