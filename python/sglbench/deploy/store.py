"""The deployment answer's files: ``<run_dir>/breakeven.json``, ``frontier.json``, ``limits.json``.

``sglbench summarize`` writes them (:func:`write`, the three together and atomically,
``sglbench.outfiles``); ``sglbench report`` and ``sglbench compare`` read them (:func:`answers`) when
every run's three files are there and their ``source`` still matches (the same records, seed and
replicates), and compute the answer from the records otherwise, saying why on stderr. A file from an
older or newer sglbench, or one that does not parse, is recomputed the same way, never trusted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sglbench import bootstrap, outfiles
from sglbench.deploy import schema
from sglbench.deploy.answer import Answer, compute, source
from sglbench.hostlib.result_schema import RecordError
from sglbench.results import Results


def files(answer: Answer) -> list[tuple[Path, bytes]]:
    return [
        (answer.run_dir / schema.FILE_OF[type(doc)], schema.to_json(doc))
        for doc in (answer.breakeven, answer.frontier, answer.limits)
    ]


def write(answers: Sequence[Answer]) -> list[Path]:
    """Write every run's three files; :class:`sglbench.outfiles.OutputError` when one cannot be written
    (then none of a run's files is replaced)."""
    written: list[Path] = []
    for a in answers:
        written += outfiles.write_files(files(a), flag="deploy files")
    return written


def read(run_id: str, run_dir: Path) -> Answer:
    """The three files of one run; RecordError naming the file and field when one does not match."""
    docs = {cls: schema.read_document(cls, run_dir / name) for cls, name in schema.FILE_OF.items()}
    return Answer(
        run_id=run_id,
        run_dir=run_dir,
        breakeven=docs[schema.BreakevenDoc],  # type: ignore[arg-type]
        frontier=docs[schema.FrontierDoc],  # type: ignore[arg-type]
        limits=docs[schema.LimitsDoc],  # type: ignore[arg-type]
    )


def _stored(res: Results, seed: int, n_boot: int) -> tuple[list[Answer] | None, str]:
    out = []
    for run in res.runs.to_dict("records"):
        run_id, run_dir = str(run["run_id"]), Path(run["run_dir"])
        missing = [n for n in schema.FILE_OF.values() if not (run_dir / n).is_file()]
        if missing:
            return None, f"{run_dir}: no {', '.join(missing)} (sglbench summarize writes them)"
        try:
            stored = read(run_id, run_dir)
        except RecordError as exc:
            return None, str(exc)
        want = source([r for r in res.records if r.run_id == run_id], seed=seed, n_boot=n_boot)
        for doc in (stored.breakeven, stored.frontier, stored.limits):
            if doc.source != want or doc.run_id != run_id:
                name = schema.FILE_OF[type(doc)]
                return None, f"{run_dir / name} is stale (the records or bootstrap settings changed since)"
        out.append(stored)
    return out, ""


def answers(
    res: Results,
    *,
    prog: str,
    seed: int = bootstrap.DEFAULT_SEED,
    n_boot: int = bootstrap.DEFAULT_BOOT,
    table: pd.DataFrame | None = None,
) -> list[Answer]:
    """Every run's answer: read from its files when they are current, else computed (one stderr line;
    ``table``: the caller's summary table of ``res`` with the same seed and replicates, if it has one)."""
    stored, why = _stored(res, seed, n_boot)
    if stored is not None:
        return stored
    print(f"sglbench {prog}: deployment answer computed from the records: {why}", file=sys.stderr)
    return compute(res, seed=seed, n_boot=n_boot, table=table)
