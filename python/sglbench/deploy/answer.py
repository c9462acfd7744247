"""The deployment answer of each run in a set of results: its three documents, built from the records.

:func:`build` takes what ``sglbench summarize`` has already computed (the summary table and the repeat
samples behind it) so nothing is bootstrapped twice; :func:`compute` starts from the results alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sglbench import bootstrap, summarize
from sglbench.deploy import breakeven, frontier, limits, schema
from sglbench.deploy.levels import Series, groups, measured_series
from sglbench.hostlib import sglang_facts as facts
from sglbench.records import AttemptRecord
from sglbench.results import Results


@dataclass(frozen=True)
class Answer:
    """The three documents of one run."""

    run_id: str
    run_dir: Path
    breakeven: schema.BreakevenDoc
    frontier: schema.FrontierDoc
    limits: schema.LimitsDoc


def source(records: list[AttemptRecord], *, seed: int, n_boot: int) -> schema.Source:
    """A digest of the run's ``record.json`` files (path under the run and content) and the bootstrap."""
    h = hashlib.sha256()
    for rec in sorted(records, key=lambda r: (r.host, r.instance)):
        try:
            data = rec.path.read_bytes()
        except OSError:
            data = b""
        h.update(f"{rec.host}/{rec.instance}:{hashlib.sha256(data).hexdigest()}\n".encode())
    return schema.Source(
        records=len(records),
        records_sha256=h.hexdigest(),
        seed=seed,
        n_boot=n_boot,
        ci_level=bootstrap.CI_LEVEL,
    )


def _pairs(members: list[Series], reps: breakeven.Replicates) -> list[schema.Pair]:
    bases = [s for s in members if s.key.is_baseline]
    if not bases:
        return []
    return [
        breakeven.pair(breakeven.compare_levels(s, bases[0], reps)) for s in members if not s.key.is_baseline
    ]


def _run_answer(
    run_id: str,
    run_dir: Path,
    series: list[Series],
    res: Results,
    sizes: dict[Any, float],
    src: schema.Source,
) -> Answer:
    runs = res.runs.set_index("run_id")
    simulated = bool(runs.loc[run_id, "simulated"])
    cpu = bool(runs.loc[run_id, "cpu_engine"])
    reps = breakeven.Replicates(src.seed, src.n_boot)
    pairs: list[schema.Pair] = []
    rows: list[schema.DeployRow] = []
    for key, members in groups(series).items():
        ps = _pairs(members, reps)
        pairs += ps
        rows.append(breakeven.deploy_row(key, members, ps))
    common = {"run_id": run_id, "simulated": simulated, "cpu_engine": cpu, "source": src}
    return Answer(
        run_id=run_id,
        run_dir=run_dir,
        breakeven=schema.BreakevenDoc(
            schema=facts.BREAKEVEN_SCHEMA, **common, method=breakeven.METHOD, pairs=pairs, deploy=rows
        ),
        frontier=schema.FrontierDoc(
            schema=facts.FRONTIER_SCHEMA, **common, method=frontier.METHOD, groups=frontier.frontiers(series)
        ),
        limits=schema.LimitsDoc(
            schema=facts.LIMITS_SCHEMA,
            **common,
            method=limits.METHOD,
            limits=[limits.label_series(s, sizes) for s in series],
        ),
    )


def build(
    res: Results,
    table: pd.DataFrame,
    samples: dict[tuple[Any, ...], list[bootstrap.RepeatSample]],
    *,
    seed: int = bootstrap.DEFAULT_SEED,
    n_boot: int = bootstrap.DEFAULT_BOOT,
) -> list[Answer]:
    """One answer per run of ``res``, from its summary table and repeat samples."""
    series = measured_series(res, table, samples)
    sizes = limits.request_sizes(res)
    out = []
    for run in res.runs.to_dict("records"):
        run_id = str(run["run_id"])
        recs = [r for r in res.records if r.run_id == run_id]
        src = source(recs, seed=seed, n_boot=n_boot)
        mine = [s for s in series if s.key.run_id == run_id]
        out.append(_run_answer(run_id, Path(run["run_dir"]), mine, res, sizes, src))
    return out


def compute(
    res: Results,
    *,
    seed: int = bootstrap.DEFAULT_SEED,
    n_boot: int = bootstrap.DEFAULT_BOOT,
    table: pd.DataFrame | None = None,
) -> list[Answer]:
    """:func:`build` from the results alone; ``table`` is ``summarize.summary_table(res)`` with the same
    seed and replicates when the caller has it (else computed here)."""
    samples = summarize.repeat_samples(res)
    if table is None:
        table = summarize.summary_table(res, seed=seed, n_boot=n_boot, samples=samples)
    return build(res, table, samples, seed=seed, n_boot=n_boot)
