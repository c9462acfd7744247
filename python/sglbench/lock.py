"""One lock per GPU host, so two campaigns never run on the same host at once.

A lock is ``fcntl.flock`` on ``<lock dir>/<host>.lock``; the holder writes its pid, user, controller
hostname, start time and command into the file, so a second campaign can say who holds it. The kernel
drops the lock when the holder exits (even on SIGKILL), so there are no stale locks to clean up; a
leftover file with holder details but no flock on it is simply taken over.

Beside it, ``<host>.tree.lock`` is held by the campaign's whole process tree (:mod:`sglbench.tree`:
ansible-playbook and every worker it detached inherit the descriptor). ``sglbench run`` SIGKILLed frees
``<host>.lock`` at once, but the tree lock stays held until the last process that could still drive
the host is gone; a new campaign takes both (``lock_hosts``), so it never overlaps an orphaned one.
The holder's command is stored with secret-looking values redacted (:mod:`sglbench.secretcheck`).

Locks are per controller: they coordinate every ``sglbench run`` started on this machine (any user,
when the lock dir is shared: ``/run/lock/sglbench`` by default).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sglbench.hostlib import flock
from sglbench.secretcheck import redact_argv

POLL_S = 0.5
TREE_SUFFIX = ".tree.lock"


def default_lock_dir() -> Path:
    """``$SGLBENCH_LOCK_DIR``, else ``/run/lock/sglbench`` (shared by every user), else the user state dir."""
    env = os.environ.get("SGLBENCH_LOCK_DIR")
    if env:
        return Path(env)
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK):
        return run_lock / "sglbench"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "sglbench" / "locks"


def lock_name(host: str) -> str:
    """File-system-safe name for a host (``gpu-1.example.org`` stays readable)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host).strip(".") or "_"
    return f"{safe}.lock"


def tree_lock_name(host: str) -> str:
    return lock_name(host)[: -len(".lock")] + TREE_SUFFIX


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    user: str
    controller: str
    started_at: float
    command: str

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(self.started_at))
        return f"{self.user} (pid {self.pid} on {self.controller}) since {when}, running: {self.command}"


class LockBusy(Exception):
    """The host is locked by another campaign (or by the process tree of one whose sglbench run ended)."""

    def __init__(
        self, host: str, holder: Holder | None, path: Path, waited_s: float, tree: bool = False
    ) -> None:
        who = holder.describe() if holder else "an unknown process (no holder details in the lock file)"
        waited = f" after waiting {waited_s:.0f} s" if waited_s > 0 else ""
        if tree:
            text = (
                f"GPU host {host} is busy{waited}: the playbook of an earlier campaign is still running "
                f"although its sglbench run has ended (process tree of {who}); it is ending and stopping "
                f"the SGLang units. Lock file: {path}. Wait for it, or pass --wait SECONDS to queue "
                "behind it."
            )
        else:
            text = (
                f"GPU host {host} is busy{waited}: held by {who}. Lock file: {path}. Wait for it to finish, "
                "or pass --wait SECONDS to queue behind it."
            )
        super().__init__(text)
        self.host = host
        self.holder = holder
        self.path = path
        self.tree = tree


def read_holder(path: Path) -> Holder | None:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8") or "null")
        if not isinstance(data, dict):
            return None
        return Holder(**{k: data[k] for k in Holder.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError):
        return None


def holder_record(host: str, command: str) -> dict[str, Any]:
    """What a holder writes into a lock file (also the tree keeper's, with its own pid)."""
    return asdict(
        Holder(
            host=host,
            pid=os.getpid(),
            user=_user(),
            controller=socket.gethostname(),
            started_at=time.time(),
            command=command,
        )
    )


def probe_free(path: Path) -> bool:
    """True when nobody holds ``path`` (taken and released at once; a missing file is free)."""
    return not flock.lock_held(path)


class HostLock:
    """Exclusive lock of one GPU host (context manager)."""

    def __init__(self, host: str, lock_dir: Path | None = None, command: str | None = None) -> None:
        self.host = host
        self.lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
        self.path = self.lock_dir / lock_name(host)
        self.tree_path = self.lock_dir / tree_lock_name(host)
        self.command = command or " ".join(redact_argv(sys.argv))
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if not self.lock_dir.is_dir():
            self.lock_dir.mkdir(parents=True, exist_ok=True)
            if self.lock_dir.parent == Path("/run/lock"):  # shared by every user, like /tmp
                with contextlib.suppress(OSError):
                    os.chmod(self.lock_dir, 0o1777)
        fd = flock.try_lock(self.path, 0o666)
        if fd is None:
            return False
        flock.write_holder(fd, json.dumps(holder_record(self.host, self.command)) + "\n", sync=True)
        self._fd = fd
        return True

    def acquire(self, wait_s: float = 0.0, sleep: Callable[[float], None] = time.sleep) -> None:
        """Take the lock, waiting up to ``wait_s`` seconds; raise :class:`LockBusy` naming the holder."""
        start = time.monotonic()
        while True:
            if self.try_acquire():
                return
            waited = time.monotonic() - start
            if waited >= wait_s:
                raise LockBusy(self.host, read_holder(self.path), self.path, waited if wait_s > 0 else 0.0)
            sleep(min(POLL_S, max(0.0, wait_s - waited)))

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> HostLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


@contextlib.contextmanager
def lock_hosts(
    hosts: Sequence[str],
    lock_dir: Path | None = None,
    *,
    wait_s: float = 0.0,
    command: str | None = None,
    on_wait: Callable[[str, Holder | None], None] | None = None,
) -> Iterator[list[HostLock]]:
    """Lock every host (in sorted order, so two campaigns never deadlock); all or none.

    A host counts as taken only when its tree lock is free as well: no process of an earlier campaign
    (an orphaned playbook, a detached worker) may still be driving it. We do not keep the tree lock;
    the campaign's tree keeper takes it (:mod:`sglbench.tree`), and nobody else can meanwhile, since
    that needs the host lock we hold.

    ``on_wait(host, holder)`` is called once per host that is busy when we start waiting on it.
    """
    locks: list[HostLock] = []
    deadline = time.monotonic() + wait_s
    try:
        for host in sorted(set(hosts)):
            lk = HostLock(host, lock_dir, command)
            if not lk.try_acquire():
                if on_wait is not None and wait_s > 0:
                    on_wait(host, read_holder(lk.path))
                lk.acquire(max(0.0, deadline - time.monotonic()))
            locks.append(lk)
            _wait_tree_free(lk, deadline, wait_s, on_wait)
        yield locks
    finally:
        for lk in reversed(locks):
            lk.release()


def _wait_tree_free(
    lk: HostLock,
    deadline: float,
    wait_s: float,
    on_wait: Callable[[str, Holder | None], None] | None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait (until ``deadline``) for the host's tree lock to be free; raise LockBusy naming its holder."""
    told = False
    start = time.monotonic()
    while not probe_free(lk.tree_path):
        holder = read_holder(lk.tree_path)
        if time.monotonic() >= deadline:
            waited = time.monotonic() - start
            raise LockBusy(lk.host, holder, lk.tree_path, waited if wait_s > 0 else 0.0, tree=True)
        if not told and on_wait is not None:
            on_wait(lk.host, holder)
            told = True
        sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


class RunLock:
    """The lock of one run directory (``<run>/_runner/run.lock``), held by the ``sglbench run`` that
    owns the run: a run whose lock is free has no live owner and may be resumed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = flock.try_lock(self.path, 0o600)
        if fd is None:
            return False
        flock.write_holder(fd, f"{os.getpid()}\n")
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
