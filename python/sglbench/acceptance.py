"""Per-position acceptance of speculative configs, from each request's acceptance histogram.

SGLang returns, per finished request, how many verify steps accepted k draft tokens (k = 0 .. draft
tokens - 1; the record's ``spec_accept_histogram``, whatever the release calls it, see
``SPEC_META_ERAS`` in ``python/sglbench/hostlib/sglang_facts.py``). Summed over requests, that histogram
gives, per draft position j (1-based), the share of verify steps that reached position j and accepted
its token: ``sum(h[k], k >= j) / sum(h[k], k >= j - 1)``. Position 1 is the first draft token; a falling
curve is where drafts stop being worth verifying.

:func:`histograms` reads the rows (only the columns it needs, and none of an attempt that recorded no
histogram); :func:`position_table` turns them into the table ``sglbench summarize`` and the report show,
one row per config and point (all categories) and per config and category (all points).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from sglbench import columnar
from sglbench.results import Results, measured

FIELD = "spec_accept_histogram"
GROUP_KEYS = ["run_id", "host", "config", "algorithm", "tp", "prompt_set", "point", "concurrency", "category"]
ALL = "all"
HEADING = "Acceptance by draft position"
NOTE = (
    "Per speculative config, from each request's acceptance histogram (verify steps by correct draft "
    "tokens): the histogram as shares of verify steps by accepted drafts; pN = share of verify steps that "
    "reached draft position N and accepted it; accepted drafts / step excludes the bonus token. Rows per "
    "point over all categories, then per category over all points."
)
MAX_POSITIONS = 8  # positions shown in the tables; the rest are in the frame


def _stored(src: columnar.RowSource) -> Sequence[str]:
    if isinstance(src, columnar.ParquetRows):
        return src.names
    return src.table.column_names if isinstance(src, columnar.TableRows) else [FIELD]


def histograms(res: Results) -> pd.DataFrame:
    """Summed acceptance histograms per (attempt keys, prompt set, point, concurrency, category): columns
    ``GROUP_KEYS`` + ``requests`` + ``hist`` (a numpy array, index = accepted drafts per verify step)."""
    rows: list[dict[str, Any]] = []
    for rec in res.records:
        src = res.sources.get((rec.run_id, rec.host, rec.instance))
        if src is None or FIELD not in _stored(src):
            continue
        table = measured(rec, src, ["prompt_set", "point", "concurrency", "category", "ok", FIELD])
        sums: dict[tuple[Any, ...], list[Any]] = {}
        cols = [table.column(c).to_pylist() for c in table.column_names]
        for ps, point, conc, cat, ok, hist in zip(*cols, strict=True):
            if not ok or not hist:
                continue
            key = (ps, point, conc, cat)
            acc = sums.setdefault(key, [0, np.zeros(0, dtype=np.int64)])
            h = np.asarray(hist, dtype=np.int64)
            if len(h) > len(acc[1]):
                acc[1] = np.pad(acc[1], (0, len(h) - len(acc[1])))
            acc[1][: len(h)] += h
            acc[0] += 1
        for (ps, point, conc, cat), (n, h) in sums.items():
            rows.append(
                {
                    "run_id": rec.run_id,
                    "host": rec.host,
                    "config": rec.config.name,
                    "algorithm": rec.config.algorithm,
                    "tp": rec.tp,
                    "prompt_set": ps,
                    "point": point,
                    "concurrency": conc,
                    "category": cat if isinstance(cat, str) else "-",
                    "requests": n,
                    "hist": h,
                }
            )
    return pd.DataFrame(rows, columns=[*GROUP_KEYS, "requests", "hist"])


def position_rates(hist: np.ndarray) -> np.ndarray:
    """Acceptance at each draft position (1-based index j at array index j - 1): the share of verify
    steps that reached position j and accepted it; NaN where no step reached it."""
    h = np.asarray(hist, dtype=float)
    if len(h) < 2:
        return np.zeros(0)
    at_least = np.cumsum(h[::-1])[::-1]  # at_least[k]: steps with k or more accepted drafts
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(at_least[:-1] > 0, at_least[1:] / at_least[:-1], np.nan)


def _summed(group: pd.DataFrame) -> np.ndarray:
    n = max(len(h) for h in group["hist"])
    return np.sum([np.pad(h, (0, n - len(h))) for h in group["hist"]], axis=0)


def position_table(hist: pd.DataFrame) -> pd.DataFrame:
    """One row per config and point over every category (``category`` = ``all``) and per config and
    category over every point (``point`` = ``all``): requests, verify steps, mean accepted drafts per
    step, the histogram as shares and ``pos_1`` .. the acceptance at each position."""
    if not len(hist):
        return pd.DataFrame(columns=[*GROUP_KEYS, "requests", "steps", "accepted_mean", "shares"])
    head = ["run_id", "host", "tp", "config", "algorithm", "prompt_set"]
    out: list[dict[str, Any]] = []
    for by, other in ((["point", "concurrency"], "category"), (["category"], "point")):
        for key, grp in hist.groupby([*head, *by], sort=True, dropna=False):
            h = _summed(grp)
            steps = int(h.sum())
            row = dict(zip([*head, *by], key, strict=True))
            row[other] = ALL
            if other == "point":
                row["concurrency"] = None
            row.update(
                requests=int(grp["requests"].sum()),
                steps=steps,
                accepted_mean=float((np.arange(len(h)) * h).sum() / steps) if steps else float("nan"),
                shares=(h / steps) if steps else h.astype(float),
            )
            for j, rate in enumerate(position_rates(h), 1):
                row[f"pos_{j}"] = rate
            out.append(row)
    return pd.DataFrame(out)


def display_rows(table: pd.DataFrame) -> list[dict[str, str]]:
    """Human-formatted rows: config, point, category, requests, steps, mean accepted drafts, the histogram
    (share of verify steps by accepted drafts) and the acceptance at positions 1 .. MAX_POSITIONS."""
    positions = sorted((int(c.split("_")[1]) for c in table.columns if c.startswith("pos_")), key=int)[
        :MAX_POSITIONS
    ]
    rows = []
    for r in table.to_dict("records"):
        d = {
            "config": str(r["config"]),
            "point": str(r["point"]),
            "category": str(r["category"]),
            "requests": str(r["requests"]),
            "verify steps": str(r["steps"]),
            "accepted drafts / step": "-" if np.isnan(r["accepted_mean"]) else f"{r['accepted_mean']:.2f}",
        }
        shares = np.asarray(r["shares"], dtype=float)[: MAX_POSITIONS + 1]
        d["steps by accepted drafts 0/1/2/…"] = " ".join(f"{x:.2f}" for x in shares)
        for j in positions:
            v = r.get(f"pos_{j}")
            d[f"p{j}"] = "-" if v is None or np.isnan(v) else f"{v:.2f}"
        rows.append(d)
    return rows
