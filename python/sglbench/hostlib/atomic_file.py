"""Atomic file writes (stdlib only): the one writer used on the GPU host and on the controller.

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.atomic_file`` (unit files, the flag cache, the
benchmark's per-request records) and imported on the controller (records, points and per-request files of
a run, ``run.json``, ``sglbench bench`` results, the all-or-nothing output files of ``summarize -o`` and
``report -o``). A reader sees the old file or the whole new one, never a part, and a crash (even SIGKILL or
a power cut after the rename) never leaves a half-written file.

- :func:`write_atomic`: text (UTF-8) or bytes to one file.
- :func:`atomic_path`: a temp path for writers that need a path of their own (pyarrow), renamed into place
  when the block ends without an exception.
- :func:`write_temp` + :func:`discard`: the temp-file half alone, for callers that rename several files
  together (:mod:`sglbench.outfiles`).

Every temp file lies in the target's directory (``.<name>.<random>.tmp``, so a rename never crosses a file
system), is fsynced and given its mode before the rename, and is removed on any failure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


def _encode(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _mkstemp(path: str) -> tuple[int, str]:
    directory = os.path.dirname(path) or "."
    return tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)


def discard(tmp: str | os.PathLike[str]) -> None:
    """Remove a temp file; one already gone (or not removable) is no error."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def write_temp(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> str:
    """Write ``data`` (text as UTF-8) to a new temp file beside ``path``, fsynced, with ``mode``; its name.

    ``path`` itself is not touched and its directory is not created: the caller renames the temp file
    over ``path`` (``os.replace``) or :func:`discard`\\ s it. On any error the temp file is removed.
    """
    payload = _encode(data)
    fd, tmp = _mkstemp(os.fspath(path))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path``: temp file in the same directory, fsync, chmod,
    rename over ``path``.

    Missing parent directories are created. On any error the temp file is removed and the old
    ``path`` (if any) is left as it was.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = write_temp(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], mode: int = 0o644) -> Iterator[str]:
    """``with atomic_path(p) as tmp: writer(tmp)``: the writer fills an empty temp file beside ``p``; when
    the block ends without an exception the file is fsynced, given ``mode`` and renamed over ``p``.

    Missing parent directories are created. On any error (in the block or after it) the temp file is
    removed and the old ``p`` (if any) is left as it was.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = _mkstemp(path)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
