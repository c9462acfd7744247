#!/usr/bin/env python3
"""Per-category acceptance confidence intervals of measured speculative configs, and the prompts a
category needs for a target half-width.

The figure is the one the report's per-category acceptance rows show: mean accepted drafts per verify
step (``accepted drafts / step`` in :mod:`sglbench.acceptance`), the category's summed acceptance
histogram. SGLang's accept rate (accepted / drafted tokens) is the same figure divided by the draft
width, so its relative interval is the same.

Greedy decoding returns the same tokens, and so the same acceptance, every time a prompt is sent (the
stand-in draws acceptance from a stream keyed by the prompt's tokens; ``python/sglbench/sim/textgen.py``):
a category's independent samples are its distinct prompts, not its requests. The interval is therefore
a seeded percentile bootstrap over prompts (each replicate draws the category's prompts with
replacement and sums their requests' histograms), with the replicates, level and random streams of
:mod:`sglbench.bootstrap`. The prompts needed for a target relative half-width ``h`` come from the
between-prompt spread of the linearised ratio: ``n = ceil((z * sd(d_p) / (h * R))**2)`` with
``d_p = (a_p - R * s_p) / mean(s)``, ``a_p`` and ``s_p`` one request's accepted drafts and verify steps
for prompt ``p`` and ``R`` the category's figure.

Usage::

    python scripts/prompt_ci.py RESULTS_RUN_DIR_OR_REQUEST_FILES... [--target 0.05]

A path may be a run directory (every ``*/*/requests.parquet`` or ``requests.jsonl`` below it, the config
named by its directory) or one requests file (named by its parent directory).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sglbench import bootstrap

FIELD = "spec_accept_histogram"
Z = 1.959964  # the normal quantile of bootstrap.CI_LEVEL (0.95)


def request_files(paths: list[Path]) -> list[tuple[str, Path]]:
    """(config label, requests file) for every given file or run directory."""
    out: list[tuple[str, Path]] = []
    for path in paths:
        if path.is_file():
            out.append((path.parent.name, path))
            continue
        for attempt in sorted(p for p in path.glob("*/*") if p.is_dir()):
            for name in ("requests.parquet", "requests.jsonl"):
                if (attempt / name).is_file():
                    out.append((attempt.name, attempt / name))
                    break
    return out


def per_prompt(path: Path) -> pd.DataFrame:
    """One row per measured successful request with a histogram: category, prompt_id, accepted, steps."""
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_json(path, lines=True)
    if FIELD not in frame:
        return pd.DataFrame(columns=["category", "prompt_id", "accepted", "steps"])
    keep = frame["ok"].astype(bool) & ~frame["warmup"].astype(bool) & frame[FIELD].notna()
    rows = frame[keep]
    hist = [np.asarray(h, dtype=np.int64) for h in rows[FIELD]]
    return pd.DataFrame(
        {
            "category": rows["category"].astype(str).to_numpy(),
            "prompt_id": rows["prompt_id"].astype(str).to_numpy(),
            "accepted": [int((np.arange(len(h)) * h).sum()) for h in hist],
            "steps": [int(h.sum()) for h in hist],
        }
    )


def category_interval(reqs: pd.DataFrame, label: str, target: float) -> dict[str, float | int | str]:
    """The category's figure, its prompt-clustered 95% interval and the prompts the target needs."""
    by_prompt = reqs.groupby("prompt_id").agg(
        accepted=("accepted", "sum"), steps=("steps", "sum"), sent=("steps", "size")
    )
    a = by_prompt["accepted"].to_numpy(dtype=float)
    s = by_prompt["steps"].to_numpy(dtype=float)
    n = len(by_prompt)
    ratio = float(a.sum() / s.sum())
    rng = bootstrap.rng_for(bootstrap.DEFAULT_SEED, label)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=bootstrap.DEFAULT_BOOT)
    lo, hi = bootstrap.interval((counts @ a) / (counts @ s))
    one_a, one_s = a / by_prompt["sent"].to_numpy(), s / by_prompt["sent"].to_numpy()
    resid = (one_a - ratio * one_s) / one_s.mean()
    sd = float(resid.std(ddof=1)) if n > 1 else float("nan")
    needed = math.ceil((Z * sd / (target * ratio)) ** 2) if ratio > 0 and sd == sd else -1
    return {
        "requests": len(reqs),
        "prompts": n,
        "accepted/step": round(ratio, 3),
        "ci_low": round(lo, 3),
        "ci_high": round(hi, 3),
        "half_width_rel": round((hi - lo) / 2 / ratio, 4) if ratio else float("nan"),
        "prompt_cv": round(sd / ratio, 3) if ratio else float("nan"),
        "prompts_needed": needed,
    }


def table(paths: list[Path], target: float) -> pd.DataFrame:
    rows = []
    for config, path in request_files(paths):
        reqs = per_prompt(path)
        for category, grp in reqs.groupby("category", sort=True):
            rows.append(
                {
                    "config": config,
                    "category": category,
                    **category_interval(grp, f"{config}|{category}", target),
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path, help="run directories or requests files")
    ap.add_argument("--target", type=float, default=0.05, help="relative half-width to size for (0.05)")
    args = ap.parse_args(argv)
    if not 0 < args.target < 1:
        print("prompt_ci: --target is a fraction in (0, 1), e.g. 0.05", file=sys.stderr)
        return 2
    out = table(args.paths, args.target)
    if not len(out):
        print(
            "prompt_ci: no speculative requests with acceptance histograms under the given paths",
            file=sys.stderr,
        )
        return 1
    print(out.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
