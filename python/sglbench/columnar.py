"""Per-request rows as Arrow tables: the one writer and reader of ``requests.parquet``, and the migration
of older ``requests.jsonl`` files.

One attempt's rows live in ``<attempt>/requests.parquet``: the load generator's row fields (the
:class:`~sglbench.hostlib.result_schema.RequestRow` contract) plus the columns every reader derives from
them, computed once when the file is written (:data:`DERIVED`: ``ok``, ``ttft_ms``, ``e2e_ms``,
``accept_length``), so no command has to read the per-chunk timing lists again. A reader names the
columns it needs and a Parquet file reads only those (:meth:`ParquetRows.read`). A file without the
derived columns (``sglbench bench`` before they existed) gets them computed on read, vectorised with the
same rules as :class:`RequestRow`. A run that has only ``requests.jsonl`` is read row by row with the
contract's checks (errors name the line and field) and held as a table in memory
(:func:`from_jsonl`); ``sglbench migrate RUN_DIR`` (:func:`migrate_run`) writes its Parquet file once.

Errors are :class:`~sglbench.hostlib.result_schema.RecordError` naming the file, like every other input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from sglbench.hostlib.atomic_file import atomic_path
from sglbench.hostlib.result_schema import (
    MAX_INT,
    REQUEST_INT_LISTS,
    REQUEST_ROW_TYPES,
    RecordError,
    RequestRow,
)

PARQUET_FILE = "requests.parquet"
JSONL_FILE = "requests.jsonl"
SCHEMA_KEY = b"sglbench.schema"
SCHEMA = b"sglbench.requests/1"
RESULT_MODE = 0o644
# Derived column -> the row fields it is computed from.
DERIVED: dict[str, tuple[str, ...]] = {
    "ok": ("error", "end_s"),
    "ttft_ms": ("chunk_t", "chunk_tokens", "sent_s"),
    "e2e_ms": ("end_s", "sent_s"),
    "accept_length": ("spec_verify_ct", "completion_tokens"),
}
_NUMERIC = (int, float)


class RowSource(Protocol):
    """One attempt's request rows; ``read`` returns exactly the named columns (absent ones as nulls)."""

    path: Path

    def read(self, columns: Sequence[str]) -> pa.Table: ...


# -- derived columns, vectorised ----------------------------------------------------------------------
def floats(col: pa.ChunkedArray | pa.Array | None, n: int = 0) -> np.ndarray:
    """A numeric column as float64 with NaN for null (``n`` NaN when the column is absent)."""
    if col is None:
        return np.full(n, np.nan)
    if pa.types.is_null(col.type):
        return np.full(len(col), np.nan)
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def _list_parts(col: pa.ChunkedArray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(length of each row's list, 0 for null; the flattened values as float64, NaN for null)."""
    if pa.types.is_null(col.type):
        return np.zeros(n, dtype=np.int64), np.empty(0)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    arr = arr.cast(pa.list_(pa.float64()))
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(arr).to_numpy(zero_copy_only=False).astype(float)
    return lengths, values


def first_token_s(
    chunk_t: pa.ChunkedArray | None, chunk_tokens: pa.ChunkedArray | None, n: int
) -> np.ndarray:
    """:meth:`RequestRow.first_token_s` for every row at once: the time of the first chunk whose
    cumulative token count rises above the last known one (0 before the first), NaN without one."""
    out = np.full(n, np.nan)
    if chunk_t is None or chunk_tokens is None or n == 0:
        return out
    t_len, t_vals = _list_parts(chunk_t, n)
    k_len, k_vals = _list_parts(chunk_tokens, n)
    if not len(k_vals):
        return out
    k_start = np.concatenate([[0], np.cumsum(k_len)[:-1]])
    t_start = np.concatenate([[0], np.cumsum(t_len)[:-1]])
    parent = np.repeat(np.arange(n), k_len)
    index = np.arange(len(k_vals))
    pos = index - k_start[parent]
    known = ~np.isnan(k_vals)
    last_known = np.maximum.accumulate(np.where(known, index, -1))
    prev_idx = np.concatenate([[-1], last_known[:-1]])
    prev = np.where(prev_idx >= k_start[parent], k_vals[np.maximum(prev_idx, 0)], 0.0)
    with np.errstate(invalid="ignore"):
        hit = known & (k_vals > prev) & (pos < t_len[parent])
    rows, first = np.unique(parent[hit], return_index=True)
    out[rows] = t_vals[t_start[rows] + pos[hit][first]]
    return out


def _column(table: pa.Table, name: str) -> pa.ChunkedArray | None:
    return table.column(name) if name in table.column_names else None


def derived(table: pa.Table, name: str) -> pa.Array:
    """Derived column ``name`` (one of :data:`DERIVED`) from the row fields, with RequestRow's rules."""
    n = table.num_rows
    if name == "ok":
        err, end = _column(table, "error"), _column(table, "end_s")
        no_error = np.ones(n, dtype=bool) if err is None else np.asarray(pc.is_null(err), dtype=bool)
        has_end = np.zeros(n, dtype=bool) if end is None else np.asarray(pc.is_valid(end), dtype=bool)
        return pa.array(no_error & has_end)
    sent = floats(_column(table, "sent_s"), n)
    if name == "ttft_ms":
        first = first_token_s(_column(table, "chunk_t"), _column(table, "chunk_tokens"), n)
        return pa.array((first - sent) * 1000.0, from_pandas=True)
    if name == "e2e_ms":
        return pa.array((floats(_column(table, "end_s"), n) - sent) * 1000.0, from_pandas=True)
    if name == "accept_length":
        verify = floats(_column(table, "spec_verify_ct"), n)
        done = floats(_column(table, "completion_tokens"), n)
        usable = ~np.isnan(verify) & ~np.isnan(done) & (verify != 0) & (done != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return pa.array(np.where(usable, done / np.where(usable, verify, 1.0), np.nan), from_pandas=True)
    raise KeyError(name)


def with_derived(table: pa.Table) -> pa.Table:
    """``table`` with every :data:`DERIVED` column it lacks."""
    for name in DERIVED:
        if name not in table.column_names:
            table = table.append_column(name, derived(table, name))
    return table


def select(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Exactly ``columns`` in that order: derived ones computed when missing, absent fields as nulls."""
    arrays = []
    for name in columns:
        if name in table.column_names:
            arrays.append(table.column(name))
        elif name in DERIVED:
            arrays.append(derived(table, name))
        elif name == "repeat":  # a row without a repeat is repeat 0 (as RequestRow rows are read)
            arrays.append(pa.array(np.zeros(table.num_rows, dtype=np.int64)))
        else:
            arrays.append(pa.nulls(table.num_rows))
    return pa.table(arrays, names=list(columns))


def source_columns(columns: Sequence[str], available: Iterable[str]) -> list[str]:
    """The stored columns a read of ``columns`` needs: each one present, or a derived one's inputs."""
    have = set(available)
    need: list[str] = []
    for name in columns:
        wanted = [name] if name in have or name not in DERIVED else [c for c in DERIVED[name] if c in have]
        need += [c for c in wanted if c in have and c not in need]
    return need


# -- the contract's checks on a typed column ------------------------------------------------------------
def _type_ok(t: pa.DataType, types: tuple[type, ...]) -> bool:
    if pa.types.is_null(t):
        return True
    if pa.types.is_dictionary(t):
        t = t.value_type
    if list in types:
        v = t.value_type if pa.types.is_list(t) or pa.types.is_large_list(t) else None
        return v is not None and (pa.types.is_integer(v) or pa.types.is_floating(v) or pa.types.is_null(v))
    if str in types:
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
    return numeric or (bool in types and pa.types.is_boolean(t))


def check_schema(path: Path, schema: pa.Schema) -> None:
    """RecordError naming the column when a stored type is not what :data:`REQUEST_ROW_TYPES` allows."""
    for name, types in REQUEST_ROW_TYPES.items():
        idx = schema.get_field_index(name)
        if idx < 0:
            continue
        t = schema.field(idx).type
        if name in REQUEST_INT_LISTS and not _int_list(t):
            raise RecordError(
                path,
                f"column {name}",
                f"expected a list of integers (token ids or counts), got Arrow type {t}",
            )
        if not _type_ok(t, types):
            want = "a list of numbers" if list in types else " or ".join(x.__name__ for x in types)
            raise RecordError(path, f"column {name}", f"expected {want}, got Arrow type {t}")


def _check_lists(path: Path, table: pa.Table) -> None:
    for name, types in REQUEST_ROW_TYPES.items():
        col = table.column(name) if list in types and name in table.column_names else None
        if col is not None and not pa.types.is_null(col.type) and pc.list_flatten(col).null_count:
            raise RecordError(path, f"column {name}", "expected a list of numbers, got a null inside")


# -- reading ----------------------------------------------------------------------------------------------
@dataclass
class ParquetRows:
    """``requests.parquet`` of one attempt, opened (footer read, column types checked), read lazily."""

    path: Path
    names: tuple[str, ...]

    @classmethod
    def open(cls, path: Path) -> ParquetRows:
        try:
            schema = pq.read_schema(path)
        except Exception as exc:  # pyarrow raises many kinds for a damaged file
            raise RecordError(path, "<file>", f"cannot be read as Parquet ({type(exc).__name__})") from None
        check_schema(path, schema)
        return cls(path, tuple(schema.names))

    def read(self, columns: Sequence[str]) -> pa.Table:
        """Only the stored columns ``columns`` needs are read from the file."""
        need = source_columns(columns, self.names)
        try:
            table = pq.ParquetFile(self.path).read(columns=need) if need else None
        except Exception as exc:
            raise RecordError(
                self.path, "<file>", f"cannot be read as Parquet ({type(exc).__name__})"
            ) from None
        if table is None:
            table = pa.table({"_": pa.nulls(pq.ParquetFile(self.path).metadata.num_rows)}).drop(["_"])
        _check_lists(self.path, table)
        return select(table, columns)


@dataclass
class TableRows:
    """Rows already in memory (a ``requests.jsonl`` read and migrated on load)."""

    path: Path
    table: pa.Table

    def read(self, columns: Sequence[str]) -> pa.Table:
        return select(self.table, columns)


def _jsonl_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RecordError(path, f"line {n}", f"is not valid JSON ({exc.msg})") from None
                except (RecursionError, ValueError):
                    raise RecordError(path, f"line {n}", "is not a usable JSON request row") from None
                rows.append(RequestRow.from_dict(path, f"line {n}", row).raw)
    except UnicodeDecodeError as exc:
        raise RecordError(
            path, "<file>", f"is not UTF-8 text (binary or damaged at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise RecordError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
    return rows


def _as_text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, default=str, allow_nan=True)


def _typed_array(name: str, values: list[Any]) -> pa.Array:
    """One column of checked rows: contract fields typed as the contract says, other fields kept as
    Arrow infers them, or as JSON text when they mix kinds or nest (so every column has one type)."""
    types = REQUEST_ROW_TYPES.get(name)
    if types is not None and bool in types:
        return pa.array([None if v is None else bool(v) for v in values], pa.bool_())
    if name in REQUEST_INT_LISTS:
        return pa.array([None if v is None else [int(x) for x in v] for v in values], pa.list_(pa.int64()))
    if types is not None and list in types:
        return pa.array(
            [None if v is None else [float(x) for x in v] for v in values], pa.list_(pa.float64())
        )
    if types is not None and str not in types:  # numbers: ints stay ints, a float anywhere makes floats
        if any(isinstance(v, float) for v in values):
            return pa.array([None if v is None else float(v) for v in values], pa.float64())
        return pa.array(values, pa.int64())
    if name == "request_rate":  # an all-at-once point's rate is "inf" in JSON
        values = [float("inf") if v == "inf" else v for v in values]
    try:
        arr = pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return pa.array([_as_text(v) for v in values], pa.string())
    if pa.types.is_nested(arr.type):
        return pa.array([_as_text(v) for v in values], pa.string())
    return arr


def table_from_rows(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Request rows (checked dicts) as a table with the derived columns; every key of any row is a column."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    if not names:
        return with_derived(pa.table({"_": pa.nulls(len(rows))}).drop(["_"]))
    # A row without ``repeat`` is repeat 0 (RequestRow's reading); an explicit null stays null.
    table = pa.table(
        {k: _typed_array(k, [r.get(k, 0) if k == "repeat" else r.get(k) for r in rows]) for k in names}
    )
    return with_derived(table)


def _read_json_fast(path: Path) -> pa.Table | None:
    """The file through pyarrow's JSON reader when every column comes out as the contract allows, else
    None (then the row-by-row reading finds and names the first bad line)."""
    try:
        table = pa_json.read_json(path)
        check_schema(path, table.schema)
        _check_lists(path, table)
    except (pa.ArrowException, RecordError, OSError, ValueError):
        return None
    for name in table.column_names:
        col = table.column(name)
        if name not in REQUEST_ROW_TYPES and pa.types.is_nested(col.type):
            return None  # kept as JSON text by the row-by-row reading
        if name in REQUEST_ROW_TYPES and pa.types.is_integer(col.type) and _out_of_range(col):
            return None
        if name in REQUEST_INT_LISTS and not _int_list(col.type):
            return None  # the row-by-row reading names the row with a non-integer entry
    return table


def _int_list(t: pa.DataType) -> bool:
    if pa.types.is_null(t):
        return True
    v = t.value_type if pa.types.is_list(t) or pa.types.is_large_list(t) else None
    return v is not None and (pa.types.is_integer(v) or pa.types.is_null(v))


def _out_of_range(col: pa.ChunkedArray) -> bool:
    """Some integer is beyond what a record holds (``MAX_INT``), as the row-by-row check refuses."""
    try:
        biggest = pc.max(pc.abs_checked(col)).as_py()
    except pa.ArrowException:  # abs of the smallest int64 overflows
        return True
    return biggest is not None and biggest > MAX_INT


def from_jsonl(path: Path) -> TableRows:
    """A ``requests.jsonl`` as a table in memory: read whole by pyarrow when it is clean, else row by row
    with the contract's checks (errors name the line and field)."""
    table = _read_json_fast(path)
    if table is not None:
        return TableRows(path, with_derived(table))
    return TableRows(path, table_from_rows(_jsonl_rows(path)))


def open_rows(path: Path) -> RowSource:
    """The rows of one attempt's requests file, Parquet or (migrated on read) JSONL."""
    if path.suffix == ".parquet":
        return ParquetRows.open(path)
    return from_jsonl(path)


def warm_up() -> None:
    """Load now what pyarrow loads on its first conversion of Python values (its pandas shim, ~0.2 s), so
    processes forked after this call (Ansible's task workers) do not each load it again."""
    table_from_rows([{"idx": 0, "chunk_t": [0.0], "output_ids": [0]}])


# -- writing ----------------------------------------------------------------------------------------------
def write_table(table: pa.Table, path: Path, mode: int = RESULT_MODE) -> Path:
    """``table`` (with its derived columns added) as ``path``, atomically, with ``mode``."""
    table = with_derived(table)
    meta = dict(table.schema.metadata or {})
    meta[SCHEMA_KEY] = SCHEMA
    table = table.replace_schema_metadata(meta)
    with atomic_path(path, mode) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return path


def write_rows(rows: Sequence[dict[str, Any]], path: Path, mode: int = RESULT_MODE) -> Path:
    """Request rows (as the load generator writes them) as a Parquet file with the derived columns."""
    return write_table(table_from_rows(rows), path, mode)


def write_jsonl_files(sources: Sequence[Path], path: Path) -> Path | None:
    """The rows of several JSONL files (one per point, in order) as one Parquet file; None without rows."""
    rows: list[dict[str, Any]] = []
    for src in sources:
        rows += _jsonl_rows(src)
    return write_rows(rows, path) if rows else None


def export_jsonl(source: RowSource, path: Path) -> Path:
    """The stored row fields (no derived columns) as JSONL, one object per row, atomically."""
    table = source.read([n for n in _stored_names(source) if n not in DERIVED])
    with atomic_path(path, RESULT_MODE) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for batch in table.to_batches(max_chunksize=65536):
            for row in batch.to_pylist():
                fh.write(json.dumps({k: v for k, v in row.items() if v is not None}, default=str) + "\n")
    return path


def _stored_names(source: RowSource) -> list[str]:
    if isinstance(source, ParquetRows):
        return list(source.names)
    if isinstance(source, TableRows):
        return list(source.table.column_names)
    return []


# -- migration ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Migrated:
    attempt_dir: Path
    rows: int
    wrote: Path | None  # None: already Parquet


def migrate_attempt(attempt_dir: Path) -> Migrated | None:
    """Write ``requests.parquet`` beside a ``requests.jsonl`` (kept: it is the export); None when the
    attempt has no request rows, ``wrote`` None when the Parquet file is already there."""
    parquet, jsonl = attempt_dir / PARQUET_FILE, attempt_dir / JSONL_FILE
    if parquet.is_file():
        return Migrated(attempt_dir, pq.ParquetFile(parquet).metadata.num_rows, None)
    if not jsonl.is_file():
        return None
    src = from_jsonl(jsonl)
    return Migrated(attempt_dir, src.table.num_rows, write_table(src.table, parquet))


# -- telemetry series -------------------------------------------------------------------------------------
# One point's raw telemetry (docs/records.md, "Telemetry") as two tables beside its point file:
# points/<key>.telemetry-gpu.parquet (one row per GPU per sample) and points/<key>.telemetry-server.parquet
# (long form: t, source, name, value). Both carry the document's other parts (schema, clock, window,
# sampling, errors) as JSON in their metadata, so either file gives back the window it was cut for.
TELEMETRY_SCHEMA = b"sglbench.telemetry/1"
TELEMETRY_META = b"sglbench.telemetry.doc"
TELEMETRY_KINDS: dict[str, dict[str, pa.DataType | None]] = {
    "gpu": {"t": pa.float64(), "gpu": pa.int64(), "throttle_mask": pa.uint64()},
    "server": {"t": pa.float64(), "source": pa.string(), "name": pa.string(), "value": pa.float64()},
}
_NUMERIC_DEFAULT = pa.float64()


def telemetry_table_path(points_dir: Path, key: str, kind: str) -> Path:
    return points_dir / f"{key}.telemetry-{kind}.parquet"


def _kind_table(block: Any, types: dict[str, pa.DataType | None], kind: str) -> pa.Table:
    """One kind's rows as a table: the contract's columns typed, another GPU column as float64, another
    server column as Arrow infers it; a row of the wrong width is left out."""
    block = block if isinstance(block, dict) else {}
    cols = [str(c) for c in block.get("columns") or []] or list(types)
    rows = [r for r in block.get("rows") or [] if isinstance(r, (list, tuple)) and len(r) == len(cols)]
    arrays = {}
    for i, col in enumerate(cols):
        typ = types.get(
            col, pa.string() if kind == "server" and col not in ("t", "value") else _NUMERIC_DEFAULT
        )
        values = [r[i] for r in rows]
        if pa.types.is_floating(typ):
            values = [None if isinstance(v, bool) else v for v in values]
        arrays[col] = pa.array(values, type=typ)
    return pa.table(arrays)


def write_telemetry(raw_path: Path, points_dir: Path, key: str) -> list[Path]:
    """The raw telemetry file of point ``key`` as its two Parquet tables, each written atomically.
    Raises ValueError/TypeError (Arrow's) when a column cannot be typed, OSError when unreadable."""
    raw = json.loads(raw_path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{raw_path}: telemetry is not a JSON object")
    doc = {k: v for k, v in raw.items() if k not in TELEMETRY_KINDS}
    meta = {SCHEMA_KEY: TELEMETRY_SCHEMA, TELEMETRY_META: json.dumps(doc, allow_nan=False).encode()}
    tables = {kind: _kind_table(raw.get(kind), types, kind) for kind, types in TELEMETRY_KINDS.items()}
    written = []
    for kind, table in tables.items():
        path = telemetry_table_path(points_dir, key, kind)
        table = table.replace_schema_metadata(meta)
        with atomic_path(path, RESULT_MODE) as tmp:
            pq.write_table(table, tmp, compression="zstd")
        written.append(path)
    return written


def read_telemetry(points_dir: Path, key: str) -> dict[str, Any] | None:
    """Point ``key``'s raw telemetry document: from its Parquet tables, else from the raw JSON file the
    commit wrote (an attempt not yet assembled, or pyarrow absent then); None when it has neither."""
    paths = {kind: telemetry_table_path(points_dir, key, kind) for kind in TELEMETRY_KINDS}
    if all(p.is_file() for p in paths.values()):
        out: dict[str, Any] = {}
        for kind, path in paths.items():
            table = pq.read_table(path)
            meta = table.schema.metadata or {}
            if TELEMETRY_META in meta and not out:
                out = json.loads(meta[TELEMETRY_META])
            out[kind] = {"columns": table.column_names, "rows": [list(r.values()) for r in table.to_pylist()]}
        return out
    raw_path = points_dir / f"{key}.telemetry.json"
    if raw_path.is_file():
        try:
            doc = json.loads(raw_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise RecordError(raw_path, "<top level>", f"unreadable telemetry: {err}") from err
        return doc if isinstance(doc, dict) else None
    return None
