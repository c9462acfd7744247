"""Host-side guard: one benchmark client per GPU host, only against a server this campaign started.

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.host_guard`` (stdlib only). The controller's
locks (``sglbench.lock``) keep two campaigns of one controller apart, but a benchmark module already
running on the host outlives the controller process that started it (killing ``ssh``/``podman exec``
does not end the remote process). So, on the host:

- the benchmark module holds ``/run/sglbench/bench.lock`` (``flock``) while it sends load, with its
  pid, the unit, the run id and the controller written into the file. A second benchmark while one
  runs is refused (:class:`GuardRefused`, naming the holder), except when the holder is a client of the
  same campaign (run id and controller) against the same unit: one campaign runs one point at a time
  per host, so that client is one whose connection to the controller dropped and whose point Ansible
  is running again (ssh retries); its result can never arrive, so it is ended (:class:`Takeover`) and
  the point is measured afresh;
- it benchmarks only the start of the unit its campaign made: the unit's current ``InvocationID`` must
  be the one the campaign's readiness wait saw, or another campaign restarted it;
- the stop phase (``sglbench_stop``) ends a benchmark client left behind by a dead campaign of
  the *same* controller (we hold that controller's lock, so its owner is gone) and refuses to touch
  one of another controller (that campaign may be alive: two controllers must not share a host).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from . import flock

DEFAULT_DIR = "/run/sglbench"
LOCK_NAME = "bench.lock"


class GuardRefused(Exception):
    """The benchmark must not run (another one runs, or the unit is not ours)."""


@dataclass(frozen=True)
class Campaign:
    run_id: str = ""
    controller: str = ""

    def describe(self) -> str:
        return f"run {self.run_id or '?'} from controller {self.controller or '?'}"


@dataclass(frozen=True)
class BenchHolder:
    pid: int
    unit: str
    url: str
    run_id: str
    controller: str
    started_at: float

    @property
    def campaign(self) -> Campaign:
        return Campaign(self.run_id, self.controller)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return (
            f"pid {self.pid} benchmarking {self.unit or '?'} ({self.url or '?'}) for "
            f"{self.campaign.describe()} since {when}"
        )


def lock_path(directory: str = DEFAULT_DIR) -> str:
    return os.path.join(directory, LOCK_NAME)


def read_holder(path: str) -> BenchHolder | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read() or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return BenchHolder(**{k: data[k] for k in BenchHolder.__dataclass_fields__})
    except (KeyError, TypeError):
        return None


lock_held = flock.lock_held  # somebody holds the bench lock right now

TAKEOVER_REASON = (
    "a client of this campaign against the same unit still held the bench lock: its connection to the "
    "controller was lost and the point was run again, so it was ended before this point was measured"
)


@dataclass(frozen=True)
class Takeover:
    """The earlier client of the same campaign and unit that :func:`bench_guard` ended."""

    ended: BenchHolder
    killed: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.ended.pid,
            "started_at": self.ended.started_at,
            "killed": list(self.killed),
            "reason": TAKEOVER_REASON,
        }

    def describe(self) -> str:
        return f"ended the earlier client ({self.ended.describe()}): {TAKEOVER_REASON}"


@dataclass(frozen=True)
class Lease:
    """The bench lock, held: who holds it (this process) and the client it ended to get it, if any."""

    holder: BenchHolder
    takeover: Takeover | None = None


def own_client(holder: BenchHolder, unit: str, campaign: Campaign) -> bool:
    """``holder`` is a client of ``campaign`` against ``unit`` (never this process): one that lost its
    connection, since a campaign runs one point at a time per host."""
    return (
        bool(campaign.run_id and campaign.controller and unit)
        and holder.campaign == campaign
        and holder.unit == unit
        and holder.pid != os.getpid()
    )


def _refusal(holder: BenchHolder | None, unit: str, url: str) -> GuardRefused:
    who = holder.describe() if holder else "holder unknown"
    return GuardRefused(
        f"another benchmark is running on this host ({who}); refusing to run a second one against "
        f"{unit or url}: both would share the server and the CPUs"
    )


def _take(path: str, unit: str, url: str, campaign: Campaign, grace_s: float) -> tuple[int, Takeover | None]:
    """The locked descriptor of ``path``, after ending an earlier client of the same campaign and unit."""
    fd = flock.try_lock(path, 0o644)
    if fd is not None:
        return fd, None
    holder = read_holder(path)
    if holder is None or not own_client(holder, unit, campaign):
        raise _refusal(holder, unit, url)
    killed, freed = end_client(holder, path, grace_s)
    if not freed:
        raise GuardRefused(f"could not end the earlier client of this campaign ({holder.describe()})")
    fd = flock.try_lock(path, 0o644)
    if fd is None:
        raise _refusal(read_holder(path), unit, url)
    return fd, Takeover(holder, killed)


@contextlib.contextmanager
def bench_guard(
    unit: str, url: str, campaign: Campaign, directory: str = DEFAULT_DIR, grace_s: float = 5.0
) -> Iterator[Lease]:
    """Hold the host's bench lock while the block runs; :class:`GuardRefused` when another benchmark
    holds it (a client of the same campaign and unit is ended instead: :func:`own_client`). Child
    processes (``procs`` > 1) inherit the descriptor, so the lock lasts as long as they do.
    """
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, takeover = _take(lock_path(directory), unit, url, campaign, grace_s)
    holder = BenchHolder(os.getpid(), unit, url, campaign.run_id, campaign.controller, time.time())
    try:
        flock.write_holder(fd, json.dumps(asdict(holder)) + "\n")
        yield Lease(holder, takeover)
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def check_invocation(unit: str, expected: str, current: str) -> None:
    """The unit must still be the start this campaign made (same systemd InvocationID)."""
    if not expected:
        return
    if current != expected:
        raise GuardRefused(
            f"{unit} is not the server this campaign started (invocation {current or 'none'}, expected "
            f"{expected}): another campaign restarted or stopped it; refusing to benchmark it"
        )


def _children(pid: int, proc: str = "/proc") -> list[int]:
    out: list[int] = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) > 1 and rest[1] == str(pid):
            out.append(int(name))
    return out


def _tree(pid: int) -> list[int]:
    todo, out = [pid], []
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c in _children(p) if c not in out)
    return out


@dataclass
class ClearReport:
    found: dict[str, Any] | None = None  # the holder that was running
    killed: list[int] | None = None
    freed: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"found": self.found, "killed": self.killed or [], "freed": self.freed}


def clear_orphans(
    campaign: Campaign,
    directory: str = DEFAULT_DIR,
    grace_s: float = 5.0,
    *,
    kill: Callable[[int, int], None] = os.kill,
    tree: Callable[[int], list[int]] = _tree,
    sleep: Callable[[float], None] = time.sleep,
    check_mode: bool = False,
) -> ClearReport:
    """End a benchmark client still running on the host when it belongs to a campaign of our own
    controller (its owner is gone: we hold the controller's lock); refuse when it belongs to another."""
    path = lock_path(directory)
    if not lock_held(path):
        return ClearReport()
    holder = read_holder(path)
    if holder is None:
        raise GuardRefused(
            f"a benchmark client holds {path} but left no details; end it (fuser -k {path}) and retry"
        )
    if holder.controller != campaign.controller:
        raise GuardRefused(
            f"this GPU host is being benchmarked by {holder.campaign.describe()} ({holder.describe()}); "
            f"campaigns of two controllers must not share a host: wait for it, or end it there "
            f"(kill {holder.pid}) if that campaign is gone"
        )
    if check_mode:
        return ClearReport(found=asdict(holder), killed=[], freed=False)
    killed, freed = end_client(holder, path, grace_s, kill=kill, tree=tree, sleep=sleep)
    if not freed:
        raise GuardRefused(f"could not end the orphaned benchmark client ({holder.describe()})")
    return ClearReport(found=asdict(holder), killed=killed, freed=True)


def end_client(
    holder: BenchHolder,
    path: str,
    grace_s: float,
    *,
    kill: Callable[[int, int], None] = os.kill,
    tree: Callable[[int], list[int]] = _tree,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[int], bool]:
    """SIGTERM the client ``holder`` names and its child processes, SIGKILL after ``grace_s``, until the
    lock at ``path`` is free; the pids signalled and whether the lock is free."""
    killed: list[int] = []
    pids = tree(holder.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, sig)
                if pid not in killed:
                    killed.append(pid)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not lock_held(path):
                return killed, True
            sleep(0.1)
        pids = tree(holder.pid) or pids
    return killed, not lock_held(path)
