"""Measured benchmark points kept on the GPU host until the controller has committed them (stdlib only).

The benchmark module measures every point of a fixed ladder in one host call. Each point it finishes is
written here at once, atomically, before the next one starts, so a controller that dies (or loses its SSH
connection) mid-call loses nothing: the next call for the same attempt finds the point here and returns it
instead of measuring it again. A spooled point carries the attempt's identity hash; one of another hash
(the config changed) is never returned.

Layout: ``<dir>/<key>.json`` (mode 0600, directory 0700), ``<dir>`` one per attempt
(``/run/sglbench/spool/<run_id>/<instance>`` by default: tmpfs, gone at reboot). What the controller
has committed is removed by the next call for the attempt (:func:`prune`: keys it no longer asks for)
and by the attempt's final stop (:func:`remove_dir`).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from .atomic_file import write_atomic

SCHEMA = "sglbench.spool/1"
SUFFIX = ".json"


def check_key(key: str) -> str:
    if not key or "/" in key or key.startswith("."):
        raise ValueError(f"point key {key!r} must be a plain name")
    return key


def spool_path(directory: str, key: str) -> str:
    return os.path.join(directory, check_key(key) + SUFFIX)


def read_spooled(directory: str, key: str, identity_hash: str) -> dict[str, Any] | None:
    """The point spooled under ``key`` for this identity, or None (missing, unreadable, other hash)."""
    try:
        with open(spool_path(directory, key), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("hash") != identity_hash:
        return None
    if doc.get("key") != key or not isinstance(doc.get("point"), dict):
        return None
    return doc["point"]


def write_spooled(directory: str, key: str, identity_hash: str, point: dict[str, Any]) -> None:
    """Keep one measured point (atomically: a reader sees the whole file or none)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    doc = {"schema": SCHEMA, "key": key, "hash": identity_hash, "point": point}
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False, default=str)
    write_atomic(spool_path(directory, key), text, mode=0o600)


def prune(directory: str, wanted: set[str] | frozenset[str], identity_hash: str) -> list[str]:
    """Remove the spooled points this attempt no longer asks for (committed by the controller) and those
    of another identity; return the keys removed. A missing directory is nothing to prune."""
    removed = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return removed
    for name in names:
        if not name.endswith(SUFFIX) or name.startswith("."):
            continue
        key = name[: -len(SUFFIX)]
        if key in wanted and read_spooled(directory, key, identity_hash) is not None:
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            continue
        removed.append(key)
    return removed


def remove_dir(directory: str) -> bool:
    """Remove an attempt's spool once its points are committed; True when something was removed."""
    if not directory or not os.path.isdir(directory):
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return not os.path.exists(directory)
