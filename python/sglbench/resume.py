"""Results that are never mixed, never lost: attempt identity hashes, point files and the resume plan.

Pure standard library, because it runs inside ``ansible-playbook``: the filter
``plugins/filter/sglbench_resume.py`` and the action ``plugins/action/sglbench_points.py`` import it from
the checkout. Layout and rules: docs/records.md, section "Resumable results".

Controller layout of one config attempt (``<results>/<run_id>/<host>/<config>-tp<N>/``)::

    record.json                 the attempt record (written last, in the cycle's always)
    requests.parquet            derived: the request rows of the kept points, in point order
    points/<key>.json           one load point and repeat, e.g. c4-r1 (schema sglbench.point/1); the commit
    points/<key>.requests.jsonl its per-request rows (renamed into place before the point file is written)
    points/<key>.telemetry.json the host's raw telemetry of the point, as it came (written before the point
                                file; replaced by the two Parquet files below when the record is assembled)
    points/<key>.telemetry-gpu.parquet, points/<key>.telemetry-server.parquet  its series as tables
    .incoming/                  fetches in flight (a killed run leaves partial files here)
    previous/<UTC>-<reason>/    everything moved aside: failed, stale (hash differs), partial, fresh, ...

A point counts as done when ``points/<key>.json`` exists, says ``outcome: ok``, carries the hash the
current attempt expects for that key and none of its requests failed (a point measured while the server
died or answered errors is measured again, never reused). The hash covers the attempt identity (argv,
environment, SGLang version and accounting, model and draft identity, prompt content, load parameters)
plus the point itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from sglbench.hostlib import load_points, request_rows, result_schema, sglang_facts
from sglbench.hostlib.atomic_file import write_atomic  # the one atomic writer (also shipped to hosts)
from sglbench.telemetry import clock as telemetry_clock
from sglbench.telemetry import derive as telemetry_derive

IDENTITY_SCHEMA = sglang_facts.IDENTITY_SCHEMA
POINT_SCHEMA = sglang_facts.POINT_SCHEMA
POINTS_DIR = "points"
INCOMING_DIR = ".incoming"
PREVIOUS_DIR = "previous"
# Key of a failed benchmark task's result that names the point that failed (a failure of the benchmark,
# whose points were committed): without it, a failed results action means results could not be written.
POINT_FAILED = "point_failed"
REQUESTS_FILE = "requests.jsonl"
PARQUET_FILE = "requests.parquet"
TELEMETRY_RAW = ".telemetry.json"
TELEMETRY_TABLES = (".telemetry-gpu.parquet", ".telemetry-server.parquet")
TELEMETRY_SUFFIXES = (TELEMETRY_RAW, *TELEMETRY_TABLES)  # a point's telemetry files: points/<key><suffix>
# Files of one attempt that a new attempt replaces (moved aside first, never overwritten in place).
ATTEMPT_FILES = ("record.json", "journal.log", "unit.service", PARQUET_FILE, REQUESTS_FILE)
DEFAULT_LADDER_CAP = load_points.DEFAULT_LADDER_CAP
# Keys of the load parameters left out of the identity hash: they change how a point is judged or which
# points are measured, or what is observed beside it, not what one point measures. Only points without a
# failed request are ever reused, whose judgement max_error_rate cannot change; a search with other settings
# (budgets, mode, start) reuses every level it visits again, and the record of a finished search is reused
# only when its settings match; telemetry samples the GPUs and the server without loading either.
UNHASHED_LOAD_KEYS = ("max_error_rate", "search", "telemetry")


class ResumeError(ValueError):
    """Bad input to the resume helpers; the message names the field."""


# -- hashing ----------------------------------------------------------------------------------------
def canonical_json(obj: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept (hash input)."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str
    )


def sha256_of(obj: Any) -> str:
    data = obj.encode("utf-8") if isinstance(obj, str) else canonical_json(obj).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def attempt_identity(parts: Mapping[str, Any]) -> dict[str, Any]:
    """``{"hash": sha256, "doc": ...}`` of everything that defines a config attempt.

    ``parts`` holds the defining inputs as the cycle has them; two are normalised so the stored document
    is small and carries no secret: ``environment`` values become their sha256, ``prompts`` (the list of
    prompt records sent) becomes ``{"sha256", "count"}``; ``load`` drops :data:`UNHASHED_LOAD_KEYS`. Every
    other key is hashed as given.
    """
    if not isinstance(parts, Mapping):
        raise ResumeError(f"identity parts must be a mapping, got {type(parts).__name__}")
    doc: dict[str, Any] = {"schema": IDENTITY_SCHEMA}
    for key, value in parts.items():
        if key == "environment":
            env = value or {}
            if not isinstance(env, Mapping):
                raise ResumeError("identity parts.environment must be a mapping of variable -> value")
            doc[key] = {str(k): sha256_of(str(v)) for k, v in env.items()}
        elif key == "prompts":
            items = list(value or [])
            doc[key] = {"sha256": sha256_of(items), "count": len(items)}
        elif key == "load" and isinstance(value, Mapping):
            doc[key] = {k: v for k, v in value.items() if k not in UNHASHED_LOAD_KEYS}
        else:
            doc[key] = value
    return {"hash": sha256_of(doc), "doc": doc}


# -- points -----------------------------------------------------------------------------------------
def concurrency_ladder(cap: int) -> list[int]:
    """1, 2, 4, ... up to ``cap`` (included even when not a power of two)."""
    try:
        return load_points.concurrency_ladder(cap)
    except ValueError as exc:
        raise ResumeError(str(exc)) from None


def expected_points(
    identity_hash: str, load: Mapping[str, Any], server_max_running_requests: int | None
) -> list[dict[str, Any]]:
    """Every (load level x repeat) the attempt must produce, each with its key and hash.

    ``load`` keys used: ``concurrency`` (explicit list), ``request_rate`` (list; then ``concurrency`` is the
    single cap), ``max_concurrency`` (cap of the default ladder), ``repeats``, ``seed``. The default ladder
    is 1, 2, 4, ... capped by the smaller of ``max_concurrency`` and the server's effective max running
    requests (64 when neither is known). Repeat r uses seed ``seed + r``, as the load generator does.
    """
    conc = [int(c) for c in (load.get("concurrency") or [])]
    rates = list(load.get("request_rate") or [])
    repeats = int(load.get("repeats") or 1)
    seed = int(load.get("seed") or 0)
    if repeats < 1:
        raise ResumeError(f"load.repeats must be >= 1, got {repeats}")
    levels: list[tuple[int | None, float | str | None]]
    if rates:
        if len(conc) > 1:
            raise ResumeError("load.concurrency must hold one cap when load.request_rate is given")
        cap = conc[0] if conc else None
        levels = [(cap, "inf" if float(r) == float("inf") else float(r)) for r in rates]
    elif conc:
        levels = [(c, None) for c in conc]
    else:
        caps = [int(c) for c in (load.get("max_concurrency"), server_max_running_requests) if c]
        levels = [(c, None) for c in concurrency_ladder(min(caps) if caps else DEFAULT_LADDER_CAP)]
    out = []
    for c, rate in levels:
        out.extend(level_points(identity_hash, c, rate, repeats, seed))
    return out


def level_points(
    identity_hash: str, concurrency: int | None, request_rate: float | str | None, repeats: int, seed: int
) -> list[dict[str, Any]]:
    """The points of one load level, one per repeat, each with its key and hash (the ladder's and the
    search's alike): repeat r uses seed ``seed + r``, as the load generator does."""
    label = load_points.point_label(concurrency, request_rate)  # as the load generator names its points
    out = []
    for r in range(repeats):
        point = {"point": label, "concurrency": concurrency, "request_rate": request_rate, "repeat": r}
        point["seed"] = seed + r
        out.append(
            {"key": f"{label}-r{r}", **point, "hash": sha256_of({"identity": identity_hash, "point": point})}
        )
    return out


# -- files ------------------------------------------------------------------------------------------
def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def utc_stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def new_stamp(attempt_dir: str, now: float | None = None) -> str:
    """A UTC stamp no earlier move of this attempt used (``...Z``, then ``...Z.2``, ...), so two re-runs
    within one second never share a ``previous/`` directory. One re-run uses one stamp for all its moves."""
    base = utc_stamp(now)
    pdir = os.path.join(attempt_dir, PREVIOUS_DIR)
    taken = os.listdir(pdir) if os.path.isdir(pdir) else []
    stamp, n = base, 1
    while any(name.startswith(stamp + "-") for name in taken):
        n += 1
        stamp = f"{base}.{n}"
    return stamp


class _Mover:
    """Moves files into ``<attempt>/previous/<stamp>-<reason>/<same relative path>``; never deletes."""

    def __init__(self, attempt_dir: str, stamp: str) -> None:
        self.attempt_dir = attempt_dir
        self.stamp = stamp
        self.moved: list[dict[str, str]] = []

    def move(self, rel: str, reason: str) -> None:
        src = os.path.join(self.attempt_dir, rel)
        if not os.path.lexists(src):
            return
        dst = os.path.join(self.attempt_dir, PREVIOUS_DIR, f"{self.stamp}-{reason}", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
        self.moved.append({"file": rel, "to": os.path.relpath(dst, self.attempt_dir), "reason": reason})


def _point_path(key: str) -> str:
    return os.path.join(POINTS_DIR, f"{key}.json")


def seen_measurements(attempt_dir: str, keys: Iterable[str]) -> dict[str, list[float]]:
    """The start times (``summary.t0_unix``) of every measurement of these points this attempt directory
    has ever committed, kept or moved aside: a copy the host still spools of one of them is no new
    measurement (the controller has had it, and may have rejected it), so the host must not return it."""
    dirs = [os.path.join(attempt_dir, POINTS_DIR)]
    pdir = os.path.join(attempt_dir, PREVIOUS_DIR)
    if os.path.isdir(pdir):
        dirs += [os.path.join(pdir, name, POINTS_DIR) for name in sorted(os.listdir(pdir))]
    seen: dict[str, list[float]] = {}
    for key in keys:
        for d in dirs:
            doc = _read_json(os.path.join(d, f"{key}.json"))
            summary = doc.get("summary") if isinstance(doc, dict) else None
            t0 = summary.get("t0_unix") if isinstance(summary, dict) else None
            if isinstance(t0, (int, float)) and not isinstance(t0, bool):
                seen.setdefault(key, []).append(float(t0))
    return seen


def _requests_path(key: str) -> str:
    return os.path.join(POINTS_DIR, f"{key}.requests.jsonl")


def _telemetry_paths(key: str) -> list[str]:
    return [os.path.join(POINTS_DIR, f"{key}{suffix}") for suffix in TELEMETRY_SUFFIXES]


def _telemetry_key(name: str) -> str | None:
    """The point key of a telemetry file name in ``points/``, else None."""
    for suffix in TELEMETRY_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def point_failed_requests(doc: Any) -> int | None:
    """How many measured requests of a committed point failed (``summary.n_err``); None when unknown."""
    point = result_schema.PointFile.from_dict(doc)
    return point.failed_requests if point is not None else None


def point_is_done(attempt_dir: str, expected: Mapping[str, Any]) -> bool:
    """The point file exists, is ``ok``, has the expected hash and not one failed request."""
    point = result_schema.PointFile.from_dict(
        _read_json(os.path.join(attempt_dir, _point_path(str(expected["key"]))))
    )
    return point is not None and point.is_done(expected.get("hash"))


def _record_search_settings(record: Mapping[str, Any]) -> Any:
    """The settings of the finished search that chose the record's points; None for the fixed ladder, and
    ``False`` (matching nothing) when the search did not finish."""
    bench = record.get("benchmark") if isinstance(record.get("benchmark"), Mapping) else {}
    found = bench.get("search") if isinstance(bench, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    return found.get("settings") if found.get("verdict") is not None else False


def prepare_attempt(
    attempt_dir: str,
    identity_hash: str,
    *,
    fresh: bool = False,
    now: float | None = None,
    search_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Before a config starts: is its previous attempt complete, and if not, move its record aside.

    Complete = ``record.json`` says ``outcome: ok``, carries ``identity.hash == identity_hash`` and every
    point it lists is a done point file (same hash, ok). Then nothing moves and the cycle reuses it (no
    server start); with a search (``search_settings``: the current one's, None for the fixed ladder) the
    record must also come from a finished search with those settings. Otherwise the previous attempt's
    files (record, journal, unit, derived requests) go to
    ``previous/<UTC>-<outcome>/`` (``stale`` when the hash differs, ``fresh`` with ``fresh``); point files
    stay for :func:`plan_points`, which checks them one by one.
    """
    record = _read_json(os.path.join(attempt_dir, "record.json"))
    mover = _Mover(attempt_dir, new_stamp(attempt_dir, now))
    if not isinstance(record, dict):
        reason = "partial"
        if os.path.exists(os.path.join(attempt_dir, "record.json")):
            reason = "corrupt"
        for name in ATTEMPT_FILES:
            mover.move(name, reason)
        return {"complete": False, "previous": None, "moved": mover.moved, "stamp": mover.stamp}
    identity = record.get("identity") if isinstance(record.get("identity"), dict) else {}
    resume = record.get("resume") if isinstance(record.get("resume"), dict) else {}
    rec_hash = identity.get("hash")
    listed = resume.get("points")
    complete = (
        not fresh
        and record.get("outcome") == "ok"
        and rec_hash == identity_hash
        and isinstance(listed, list)
        and all(isinstance(p, dict) and point_is_done(attempt_dir, p) for p in listed)
        and _record_search_settings(record) == (None if search_settings is None else dict(search_settings))
    )
    previous = {"outcome": record.get("outcome"), "identity_hash": rec_hash}
    if complete:
        return {"complete": True, "previous": previous, "moved": [], "points": listed, "stamp": mover.stamp}
    if fresh:
        reason = "fresh"
    elif identity_hash and rec_hash != identity_hash:
        reason = "stale"
    elif record.get("outcome") == "ok":
        reason = "incomplete"
    else:
        reason = str(record.get("outcome") or "unknown")
    for name in ATTEMPT_FILES:
        mover.move(name, reason)
    return {"complete": False, "previous": previous, "moved": mover.moved, "stamp": mover.stamp}


def plan_points(
    attempt_dir: str,
    expected: Iterable[Mapping[str, Any]],
    *,
    fresh: bool = False,
    now: float | None = None,
    stamp: str | None = None,
) -> dict[str, Any]:
    """Which expected points are done (kept) and which to run; move everything else aside.

    Moved aside (never deleted), by reason: ``fresh`` (asked for), ``failed`` (point outcome not ok),
    ``errors`` (ok, but some of its requests failed, or its summary does not say how many),
    ``stale`` (hash differs: another config, SGLang, model, prompt set or load), ``unexpected`` (a key the
    attempt no longer has), ``corrupt`` (unreadable), ``partial`` (request rows without their point file,
    fetches left in ``.incoming``). ``stamp``: the one :func:`prepare_attempt` chose for this re-run.
    """
    exp = {str(p["key"]): dict(p) for p in expected}
    mover = _Mover(attempt_dir, stamp or new_stamp(attempt_dir, now))
    pdir = os.path.join(attempt_dir, POINTS_DIR)
    kept: set[str] = set()
    names = sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []
    for name in names:
        if not name.endswith(".json") or name.startswith(".") or _telemetry_key(name) is not None:
            continue
        key = name[: -len(".json")]
        doc = _read_json(os.path.join(pdir, name))
        if not isinstance(doc, dict) or doc.get("schema") != POINT_SCHEMA:
            reason = "corrupt"
        elif fresh:
            reason = "fresh"
        elif key not in exp:
            reason = "unexpected"
        elif doc.get("hash") != exp[key]["hash"]:
            reason = "stale"
        elif doc.get("outcome") != "ok":
            reason = str(doc.get("outcome") or "failed")
        elif point_failed_requests(doc) != 0:  # measured while the server failed requests: measure again
            reason = "errors"
        else:
            kept.add(key)
            continue
        mover.move(_point_path(key), reason)
        mover.move(_requests_path(key), reason)
        for rel in _telemetry_paths(key):
            mover.move(rel, reason)
    for name in sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []:
        orphan_rows = name.endswith(".requests.jsonl") and name[: -len(".requests.jsonl")] not in kept
        tel_key = _telemetry_key(name)
        orphan_rows = orphan_rows or (tel_key is not None and tel_key not in kept)
        if orphan_rows or name.startswith("."):  # rows without a point file, or an interrupted temp file
            mover.move(os.path.join(POINTS_DIR, name), "partial")
    inc = os.path.join(attempt_dir, INCOMING_DIR)
    for name in sorted(os.listdir(inc)) if os.path.isdir(inc) else []:
        mover.move(os.path.join(INCOMING_DIR, name), "partial")
    order = list(exp)
    return {
        "done": [k for k in order if k in kept],
        "todo": [exp[k] for k in order if k not in kept],
        "moved": mover.moved,
    }


def commit_point(
    attempt_dir: str,
    expected: Mapping[str, Any],
    *,
    outcome: str,
    summary: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    error: str | None = None,
    records_src: str | None = None,
    records_text: str | None = None,
    records: list[Any] | None = None,
    now: float | None = None,
    telemetry: Mapping[str, Any] | None = None,
    clock: Mapping[str, Any] | None = None,
    gpu_hour_usd: Any = None,
) -> dict[str, Any]:
    """Write one point: its request rows first (``records_text``, else the ``records`` rows' JSON lines,
    written atomically, ``records`` also giving when the first request completed; or ``records_src``, a
    fetched file, renamed into place), its raw ``telemetry`` (the host's document, kept
    as it came), then the point file with the figures derived from that telemetry (:func:`point_telemetry`
    with the controller's ``clock`` of the call and the price per GPU-hour).

    The point file is the commit: a kill before it leaves only rows that :func:`plan_points` moves aside.
    """
    if outcome not in ("ok", "failed"):
        raise ResumeError(f"outcome must be ok or failed, got {outcome!r}")
    key = str(expected["key"])
    if "/" in key or key.startswith("."):
        raise ResumeError(f"point key {key!r} must be a plain name")
    os.makedirs(os.path.join(attempt_dir, POINTS_DIR), exist_ok=True)
    requests_file = None
    if records is not None and records_text is None:
        records_text = request_rows.jsonl(records)
    if records_text is not None:
        write_atomic(os.path.join(attempt_dir, _requests_path(key)), records_text)
        requests_file = _requests_path(key)
    elif records_src and os.path.isfile(records_src):
        os.replace(records_src, os.path.join(attempt_dir, _requests_path(key)))
        requests_file = _requests_path(key)
    point_summary = dict(summary or {})
    if point_summary:  # one repeat per call: the summary's repeat/seed are the point's
        point_summary["repeat"] = expected.get("repeat", point_summary.get("repeat"))
        point_summary["seed"] = expected.get("seed", point_summary.get("seed"))
    figures = None
    if isinstance(telemetry, Mapping):
        write_atomic(os.path.join(attempt_dir, _telemetry_paths(key)[0]), _json_text(telemetry))
        figures = point_telemetry(
            telemetry,
            clock,
            point_summary.get("total_output_tokens"),
            gpu_hour_usd,
            first_completed(point_summary, records),
        )
    doc = result_schema.PointFile(
        key=key,
        hash=expected.get("hash"),
        point={k: expected.get(k) for k in result_schema.POINT_FIELDS},
        outcome=outcome,
        error=error,
        committed_at=time.time() if now is None else now,
        requests_file=requests_file,
        summary=point_summary or None,
        meta=dict(meta or {}) or None,
        telemetry=figures,
    ).to_dict()
    write_atomic(os.path.join(attempt_dir, _point_path(key)), json.dumps(doc, indent=1, default=str) + "\n")
    return doc


def first_completed(summary: Mapping[str, Any], records: list[Any] | None) -> float | None:
    """When the point's first measured request completed (host epoch seconds): its start ``t0_unix``
    plus the earliest ``end_s`` of a measured request that succeeded; None when unknown."""
    t0 = summary.get("t0_unix")
    if not isinstance(t0, (int, float)) or isinstance(t0, bool) or not records:
        return None
    ends = [
        r["end_s"]
        for r in records
        if isinstance(r, Mapping)
        and not r.get("warmup")
        and not r.get("error")
        and isinstance(r.get("end_s"), (int, float))
    ]
    return float(t0) + min(ends) if ends else None


def point_telemetry(
    raw: Mapping[str, Any],
    clock: Mapping[str, Any] | None,
    output_tokens: Any,
    gpu_hour_usd: Any,
    steady_after: float | None = None,
) -> dict[str, Any]:
    """The figures of one point's telemetry (:func:`sglbench.telemetry.derive.derive`), the host/controller
    offset estimated from ``clock`` (``{"sent", "received"}``, controller epoch seconds of the call) and
    the host's own start/end of that call: ``clock``'s ``host_started``/``host_ended`` when it has them (a
    point the host kept from an earlier, cut-off call carries that call's times, which the controller's
    do not bracket), else the document's ``clock``; unknown without ``clock``. A document the figures
    cannot be derived from still commits its point: the figures are then ``{"error": ...}``."""
    host = raw.get("clock") if isinstance(raw.get("clock"), Mapping) else {}
    if isinstance(clock, Mapping) and clock.get("host_started") is not None:
        host = clock
    if isinstance(clock, Mapping):
        off = telemetry_clock.estimate(
            clock.get("sent"), clock.get("received"), host.get("host_started"), host.get("host_ended")
        )
    else:
        off = telemetry_clock.unknown("no controller send/receive times")
    tokens = output_tokens if isinstance(output_tokens, int) and not isinstance(output_tokens, bool) else None
    try:
        price = float(gpu_hour_usd) if gpu_hour_usd not in (None, "") else None
    except (TypeError, ValueError):
        price = None
    try:
        return telemetry_derive.derive(
            raw, clock=off, output_tokens=tokens, gpu_hour_usd=price, steady_after=steady_after
        )
    except (telemetry_derive.TelemetryError, TypeError, ValueError, ArithmeticError) as err:
        return {"error": f"{type(err).__name__}: {err}", "clock": off.to_dict(), "flags": []}


def _json_text(doc: Any) -> str:
    """Compact JSON; a non-finite number (against the contract) is written as null, never as NaN."""
    try:
        return json.dumps(doc, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(doc), separators=(",", ":"), allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def assemble_benchmark(
    attempt_dir: str,
    expected: Iterable[Mapping[str, Any]],
    *,
    prompt_set: str,
    identity_hash: str,
    ran: Iterable[str] = (),
    write_requests: bool = True,
    since: float | None = None,
    search: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The record's ``benchmark`` (schema sglbench.bench/1) from the done point files, in ladder order.

    Also writes the derived ``requests.parquet`` (rows of those points, atomically). None when no point is
    done. ``resume`` in the result says which points this run measured and which it reused: those in
    ``ran``, and with ``since`` (this run's start, Unix seconds) every point committed at or after it.
    ``search``: the document of the search that chose the points (``sglbench.search``), kept as is.
    """
    exp = list(expected)
    docs = []
    for p in exp:
        doc = _read_json(os.path.join(attempt_dir, _point_path(str(p["key"]))))
        if isinstance(doc, dict) and doc.get("outcome") == "ok" and doc.get("hash") == p.get("hash"):
            docs.append(doc)
    if not docs:
        return None
    points = [
        {**d["summary"], "telemetry": d["telemetry"]}
        if isinstance(d.get("telemetry"), dict)
        else d["summary"]
        for d in docs
        if isinstance(d.get("summary"), dict)
    ]
    meta = dict(docs[0].get("meta") or {})
    meta["repeats"] = max((int(p.get("repeat", 0)) for p in exp), default=0) + 1
    meta["prompt_set"] = prompt_set
    ran_set = set(ran)
    if since is not None:
        ran_set |= {str(d["key"]) for d in docs if float(d.get("committed_at") or 0.0) >= since}
    done_keys = [str(d["key"]) for d in docs]
    if write_requests:
        _write_requests(attempt_dir, docs)
        _write_telemetry_tables(attempt_dir, done_keys)
    resume = {
        "identity_hash": identity_hash,
        "expected": len(exp),
        "done": len(done_keys),
        "measured": [k for k in done_keys if k in ran_set],
        "reused": [k for k in done_keys if k not in ran_set],
        "missing": [str(p["key"]) for p in exp if str(p["key"]) not in set(done_keys)],
    }
    return result_schema.bench_summary(points, meta, prompt_set=prompt_set, resume=resume, search=search)


def _write_requests(attempt_dir: str, docs: list[dict[str, Any]]) -> None:
    """The attempt's rows as ``requests.parquet`` (:mod:`sglbench.columnar`, imported here only: it needs
    pyarrow, which a bare ``ansible-playbook`` may lack); as ``requests.jsonl`` (the rows as fetched, for
    the reader to check and name what is wrong) without pyarrow or when a row breaks the contract."""
    sources = []
    for d in docs:
        rel = d.get("requests_file")
        if rel and os.path.isfile(os.path.join(attempt_dir, rel)):
            sources.append(os.path.join(attempt_dir, rel))
    if not sources:
        return
    try:
        from pathlib import Path

        from sglbench import columnar
    except ImportError:
        columnar = None  # type: ignore[assignment]
    if columnar is not None:
        try:
            columnar.write_jsonl_files([Path(p) for p in sources], Path(attempt_dir) / PARQUET_FILE)
            return
        except (ValueError, TypeError):  # a row against the contract (RecordError), or one Arrow cannot type
            pass
    _write_jsonl(attempt_dir, sources)


def _with_telemetry(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A point file's summary with its telemetry figures, as the benchmark summary lists the point."""
    summary = dict(doc["summary"])
    if isinstance(doc.get("telemetry"), dict):
        summary["telemetry"] = doc["telemetry"]
    return summary


def _write_telemetry_tables(attempt_dir: str, keys: list[str]) -> None:
    """Each point's raw telemetry as its two Parquet tables (:mod:`sglbench.columnar`, imported here only,
    as for the requests); the raw file goes once both are in place. Without pyarrow, or for a document
    Arrow cannot type, the raw file stays: readers take either."""
    pending = [k for k in keys if os.path.isfile(os.path.join(attempt_dir, _telemetry_paths(k)[0]))]
    if not pending:
        return
    try:
        from pathlib import Path

        from sglbench import columnar
    except ImportError:
        return
    for key in pending:
        raw_path = Path(attempt_dir) / _telemetry_paths(key)[0]
        try:
            columnar.write_telemetry(raw_path, Path(attempt_dir) / POINTS_DIR, key)
        except (ValueError, TypeError, OSError):
            continue
        raw_path.unlink(missing_ok=True)


def _write_jsonl(attempt_dir: str, sources: list[str]) -> None:
    chunks = []
    for src in sources:
        try:
            with open(src, encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            continue
        if text and not text.endswith("\n"):
            text += "\n"
        chunks.append(text)
    if chunks:
        write_atomic(os.path.join(attempt_dir, REQUESTS_FILE), "".join(chunks))
