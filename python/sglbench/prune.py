"""``sglbench prune``: retention of run directories (the scheduled campaign calls it after each run).

A run is removed when it is not among the newest ``--keep`` runs AND (with ``--keep-days D``) it is
older than D days. Only directories that are sglbench runs are considered (``_runner/run.json`` or
``<host>/<instance>/record.json`` inside); a run that is still going (``run.json`` status running with a
live pid on this machine) is never removed. Runs are ordered by start time (``run.json``), else by the
directory's modification time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sglbench.records import find_record_files
from sglbench.runner import read_run_meta


@dataclass(frozen=True)
class RunDir:
    path: Path
    started_at: float
    running: bool


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_runs(results: Path) -> list[RunDir]:
    """sglbench run directories under ``results``, oldest first."""
    out = []
    if not results.is_dir():
        return out
    for p in results.iterdir():
        if not p.is_dir() or p.name.startswith((".", "_")) or p.is_symlink():
            continue
        meta = read_run_meta(p)
        if meta is None and not find_record_files(p):
            continue  # not ours: never touch it
        started = meta.get("started_at") if meta else None
        if not isinstance(started, (int, float)):
            started = p.stat().st_mtime
        running = bool(meta and meta.get("status") == "running" and _pid_alive(meta.get("pid")))
        out.append(RunDir(p, float(started), running))
    return sorted(out, key=lambda r: (r.started_at, r.path.name))


def select_prunable(runs: list[RunDir], keep: int, keep_days: float, now: float) -> list[RunDir]:
    """Runs beyond the newest ``keep`` that are also older than ``keep_days`` (0 = any age); never running."""
    if keep < 0:
        raise ValueError("keep must be >= 0")
    candidates = runs[: max(0, len(runs) - keep)]
    cutoff = now - keep_days * 86400.0
    return [r for r in candidates if not r.running and (keep_days <= 0 or r.started_at < cutoff)]


def run_prune(args: argparse.Namespace) -> int:
    if args.keep < 1:
        print("sglbench prune: error: --keep must be >= 1 (the newest run is always kept)", file=sys.stderr)
        return 2
    if not args.keep_days >= 0:  # NaN included
        print(
            f"sglbench prune: error: --keep-days must be a number of days >= 0, got {args.keep_days}",
            file=sys.stderr,
        )
        return 2
    results = args.results or Path(os.environ.get("SGLBENCH_RESULTS_DIR") or "results")
    if not results.exists():
        print(f"sglbench prune: nothing to do: {results} does not exist")
        return 0
    if not results.is_dir():
        print(
            f"sglbench prune: error: --results {results} is not a directory; give the results root that "
            "holds the run directories",
            file=sys.stderr,
        )
        return 2
    try:
        runs = list_runs(results)
    except OSError as exc:
        print(
            f"sglbench prune: error: cannot read {exc.filename or results} ({exc.strerror or exc})",
            file=sys.stderr,
        )
        return 2
    doomed = select_prunable(runs, args.keep, args.keep_days, time.time())
    for r in doomed:
        if args.dry_run:
            print(f"would remove {r.path}")
            continue
        # Move aside first so a half-deleted run is never mistaken for a run.
        trash = r.path.with_name(f".pruning-{r.path.name}")
        try:
            os.replace(r.path, trash)
            shutil.rmtree(trash)
        except OSError as exc:
            print(f"sglbench prune: error: cannot remove {r.path} ({exc.strerror or exc})", file=sys.stderr)
            return 2
        print(f"removed {r.path}")
    kept = len(runs) - len(doomed)
    print(
        f"sglbench prune: {len(runs)} run(s) in {results}, {'would remove' if args.dry_run else 'removed'} "
        f"{len(doomed)}, kept {kept}"
    )
    return 0
