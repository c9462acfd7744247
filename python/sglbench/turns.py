"""Multi-turn sessions turn by turn: TTFT and the prompt tokens the server found cached, per turn index.

A session source (``multi-turn:``, ``sharegpt-turns:``, JSONL records with ``session`` and ``turn``;
docs/ansible.md, "Workload sources") sends each turn with the session's history. Whether a config keeps
that history in its prefix cache shows turn by turn: the cached share of the prompt rising after turn 0
and a later turn's TTFT falling towards the cost of its new tokens; a config that evicts sessions (a small
KV pool, many sessions at once) shows the share falling as concurrency rises.

:func:`turn_table` reads the measured rows of attempts that sent session turns (only the columns it
needs); one row per config, point and turn index over the point's repeats. TTFT is at real-world time on a
time-scaled stand-in, as every latency the summary shows. ``sglbench summarize`` and the report show it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sglbench.results import Results, measured

FIELD = "turn"
KEYS = ["run_id", "host", "tp", "config", "algorithm", "prompt_set", "point", "concurrency", "turn"]
HEADING = "Multi-turn sessions by turn"
NOTE = (
    "Per config and point, the measured turns of its sessions by turn index (0 = the first), over the "
    "point's repeats: turns that succeeded, TTFT p50 and p90, mean prompt tokens (the whole history), mean "
    "prompt tokens the server reported cached (meta_info.cached_tokens; OpenAI routes only with "
    "--enable-cache-report) and the cached share of the prompt tokens."
)
_COLUMNS = ["prompt_set", "point", "concurrency", "turn", "ok", "ttft_ms", "prompt_tokens", "cached_tokens"]


def _frames(res: Results) -> list[pd.DataFrame]:
    out = []
    for rec in res.records:
        src = res.sources.get((rec.run_id, rec.host, rec.instance))
        if src is None:
            continue
        frame = measured(rec, src, _COLUMNS).to_pandas()
        frame = frame[frame["turn"].notna() & frame["ok"].fillna(False).astype(bool)]
        if not len(frame):
            continue
        scale = rec.benchmarks[0].sim_time_scale if len(rec.benchmarks) == 1 else None
        if scale:
            frame["ttft_ms"] = frame["ttft_ms"] / scale
        keys = {"run_id": rec.run_id, "host": rec.host, "tp": rec.tp, "config": rec.config.name}
        frame = frame.assign(**keys, algorithm=rec.config.algorithm)
        out.append(frame)
    return out


def turn_table(res: Results) -> pd.DataFrame:
    """One row per (``KEYS``): ``turns`` (that succeeded), ``ttft_p50_ms``, ``ttft_p90_ms``,
    ``prompt_tokens_mean``, ``cached_tokens_mean`` (NaN when the server reported none) and
    ``cached_share`` (cached over prompt tokens, summed over the turns that reported both)."""
    cols = [*KEYS, "turns", "ttft_p50_ms", "ttft_p90_ms", "prompt_tokens_mean", "cached_tokens_mean"]
    frames = _frames(res)
    if not frames:
        return pd.DataFrame(columns=[*cols, "cached_share"])
    rows = pd.concat(frames, ignore_index=True)
    rows["turn"] = rows["turn"].astype(int)
    out: list[dict[str, Any]] = []
    for key, grp in rows.groupby(KEYS, sort=True, dropna=False):
        both = grp[grp["prompt_tokens"].notna() & grp["cached_tokens"].notna() & (grp["prompt_tokens"] > 0)]
        prompt_sum = float(both["prompt_tokens"].sum())
        cached_share = float(both["cached_tokens"].sum()) / prompt_sum if prompt_sum else float("nan")
        ttft = grp["ttft_ms"].dropna().to_numpy(dtype=float)
        out.append(
            {
                **dict(zip(KEYS, key, strict=True)),
                "turns": len(grp),
                "ttft_p50_ms": float(np.percentile(ttft, 50)) if len(ttft) else float("nan"),
                "ttft_p90_ms": float(np.percentile(ttft, 90)) if len(ttft) else float("nan"),
                "prompt_tokens_mean": float(grp["prompt_tokens"].mean()),
                "cached_tokens_mean": float(grp["cached_tokens"].mean()),
                "cached_share": cached_share,
            }
        )
    return pd.DataFrame(out, columns=[*cols, "cached_share"])


def _num(value: Any, fmt: str, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return format(value, fmt) + unit


def display_rows(table: pd.DataFrame) -> list[dict[str, str]]:
    """Human-formatted rows of :func:`turn_table`: config, point, turn and the figures."""
    return [
        {
            "config": str(r["config"]),
            "point": str(r["point"]),
            "turn": str(int(r["turn"])),
            "turns": str(int(r["turns"])),
            "TTFT p50 ms": _num(r["ttft_p50_ms"], ".1f"),
            "TTFT p90 ms": _num(r["ttft_p90_ms"], ".1f"),
            "prompt tokens": _num(r["prompt_tokens_mean"], ".0f"),
            "cached tokens": _num(r["cached_tokens_mean"], ".0f"),
            "cached": _num(r["cached_share"] * 100.0, ".1f", "%"),
        }
        for r in table.to_dict("records")
    ]
