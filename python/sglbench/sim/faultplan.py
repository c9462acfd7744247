"""One-shot process faults the stand-in deals itself at a chosen generation request.

A test that must strike a server *while a given benchmark point runs* cannot do so from outside by
watching progress: on a fast machine the point has ended before the watcher looks, on a loaded one the
watcher is late by seconds. The stand-in knows exactly which request it is serving, so the test writes a
plan instead and the server strikes itself:

    <state dir>/fault-plan   ->   "stop 42"  or  "kill 42"

The first stand-in server to become ready claims the file (an atomic rename: one server takes it, the
next one starts clean) and, when its 42nd generation request arrives, writes ``<plan>.fired`` with its
pid and sends itself SIGSTOP (a hung server: the test may later let it go on with SIGCONT) or SIGKILL
(a server that dies). ``SGLBENCH_SIM_FAULT_PLAN`` moves the file.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from sglbench.hostlib.atomic_file import write_atomic

ACTIONS = {"stop": signal.SIGSTOP, "kill": signal.SIGKILL}
USAGE = "one line 'stop N' or 'kill N' (N >= 1: the generation request that triggers it)"


class FaultPlanError(ValueError):
    """A plan file that does not say what to do (the message names the file and the form)."""


@dataclass(frozen=True)
class FaultPlan:
    action: str  # a key of ACTIONS
    request: int  # the N-th generation request (health checks not counted) triggers it
    fired_path: str  # written with the server's pid just before the signal

    @property
    def signal(self) -> signal.Signals:
        return ACTIONS[self.action]


def default_path(state_dir: str) -> str:
    return os.path.join(state_dir, "fault-plan")


def parse(text: str, path: str) -> FaultPlan:
    words = text.split()
    if len(words) != 2 or words[0] not in ACTIONS or not words[1].isdigit() or int(words[1]) < 1:
        raise FaultPlanError(f"{path}: {text.strip()!r} is not a fault plan: write {USAGE}")
    return FaultPlan(words[0], int(words[1]), f"{path}.fired")


def claim(path: str) -> FaultPlan | None:
    """Take the plan at ``path`` if there is one (removing it, so no later server takes it too)."""
    taken = f"{path}.{os.getpid()}.taken"
    try:
        os.rename(path, taken)
    except FileNotFoundError:
        return None
    try:
        with open(taken, encoding="utf-8") as fh:
            return parse(fh.read(), path)
    finally:
        os.unlink(taken)


def strike(plan: FaultPlan) -> None:
    """Say which process is struck (``<plan>.fired``), then deal the signal to this one."""
    write_atomic(plan.fired_path, f"{os.getpid()}\n")
    os.kill(os.getpid(), plan.signal)


def trigger(plan: FaultPlan) -> Callable[[int], None]:
    """A request-count hook for the engine: strikes at the plan's request, once."""

    def on_request(n: int) -> None:
        if n == plan.request:
            strike(plan)

    return on_request
