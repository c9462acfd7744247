"""``sglbench migrate``: give every attempt of a run its ``requests.parquet`` (and, asked, the JSONL export).

Runs written before the request rows were columnar have only ``requests.jsonl`` per attempt. Every command
still reads them (checked row by row and migrated in memory, :mod:`sglbench.columnar`); this writes the
Parquet file once so later reads take only the columns they need. The JSONL file stays where it is.
``--jsonl`` goes the other way: it writes ``requests.jsonl`` beside a Parquet file that has none (the
export for tools that read JSON lines). Nothing is deleted or overwritten.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglbench import columnar
from sglbench.records import RecordError, find_record_files
from sglbench.results import ResultsError, find_run_dirs


def migrate_runs(paths: list[Path], *, jsonl: bool = False) -> list[str]:
    """Migrate every attempt under ``paths`` (run dirs or results roots); one line per attempt touched."""
    lines = []
    for run in [d for p in paths for d in find_run_dirs(p)]:
        for record in find_record_files(run):
            attempt = record.parent
            done = columnar.migrate_attempt(attempt)
            if done is None:
                continue
            if done.wrote is not None:
                lines.append(f"{attempt}: wrote {columnar.PARQUET_FILE} ({done.rows:,} rows)")
            if jsonl and not (attempt / columnar.JSONL_FILE).is_file():
                columnar.export_jsonl(
                    columnar.ParquetRows.open(attempt / columnar.PARQUET_FILE), attempt / columnar.JSONL_FILE
                )
                lines.append(f"{attempt}: wrote {columnar.JSONL_FILE} ({done.rows:,} rows)")
    return lines


def run_migrate(args: argparse.Namespace) -> int:
    try:
        lines = migrate_runs(list(args.run_dirs), jsonl=args.jsonl)
    except (ResultsError, RecordError, OSError) as exc:
        print(f"sglbench migrate: error: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    print(f"sglbench migrate: {len(lines)} file(s) written")
    return 0
