"""The losslessness gate: does a speculative config return the baseline's tokens at temperature 0?

Speculative decoding is meant to be lossless: with greedy sampling on identical prompts, a speculative
config must return the same output token ids as the ``algorithm: none`` config of the same model and TP.
A speedup from a config that does not is not a speedup of the same computation. For every speculative
attempt this module compares each measured request's ``output_ids`` (recorded by the load generator on
the native API at temperature 0) with the baseline's output for the same prompt (prompt set and prompt
id) and reports the share that match exactly and where the others first diverge.

The baseline is the ``algorithm: none`` attempt of the same run, host, TP and model (the speedup's
baseline, ``python/sglbench/summarize.py``). Verdicts (:data:`COLUMN` holds one per attempt):

- ``pass``: every compared request matches its baseline output exactly;
- ``fail``: at least one does not (its speedup is marked in the summary and the report);
- ``n/a``: the gate does not apply, and ``reason`` says why (sampled run, no baseline, no token ids).

This module owns the column's name and its display text; the summary and the report import both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sglbench import columnar
from sglbench.records import AttemptRecord
from sglbench.results import ATTEMPT_KEYS, Results, attempt_keys, measured

COLUMN = "lossless"  # the summary table's column: pass / fail / n/a (None for baselines)
HEADER = "lossless"  # its header in the summary and the report
TEXT_COLUMN = "lossless_note"  # the verdict as the summary shows it (Verdict.text)
MARK = "not lossless"  # appended to the speedup of a config that fails the gate
NOTE = (
    "Lossless: each speculative config's output token ids against the algorithm-none config's (same "
    "host, TP, model, prompts) at temperature 0; a speedup marked '" + MARK + "' comes from a config that "
    "returned other tokens. n/a: sampled run, no baseline or no token ids (native API only)."
)
PASS, FAIL, NA = "pass", "fail", "n/a"
BASELINE_ALGORITHMS = ("none", "")
# The attempt's identity columns as the results frames name them, then the gate's own.
IDENTITY = ATTEMPT_KEYS[: ATTEMPT_KEYS.index("model_path") + 1]
GATE_COLUMNS = [
    *IDENTITY,
    "baseline",
    COLUMN,
    "reason",
    "n_compared",
    "n_exact",
    "share_exact",
    "first_divergence_min",
    "first_divergence_p50",
    "first_divergence_max",
]


def first_divergence(baseline: Sequence[int], candidate: Sequence[int]) -> int | None:
    """Index of the first output token where ``candidate`` differs from ``baseline``; None when equal.

    When one is a strict prefix of the other (one stopped earlier), they diverge at the shorter length."""
    n = min(len(baseline), len(candidate))
    if n:
        a = np.asarray(baseline[:n], dtype=np.int64)
        b = np.asarray(candidate[:n], dtype=np.int64)
        diff = np.flatnonzero(a != b)
        if len(diff):
            return int(diff[0])
    return None if len(baseline) == len(candidate) else n


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one speculative attempt."""

    status: str  # PASS / FAIL / NA
    reason: str = ""
    n_compared: int = 0
    n_exact: int = 0
    divergences: tuple[int, ...] = ()  # first divergent position of every request that differs

    @property
    def share_exact(self) -> float:
        return self.n_exact / self.n_compared if self.n_compared else float("nan")

    def text(self) -> str:
        """The summary's cell: ``yes``, ``NO: 87% exact, first diverges at 12`` or ``n/a: <reason>``."""
        if self.status == PASS:
            return f"yes ({self.n_compared} requests)"
        if self.status == FAIL:
            return (
                f"NO: {self.share_exact:.0%} of {self.n_compared} exact, first divergence at token "
                f"{min(self.divergences)} (median {int(np.median(self.divergences))})"
            )
        return f"n/a: {self.reason}"


def compare(
    baseline: dict[tuple[str, str], list[int]], candidate: Sequence[tuple[tuple[str, str], list[int]]]
) -> Verdict:
    """Compare ``candidate`` requests ((prompt set, prompt id), output ids) with the baseline's outputs
    by prompt; requests whose prompt the baseline never answered are not compared."""
    n = exact = 0
    divergences: list[int] = []
    for key, ids in candidate:
        ref = baseline.get(key)
        if ref is None:
            continue
        n += 1
        pos = first_divergence(ref, ids)
        if pos is None:
            exact += 1
        else:
            divergences.append(pos)
    if not n:
        return Verdict(NA, "no request to compare (no output token ids for the baseline's prompts)")
    return Verdict(PASS if exact == n else FAIL, "", n, exact, tuple(divergences))


def sampled_temperature(rec: AttemptRecord) -> float | None:
    """The attempt's sampling temperature when some benchmark of it sampled (> 0); None when greedy or
    not recorded."""
    for bench in rec.benchmarks:
        sampling = bench.meta.get("sampling")
        t = sampling.get("temperature") if isinstance(sampling, dict) else None
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
            return float(t)
    return None


def _outputs(res: Results, rec: AttemptRecord) -> list[tuple[tuple[str, str], list[int]]]:
    """((prompt set, prompt id), output ids) of the attempt's successful measured requests with ids."""
    src = res.sources.get((rec.run_id, rec.host, rec.instance))
    if src is None:
        return []
    if isinstance(src, columnar.ParquetRows):
        stored: Sequence[str] = src.names
    else:
        stored = src.table.column_names if isinstance(src, columnar.TableRows) else ["output_ids"]
    if "output_ids" not in stored:  # recorded without ids: no row is read
        return []
    table = measured(rec, src, ["prompt_set", "prompt_id", "ok", "output_ids"])
    if not table.num_rows or table.column("output_ids").null_count == table.num_rows:
        return []
    out = []
    for ps, pid, ok, ids in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
        if ok and ids is not None and pid is not None:
            out.append(((str(ps), str(pid)), ids))
    return out


def is_baseline_algorithm(algorithm: str | None) -> bool:
    return str(algorithm or "").lower() in BASELINE_ALGORITHMS


def _is_baseline(rec: AttemptRecord) -> bool:
    return is_baseline_algorithm(rec.config.algorithm)


def gate(res: Results, *, enabled: bool = True) -> pd.DataFrame:
    """One row per speculative attempt that finished (columns :data:`GATE_COLUMNS`); ``enabled=False``
    (the off switch) answers ``n/a`` for every attempt without reading a request."""
    rows: list[dict[str, Any]] = []
    done = [r for r in res.records if r.outcome == "ok"]
    baselines: dict[tuple[Any, ...], AttemptRecord] = {}
    for rec in sorted((r for r in done if _is_baseline(r)), key=lambda r: r.instance):
        baselines.setdefault((rec.run_id, rec.host, rec.tp, rec.config.model_path), rec)
    base_outputs: dict[str, dict[tuple[str, str], list[int]]] = {}
    for rec in done:
        if _is_baseline(rec):
            continue
        base = baselines.get((rec.run_id, rec.host, rec.tp, rec.config.model_path))
        temperature = sampled_temperature(rec)
        if base is not None and temperature is None:
            temperature = sampled_temperature(base)
        if not enabled:
            verdict = Verdict(NA, "gate switched off")
        elif temperature is not None:
            verdict = Verdict(NA, f"sampled run (temperature {temperature:g})")
        elif base is None:
            verdict = Verdict(NA, "no algorithm: none config of the same model and TP on this host")
        else:
            if base.instance not in base_outputs:
                seen: dict[tuple[str, str], list[int]] = {}
                for key, ids in _outputs(res, base):
                    seen.setdefault(key, ids)
                base_outputs[base.instance] = seen
            outputs = _outputs(res, rec)
            if not base_outputs[base.instance] or not outputs:
                verdict = Verdict(
                    NA, "no output token ids recorded (the native API at temperature 0 has them)"
                )
            else:
                verdict = compare(base_outputs[base.instance], outputs)
        div = np.asarray(verdict.divergences, dtype=float)
        rows.append(
            {
                **{k: v for k, v in attempt_keys(rec).items() if k in IDENTITY},
                "baseline": base.config.name if base is not None else None,
                COLUMN: verdict.status,
                "reason": verdict.reason,
                "n_compared": verdict.n_compared,
                "n_exact": verdict.n_exact,
                "share_exact": verdict.share_exact,
                "first_divergence_min": float(div.min()) if len(div) else float("nan"),
                "first_divergence_p50": float(np.median(div)) if len(div) else float("nan"),
                "first_divergence_max": float(div.max()) if len(div) else float("nan"),
                "text": verdict.text(),
            }
        )
    return pd.DataFrame(rows, columns=[*GATE_COLUMNS, "text"])
