"""The result files on the controller: find and read ``record.json`` files into the typed contract.

``results/<run_id>/<host>/<config>-tp<N>/record.json`` (schema ``sglbench.attempt/1``) is written by the
``sglbench_record`` action (``plugins/action/sglbench_record.py``); its ``benchmark`` field holds the
benchmark summary (``sglbench.bench/1``) and per-request rows sit beside it as ``requests.jsonl`` (or
``requests.parquet``). The documents themselves, their dataclasses and the rules for reading them are
the result contract, :mod:`sglbench.hostlib.result_schema`; this module adds the files: reading them
(errors name the file), the summary file beside an older record, and finding the records of a run.
No pandas, no statistics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sglbench.hostlib.result_schema import (
    REQUEST_FILES,
    AttemptRecord,
    Benchmark,
    BenchPoint,
    ConfigSpec,
    Distribution,
    Failure,
    RecordError,
    Timings,
    launch_device,
    stand_in_time_scale,
)

__all__ = [
    "REQUEST_FILES",
    "AttemptRecord",
    "BenchPoint",
    "Benchmark",
    "ConfigSpec",
    "Distribution",
    "Failure",
    "RecordError",
    "Timings",
    "find_record_files",
    "find_unrecorded_dirs",
    "launch_device",
    "load_record",
    "parse_record",
    "stand_in_time_scale",
]

# File beside record.json that may hold the benchmark summary when the record's field is empty.
SUMMARY_FILES = ("summary.json", "bench/summary.json")


def parse_record(data: Any, path: Path | str = "<record>") -> AttemptRecord:
    """Validate and convert one parsed ``record.json`` (a summary file beside it fills an empty
    ``benchmark``); raises :class:`RecordError`."""
    path = Path(path)

    def side_summary() -> tuple[Path, Any] | None:
        for name in SUMMARY_FILES:
            file = path.parent / name
            if file.is_file():
                return file, _read_json(file)
        return None

    return AttemptRecord.from_dict(data, path, side_summary=side_summary)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(
            path,
            "<file>",
            f"is not UTF-8 JSON text (binary or damaged at byte {exc.start}); move it aside or re-run the "
            "campaign to redo this attempt",
        ) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise RecordError(path, "<file>", "nests JSON too deeply to be a record; move it aside") from None
    except json.JSONDecodeError as exc:
        raise RecordError(
            path,
            "<file>",
            f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "an interrupted run leaves such files: re-run the campaign to redo this attempt",
        ) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise RecordError(path, "<file>", f"is not a usable JSON record ({exc})") from None


def load_record(path: Path | str) -> AttemptRecord:
    """Read and validate one ``record.json``."""
    path = Path(path)
    return parse_record(_read_json(path), path)


def _attempt_dirs(run_dir: Path) -> list[Path]:
    """``<run_dir>/<host>/<instance>/`` directories, sorted; directories starting with ``.`` or ``_``
    (moved-aside attempts, runner artifacts) are ignored."""
    out = []
    for host_dir in sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        out += sorted(p for p in host_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return out


def find_record_files(run_dir: Path) -> list[Path]:
    """``<run_dir>/<host>/<instance>/record.json`` files, sorted (see :func:`_attempt_dirs`)."""
    return [d / "record.json" for d in _attempt_dirs(run_dir) if (d / "record.json").is_file()]


def find_unrecorded_dirs(run_dir: Path) -> list[Path]:
    """Attempt directories without a ``record.json``: attempts that began (a point was committed, or an
    earlier record moved aside) and were never recorded, because their host dropped out, the run was
    killed, or the attempt is still running."""
    return [d for d in _attempt_dirs(run_dir) if not (d / "record.json").is_file()]
