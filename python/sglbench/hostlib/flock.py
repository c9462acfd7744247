"""``flock(2)`` locks on a file the holder keeps open, one way for every lock of the project.

Standard library only. The host's bench lock (``host_guard``) and the controller's host and tree locks
(``sglbench.lock``) are all exclusive, non-blocking ``flock`` on a file whose content names the holder:
the kernel drops the lock when the last descriptor closes, so a file left by a dead holder is free.
"""

from __future__ import annotations

import fcntl
import os


def lock_held(path: str | os.PathLike[str]) -> bool:
    """Somebody holds the lock on ``path`` right now (taken and released at once; a missing file is free)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def try_lock(path: str | os.PathLike[str], mode: int) -> int | None:
    """A descriptor of ``path`` (created with ``mode``) holding its lock, or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def write_holder(fd: int, text: str, sync: bool = False) -> None:
    """Replace the lock file's content with ``text`` (who holds it), on the locked descriptor."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)
    if sync:
        os.fsync(fd)
