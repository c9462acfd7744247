"""Per-request rows as they are written and as they travel from the GPU host to the controller (stdlib).

Shipped to hosts as ``ansible.module_utils.sglbench_hostlib.request_rows``; imported on the controller as
``sglbench.hostlib.request_rows``. One owner for both sides:

- :func:`jsonl`: the ``requests.jsonl`` text of a point (one compact JSON object per line, no NaN), as the
  host writes it (``records_path``) and the controller commits it.
- :func:`pack` / :func:`unpack`: that text gzip-compressed and base64-encoded, one string per point in the
  benchmark module's result. A point's rows (token ids, chunk times, per-request speculative figures) run
  to hundreds of kilobytes; as one string Ansible decodes them at once instead of value by value, and they
  cross the connection a fraction of the size.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

PACKED_KEY = "records_packed"  # the benchmark module's per-point key for packed rows
_LEVEL = 1  # the fastest gzip level: rows of numbers compress well enough at once


class RowsError(ValueError):
    """Packed rows that cannot be read back; the message says what is wrong with them."""


def jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """One compact JSON line per row (``allow_nan=False``: a NaN is a bug upstream, not a value to keep)."""
    return "".join(json.dumps(r, separators=(",", ":"), allow_nan=False, default=str) + "\n" for r in rows)


def pack(rows: Iterable[Mapping[str, Any]]) -> str:
    """The rows' :func:`jsonl` text, gzip-compressed, as base64 ASCII."""
    raw = gzip.compress(jsonl(rows).encode("utf-8"), compresslevel=_LEVEL, mtime=0)
    return base64.b64encode(raw).decode("ascii")


def unpack(packed: Any) -> tuple[str, list[dict[str, Any]]]:
    """The :func:`jsonl` text of packed rows and the rows themselves."""
    if not isinstance(packed, str):
        raise RowsError(f"packed request rows must be a base64 string, got {type(packed).__name__}")
    try:
        text = gzip.decompress(base64.b64decode(packed, validate=True)).decode("utf-8")
    except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise RowsError(f"packed request rows are not gzip-compressed base64 UTF-8: {err}") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError as err:
            raise RowsError(f"packed request rows, line {n}: {err}") from None
        if not isinstance(row, dict):
            got = type(row).__name__
            raise RowsError(f"packed request rows, line {n}: a JSON object per line, got {got}")
        rows.append(row)
    return text, rows
