"""Atomic file writes (stdlib only): the one writer used on the GPU host and on the controller.

Shipped to the host as ``ansible.module_utils.sglbench_atomic_file`` (unit files written by the
``sglbench_unit_files`` module) and imported on the controller by ``sglbench.resume`` (records,
points and per-request files of a run). A reader sees the old file or the whole new one, never a
part, and a crash (even SIGKILL or a power cut after the rename) never leaves a half-written file.
"""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path``: temp file in the same directory, fsync, chmod, rename over ``path``.

    Missing parent directories are created. On any error the temp file is removed and the old
    ``path`` (if any) is left as it was.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
