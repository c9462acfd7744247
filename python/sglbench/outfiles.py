"""Output files of the reading commands (``summarize -o``, ``report -o``): checked before the work, written
all or nothing.

:func:`prepare_out` runs before anything is computed: the path must not be a directory, its directory is
created when missing and must be writable. :func:`write_files` writes every file to a temp file beside its
target, then renames them into place; when any write fails, every temp file is removed and no target is
touched, so a failed command leaves neither ``.tmp`` files nor a half set of PNGs. Failures are
:class:`OutputError`, one line naming the flag and the file. Each temp file is written by the one atomic
writer (:func:`sglbench.hostlib.atomic_file.write_temp`); only the all-or-nothing renames are here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sglbench.hostlib import atomic_file

# Output files are owner-only (0600), as they have always been written.
OUTPUT_MODE = 0o600


class OutputError(Exception):
    """An output file cannot be written; the message names the flag, the file and the fix."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def prepare_out(path: Path, flag: str = "-o", example: str = "out") -> None:
    """Check ``path`` as an output file before any work: not a directory, its directory exists (created
    when missing) and accepts a new file."""
    if path.is_dir():
        raise OutputError(f"{flag} {path} is a directory; give a file name inside it, e.g. {path / example}")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"{flag} {path}: cannot write in {parent} ({_why(exc)}); give a file in a writable directory"
        ) from None


def write_files(files: Sequence[tuple[Path, bytes]], flag: str = "-o") -> list[Path]:
    """Write every ``(path, data)`` atomically and together: all temp files first, then the renames.

    On a failure nothing is left behind (no temp file, no target replaced) and :class:`OutputError` names
    the file. Returns the written paths.
    """
    temps: list[tuple[str, Path]] = []
    current = files[0][0] if files else Path()
    try:
        for path, data in files:
            current = path
            temps.append((atomic_file.write_temp(path, data, OUTPUT_MODE), path))
        for _, path in temps:
            current = path
            if path.is_dir():
                raise IsADirectoryError(21, "Is a directory", str(path))
        for tmp, path in temps:
            current = path
            os.replace(tmp, path)
    except BaseException as exc:
        for tmp, _ in temps:
            atomic_file.discard(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"{flag}: cannot write {current} ({_why(exc)})") from None
        raise
    return [path for path, _ in files]
