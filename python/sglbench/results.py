"""Campaign results as tidy pandas DataFrames (the public API for notebooks).

    >>> from sglbench import results
    >>> res = results.load("results/20261129T101500Z")          # or a list of run dirs
    >>> res.points.groupby(["tp", "config", "concurrency"]).output_throughput_tok_s.mean()

``load`` accepts a run directory (``<results>/<run_id>``, holding ``<host>/<instance>/record.json``),
a results root holding several runs, or a list of either; several hosts and runs merge into one set of
frames. Frames (one row per ...):

- ``runs``: run (run_id, run_dir, hosts, attempts, simulated, cpu_engine, started_at, ended_at).
- ``attempts``: config attempt (host, instance, config, algorithm, tp, outcome ok/skipped/failed, cause,
  KV tokens and max running requests predicted vs observed, time to ready, simulated flag, cpu_engine flag:
  the real SGLang on its CPU engine, ``--device cpu``, ...).
- ``points``: benchmark point and repeat (attempt keys + prompt_set, concurrency, repeat, throughput and
  latency percentiles, acceptance length, valid; with telemetry, every figure of
  ``result_schema.TELEMETRY_FIGURES`` (J/token, $/Mtok, power, KV usage, ...), ``telemetry_flags``
  (comma-separated ``TELEMETRY_FLAGS``), ``steady_status`` and ``throttle_reasons``; null without).
- ``requests``: measured request, when the attempt kept ``requests.parquet``/``requests.jsonl``
  (attempt keys + prompt_set, concurrency, repeat, category, tokens, ttft_ms, e2e_ms, accept_length, ok).
- ``cut``: attempt that began and was never recorded (run_id, host, instance, config, tp, phase,
  points_committed, reason): its host dropped out, the run was killed, or it is still running. Never
  valid; its committed points stay on disk for the resume and are in no other frame.
- ``dropped``: host that dropped out of a run started by ``sglbench run`` (run_id, host, reason, message,
  phase, instance, recorded, not_started), from the run's ``_runner/run.json``.

Request rows are read from their files (:mod:`sglbench.columnar`) when first asked for, and only the
columns asked for: ``res.request_columns(["config", "ttft_ms"])`` reads one stored column per attempt,
``res.request_tokens()`` what the bootstrap needs, ``res.requests`` every column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sglbench import columnar, events
from sglbench.hostlib import result_schema
from sglbench.hostlib.plan_policy import flag as plan_flag
from sglbench.hostlib.result_schema import METRICS, STATS
from sglbench.records import AttemptRecord, find_record_files, find_unrecorded_dirs, load_record
from sglbench.resume import POINTS_DIR

# cpu_engine: measured against the real SGLang on its CPU engine (--device cpu): neither simulated nor GPU.
ATTEMPT_KEYS = [
    "run_id",
    "host",
    "instance",
    "config",
    "algorithm",
    "tp",
    "model_path",
    "simulated",
    "cpu_engine",
]
POINT_KEYS = [*ATTEMPT_KEYS, "prompt_set", "point", "concurrency", "request_rate", "repeat"]
REQUEST_FIELDS = result_schema.REQUEST_FIELDS


class ResultsError(ValueError):
    """The given path holds no results or cannot be read; the message says what was expected."""


AttemptKey = tuple[str, str, str]  # (run_id, host, instance)


@dataclass
class Results:
    """Tidy frames of one or more runs; see the module docstring for the columns.

    Request rows stay in their files until a command asks for them: :meth:`request_columns` reads only
    the columns it is given, :meth:`request_tokens` only what the bootstrap needs; ``requests`` is the
    whole frame (for notebooks)."""

    runs: pd.DataFrame
    attempts: pd.DataFrame
    points: pd.DataFrame
    records: list[AttemptRecord]
    sources: dict[AttemptKey, columnar.RowSource] = field(default_factory=dict)
    cut: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CUT_COLUMNS))
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DROPPED_COLUMNS))
    _frames: dict[tuple[str, ...], pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def hosts(self) -> list[str]:
        """Every host of the results: those with records, with cut attempts, and those that dropped out."""
        return sorted({*self.attempts["host"], *self.cut["host"], *self.dropped["host"]})

    @property
    def simulated(self) -> bool:
        return bool(len(self.attempts)) and bool(self.attempts["simulated"].any())

    @property
    def cpu_engine(self) -> bool:
        """Some attempt ran against the real SGLang's CPU engine (``AttemptRecord.cpu_engine``)."""
        return bool(len(self.attempts)) and bool(self.attempts["cpu_engine"].any())

    def _with_rows(self) -> list[tuple[AttemptRecord, columnar.RowSource]]:
        return [
            (r, self.sources[(r.run_id, r.host, r.instance)])
            for r in self.records
            if (r.run_id, r.host, r.instance) in self.sources
        ]

    def request_columns(self, columns: Iterable[str]) -> pd.DataFrame:
        """The requests frame with only ``columns`` (of :data:`REQUEST_COLUMNS`); read once per set."""
        cols = tuple(c for c in REQUEST_COLUMNS if c in set(columns))
        if cols not in self._frames:
            parts = [request_frame(r, src, list(cols)) for r, src in self._with_rows()]
            parts = [p for p in parts if len(p)]
            self._frames[cols] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
        return self._frames[cols]

    @property
    def requests(self) -> pd.DataFrame:
        """Every measured request with every column of :data:`REQUEST_COLUMNS`."""
        return self.request_columns(REQUEST_COLUMNS)

    @property
    def has_requests(self) -> bool:
        return bool(self.sources)

    def request_tokens(self) -> dict[tuple[Any, ...], np.ndarray]:
        """Output tokens of successful measured requests per (run_id, host, instance, prompt_set, point,
        repeat), in file order: the request-level part of the bootstrap."""
        out: dict[tuple[Any, ...], np.ndarray] = {}
        for rec, src in self._with_rows():
            out.update(request_tokens(rec, src))
        return out


# -- discovery ------------------------------------------------------------------------------------
def find_run_dirs(path: Path | str) -> list[Path]:
    """The run directories under ``path``: ``path`` itself when it is one, else its children that are."""
    p = Path(path)
    if not p.exists():
        raise ResultsError(f"{p}: no such directory (give a run dir such as results/<run_id>)")
    if not p.is_dir():
        raise ResultsError(f"{p}: not a directory (give a run dir such as results/<run_id>)")
    if find_record_files(p):
        return [p]
    runs = [c for c in sorted(p.iterdir()) if c.is_dir() and not c.name.startswith((".", "_"))]
    runs = [c for c in runs if find_record_files(c)]
    if not runs:
        raise ResultsError(
            f"{p}: no record.json found at <run_dir>/<host>/<instance>/record.json or one level deeper; "
            "is this the results directory of a run that reached its first config?"
        )
    return runs


# -- frames ---------------------------------------------------------------------------------------
def attempt_keys(rec: AttemptRecord) -> dict[str, Any]:
    """The identity columns (:data:`ATTEMPT_KEYS`) of one attempt, as every results frame has them."""
    return {
        "run_id": rec.run_id,
        "host": rec.host,
        "instance": rec.instance,
        "config": rec.config.name,
        "algorithm": rec.config.algorithm,
        "tp": rec.tp,
        "model_path": rec.config.model_path,
        "simulated": rec.simulated,
        "cpu_engine": rec.cpu_engine,
    }


def _recommendations(rec: AttemptRecord) -> list[dict[str, Any]]:
    recs = (rec.plan or {}).get("recommendations") or []
    return [r for r in recs if isinstance(r, dict)]


def autotuned_flags(plan: dict[str, Any] | None) -> str | None:
    """The flags autotune changed for this attempt as launch-flag text (``--mamba-ssm-dtype bfloat16``),
    or None when the command ran as written."""
    tune = (plan or {}).get("autotune")
    if not isinstance(tune, dict) or not tune.get("applied"):
        return None
    flags = tune.get("flags") if isinstance(tune.get("flags"), dict) else {}
    words = [plan_flag(k) if v is True else f"{plan_flag(k)} {v}" for k, v in flags.items()]
    return " ".join(words) or None


def attempt_row(rec: AttemptRecord) -> dict[str, Any]:
    f = rec.failure
    plan = rec.plan or {}
    failure_plan = plan.get("failure") if isinstance(plan.get("failure"), dict) else None
    row = attempt_keys(rec)
    row.update(
        draft_model_path=rec.config.draft_model_path,
        outcome=rec.outcome,
        cause=f.cause if f else None,
        failure_phase=f.phase if f else None,
        failure_message=f.message if f else None,
        failure_lines=list(f.lines) if f else [],
        kv_tokens_predicted=rec.kv_tokens_predicted,
        kv_tokens_observed=rec.kv_tokens_observed,
        max_running_requests_predicted=rec.max_running_requests_predicted,
        max_running_requests_observed=rec.max_running_requests_observed,
        plan_fits=plan.get("fits") if plan else None,
        plan_failure=(failure_plan or {}).get("kind"),
        autotuned_flags=autotuned_flags(plan),
        recommendations=_recommendations(rec),
        time_to_ready_s=rec.timings.time_to_ready_s,
        started_at=rec.timings.started_at,
        ended_at=rec.timings.ended_at,
        total_s=rec.timings.total_s,
        prompt_sets=",".join(b.prompt_set for b in rec.benchmarks),
        n_points=sum(len(b.points) for b in rec.benchmarks),
        points_missing=sum(len(b.missing) for b in rec.benchmarks),
        record_path=str(rec.path),
    )
    return row


def _real_time(value: float | None, scale: float | None, kind: str) -> float | None:
    """Undo the stand-in's time scale: rates x scale, durations / scale (None passes through)."""
    if value is None or scale is None:
        return value
    return value * scale if kind == "rate" else value / scale


def point_rows(rec: AttemptRecord) -> list[dict[str, Any]]:
    """Benchmark points. Against a time-scaled stand-in, rates and latencies are given at real-world
    time (measured rate x time scale, measured latency / time scale), ``sim_time_scale`` says by how
    much; the client's own overhead is scaled too, so these are the stand-in's model, not a measurement.
    """
    rows = []
    keys = attempt_keys(rec)
    for b in rec.benchmarks:
        scale = b.sim_time_scale
        for p in b.points:
            row = dict(keys)
            row["simulated"] = keys["simulated"] or b.simulated
            row["sim_time_scale"] = scale
            row.update(
                prompt_set=b.prompt_set,
                point=p.point,
                concurrency=p.concurrency,
                request_rate=p.request_rate,
                repeat=p.repeat,
                seed=p.seed,
                output_throughput_tok_s=_real_time(p.output_throughput_tok_s, scale, "rate"),
                request_throughput=_real_time(p.request_throughput, scale, "rate"),
                duration_s=_real_time(p.duration_s, scale, "time"),
                total_output_tokens=p.total_output_tokens,
                n_ok=p.n_ok,
                n_err=p.n_err,
                accept_length_mean=p.accept_length_mean,
                valid=p.valid,
                invalid_reasons="; ".join(p.invalid_reasons),
            )
            for metric in METRICS:
                dist = p.dist(metric.key)
                for stat in STATS:
                    row[metric.column(stat)] = _real_time(getattr(dist, stat), scale, "time")
            row.update(telemetry_cells(p.telemetry, scale))
            rows.append(row)
    return rows


def telemetry_cells(tel: result_schema.PointTelemetry | None, scale: float | None) -> dict[str, Any]:
    """A point's telemetry columns (null without telemetry); against a time-scaled stand-in, energy, J/token
    and cost at real-world time like the latencies (``Figure.scaled``)."""
    cells: dict[str, Any] = {f.key: None for f in result_schema.TELEMETRY_FIGURES}
    cells.update(telemetry_flags=None, steady_status=None, throttle_reasons=None)
    if tel is None:
        return cells
    for f in result_schema.TELEMETRY_FIGURES:
        cells[f.key] = _real_time(tel.figure(f.key), scale, f.scaled) if f.scaled else tel.figure(f.key)
    flags = [f for f in result_schema.TELEMETRY_FLAGS if f in tel.flags]
    if tel.error:
        flags.append("unusable")
    cells.update(
        telemetry_flags=", ".join(flags),
        steady_status=tel.steady_status,
        throttle_reasons=", ".join(tel.throttle_reasons),
    )
    return cells


# Request columns read from the rows (the attempt keys and the stand-in's scale come from the record).
REQUEST_ROW_COLUMNS = [
    "prompt_set",
    "point",
    "concurrency",
    "repeat",
    *REQUEST_FIELDS,
    "ok",
    "ttft_ms",
    "e2e_ms",
    "accept_length",
]


def _truthy(col: pa.ChunkedArray) -> np.ndarray:
    """A warmup/ok column as booleans (null: False; a number: nonzero)."""
    if pa.types.is_null(col.type):
        return np.zeros(len(col), dtype=bool)
    if not pa.types.is_boolean(col.type):
        col = pc.not_equal(pc.cast(col, pa.float64()), 0.0)
    return np.asarray(pc.fill_null(col, False).to_numpy(zero_copy_only=False), dtype=bool)


def _measured(rec: AttemptRecord, source: columnar.RowSource, columns: list[str]) -> pa.Table:
    """``columns`` of the attempt's measured (non-warmup) rows; ``prompt_set`` filled as the record says."""
    table = source.read([*columns, "warmup"])
    keep = ~_truthy(table.column("warmup"))
    table = table.drop(["warmup"])
    if not keep.all():
        table = table.filter(pa.array(keep))
    if "prompt_set" in columns:
        fallback = rec.benchmarks[0].prompt_set if len(rec.benchmarks) == 1 else None
        ps = table.column("prompt_set")
        ps = pa.nulls(len(ps), pa.string()) if pa.types.is_null(ps.type) else ps.cast(pa.string())
        filled = pc.if_else(pc.fill_null(pc.not_equal(ps, ""), False), ps, fallback or "default")
        table = table.set_column(table.column_names.index("prompt_set"), "prompt_set", filled)
    return table


def measured(rec: AttemptRecord, source: columnar.RowSource, columns: list[str]) -> pa.Table:
    """``columns`` of the attempt's measured (non-warmup) request rows, any row column (an absent field
    reads as nulls); ``prompt_set`` filled as the record says."""
    return _measured(rec, source, columns)


def request_frame(
    rec: AttemptRecord, source: columnar.RowSource, columns: list[str] | None = None
) -> pd.DataFrame:
    """Measured (non-warmup) requests of one attempt: the attempt keys plus ``columns`` of
    :data:`REQUEST_COLUMNS` (all by default); only the row columns asked for are read."""
    wanted = [c for c in (columns or REQUEST_COLUMNS) if c in REQUEST_COLUMNS]
    row_cols = [c for c in REQUEST_ROW_COLUMNS if c in wanted]
    frame = _measured(rec, source, row_cols).to_pandas()
    scale = rec.benchmarks[0].sim_time_scale if len(rec.benchmarks) == 1 else None
    for col in ("ttft_ms", "e2e_ms"):
        if col in frame and scale is not None:
            frame[col] = frame[col] / scale
    if "ok" in frame:
        frame["ok"] = frame["ok"].astype(bool)
    keys = {**attempt_keys(rec), "sim_time_scale": scale}
    for k, v in keys.items():
        if k in wanted:
            frame[k] = v
    return frame[wanted]


def request_tokens(rec: AttemptRecord, source: columnar.RowSource) -> dict[tuple[Any, ...], np.ndarray]:
    """Output tokens of the successful measured requests, per (attempt keys, prompt set, point, repeat)
    in file order (missing counts are 0); reads four columns of the rows."""
    table = _measured(rec, source, ["prompt_set", "point", "repeat", "ok", "completion_tokens"])
    table = table.filter(pa.array(_truthy(table.column("ok"))))
    if not table.num_rows:
        return {}
    tokens = np.nan_to_num(columnar.floats(table.column("completion_tokens")), nan=0.0)
    parts = pd.DataFrame({c: table.column(c).to_pandas() for c in ("prompt_set", "point", "repeat")})
    head = (rec.run_id, rec.host, rec.instance)
    return {
        (*head, *(key if isinstance(key, tuple) else (key,))): tokens[idx]
        for key, idx in parts.groupby(
            ["prompt_set", "point", "repeat"], sort=False, dropna=False
        ).indices.items()
    }


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(rows)


ATTEMPT_COLUMNS = [
    *ATTEMPT_KEYS,
    "draft_model_path",
    "outcome",
    "cause",
    "failure_phase",
    "failure_message",
    "failure_lines",
    "kv_tokens_predicted",
    "kv_tokens_observed",
    "max_running_requests_predicted",
    "max_running_requests_observed",
    "plan_fits",
    "plan_failure",
    "autotuned_flags",
    "recommendations",
    "time_to_ready_s",
    "started_at",
    "ended_at",
    "total_s",
    "prompt_sets",
    "n_points",
    "points_missing",
    "record_path",
]
POINT_COLUMNS = [
    *POINT_KEYS,
    "seed",
    "sim_time_scale",
    "output_throughput_tok_s",
    "request_throughput",
    "duration_s",
    "total_output_tokens",
    "n_ok",
    "n_err",
    "accept_length_mean",
    "valid",
    "invalid_reasons",
    *result_schema.point_metric_columns(),
    *result_schema.telemetry_columns(),
    "telemetry_flags",
    "steady_status",
    "throttle_reasons",
]
REQUEST_COLUMNS = [
    *ATTEMPT_KEYS,
    "prompt_set",
    "point",
    "concurrency",
    "repeat",
    *REQUEST_FIELDS,
    "sim_time_scale",
    "ok",
    "ttft_ms",
    "e2e_ms",
    "accept_length",
]


# simulated / cpu_engine: as the run's records are (a cut attempt measured nothing itself).
CUT_COLUMNS = [
    "run_id",
    "host",
    "instance",
    "config",
    "tp",
    "phase",
    "points_committed",
    "reason",
    "simulated",
    "cpu_engine",
]
DROPPED_COLUMNS = ["run_id", "host", "reason", "message", "phase", "instance", "recorded", "not_started"]


def dropped_hosts(run_dir: Path) -> list[events.DroppedHost]:
    """The hosts ``sglbench run`` recorded as dropped out of its last session of this run (``run.json``)."""
    from sglbench.runner import read_run_meta

    entries = (read_run_meta(run_dir) or {}).get("dropped")
    found = [events.DroppedHost.from_dict(e) for e in entries] if isinstance(entries, list) else []
    return [d for d in found if d is not None]


def committed_points(attempt_dir: Path) -> int:
    """Points committed ``ok`` under ``<attempt>/points/`` (a damaged file counts as none)."""
    n = 0
    for f in sorted((attempt_dir / POINTS_DIR).glob("*.json")):
        try:
            doc = result_schema.PointFile.from_dict(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        n += doc is not None and doc.outcome == "ok"
    return n


def _config_tp(instance: str) -> tuple[str, int | None]:
    """(config, TP size) from a unit instance name ``<config>-tp<N>``."""
    m = events.INSTANCE_TP.search(instance)
    return (instance[: m.start()], int(m.group("tp"))) if m else (instance, None)


def cut_rows(run_dir: Path, run_id: str, dropped: list[events.DroppedHost]) -> list[dict[str, Any]]:
    """One row per attempt of the run that began and has no record: the directories without a
    ``record.json``, and the attempt a dropped host was in when it left none."""
    by_host = {d.host: d for d in dropped}
    rows = []
    for d in find_unrecorded_dirs(run_dir):
        host, instance = d.parent.name, d.name
        gone = by_host.get(host)
        cut_here = gone is not None and gone.instance == instance
        config, tp = _config_tp(instance)
        rows.append(
            {
                "run_id": run_id,
                "host": host,
                "instance": instance,
                "config": gone.config if cut_here and gone.config else config,
                "tp": gone.tp if cut_here and gone.tp is not None else tp,
                "phase": gone.phase if cut_here else None,
                "points_committed": committed_points(d),
                "reason": f"host {gone.reason}"
                if gone is not None
                else "not recorded: the run was killed, or the attempt is still running",
            }
        )
    seen = {(r["host"], r["instance"]) for r in rows}
    for gone in dropped:
        if gone.instance and (gone.host, gone.instance) not in seen:
            config, tp = _config_tp(gone.instance)
            rows.append(
                {
                    "run_id": run_id,
                    "host": gone.host,
                    "instance": gone.instance,
                    "config": gone.config or config,
                    "tp": gone.tp if gone.tp is not None else tp,
                    "phase": gone.phase,
                    "points_committed": 0,
                    "reason": f"host {gone.reason}",
                }
            )
    return rows


def dropped_rows(run_id: str, dropped: list[events.DroppedHost]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "host": d.host,
            "reason": d.reason,
            "message": d.message,
            "phase": d.phase,
            "instance": d.instance,
            "recorded": list(d.recorded),
            "not_started": list(d.not_started),
        }
        for d in dropped
    ]


def check_unique(records: list[AttemptRecord]) -> None:
    """ResultsError when two records are the same attempt (run id, host, instance), e.g. a copied run
    directory next to the original: merging them would count every point twice."""
    seen: dict[tuple[str, str, str], AttemptRecord] = {}
    for rec in records:
        key = (rec.run_id, rec.host, rec.instance)
        first = seen.setdefault(key, rec)
        if first is not rec:
            a, b = first.path.parent.parent.parent, rec.path.parent.parent.parent
            where = f"{a} and {b}" if a != b else f"{first.path} and {rec.path}"
            raise ResultsError(
                f"run {rec.run_id}: attempt {rec.host}/{rec.instance} is in both {where} (a copy of one "
                "run?); give only one of them"
            )


def from_records(records: list[AttemptRecord], run_dirs: list[Path] | None = None) -> Results:
    """Build the frames from already-parsed records (used by tests and by :func:`load`); ``run_dirs``
    adds the attempts they hold without a record and the hosts their ``run.json`` says dropped out."""
    check_unique(records)
    attempts = _frame([attempt_row(r) for r in records], ATTEMPT_COLUMNS)
    points = _frame([row for r in records for row in point_rows(r)], POINT_COLUMNS)
    sources = {}
    for rec in records:
        path = rec.requests_file()
        if path is not None:
            sources[(rec.run_id, rec.host, rec.instance)] = columnar.open_rows(path)
    run_rows = []
    dirs = {r.run_id: str(r.path.parent.parent.parent) for r in records}
    for run_id in sorted({r.run_id for r in records}):
        rs = [r for r in records if r.run_id == run_id]
        starts = [r.timings.started_at for r in rs if r.timings.started_at is not None]
        ends = [r.timings.ended_at for r in rs if r.timings.ended_at is not None]
        run_rows.append(
            {
                "run_id": run_id,
                "run_dir": dirs[run_id],
                "hosts": ",".join(sorted({r.host for r in rs})),
                "attempts": len(rs),
                "ok": sum(r.outcome == "ok" for r in rs),
                "skipped": sum(r.outcome == "skipped" for r in rs),
                "failed": sum(r.outcome == "failed" for r in rs),
                "simulated": any(r.simulated for r in rs),
                "cpu_engine": any(r.cpu_engine for r in rs),
                "started_at": min(starts) if starts else None,
                "ended_at": max(ends) if ends else None,
            }
        )
    runs = _frame(
        run_rows,
        [
            "run_id",
            "run_dir",
            "hosts",
            "attempts",
            "ok",
            "skipped",
            "failed",
            "simulated",
            "cpu_engine",
            "started_at",
            "ended_at",
        ],
    )
    cut: list[dict[str, Any]] = []
    gone: list[dict[str, Any]] = []
    for run_dir in run_dirs or []:
        here = [r for r in records if r.path.parent.parent.parent == run_dir]
        ids = {r.run_id for r in here}
        run_id = ids.pop() if len(ids) == 1 else run_dir.name
        dropped = dropped_hosts(run_dir)
        labels = {"simulated": any(r.simulated for r in here), "cpu_engine": any(r.cpu_engine for r in here)}
        cut += [{**row, **labels} for row in cut_rows(run_dir, run_id, dropped)]
        gone += dropped_rows(run_id, dropped)
    return Results(
        runs=runs,
        attempts=attempts,
        points=points,
        records=records,
        sources=sources,
        cut=_frame(cut, CUT_COLUMNS),
        dropped=_frame(gone, DROPPED_COLUMNS),
    )


def load(paths: Path | str | Iterable[Path | str]) -> Results:
    """Load one run dir, a results root, or a list of either into :class:`Results`.

    Raises :class:`ResultsError` when a path holds no records and :class:`~sglbench.records.RecordError`
    (naming the file and field) when a record does not match the contract.
    """
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not items:
        raise ResultsError("no run directory given")
    run_dirs: list[Path] = []
    try:
        for item in items:
            for d in find_run_dirs(item):
                if d.resolve() not in [r.resolve() for r in run_dirs]:
                    run_dirs.append(d)
        files = [f for d in run_dirs for f in find_record_files(d)]
    except OSError as exc:  # an unreadable directory somewhere below
        where = exc.filename or (items[0] if len(items) == 1 else "the given directories")
        raise ResultsError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    records = [load_record(f) for f in files]
    return from_records(records, run_dirs)
