"""Hold a sim host's benchmark client inside a point of its ladder, whatever the machine's speed.

A test that cuts a campaign mid-call (kills the controller, drops the SSH connection) needs the cut to find
the host call still measuring. Looking at the host from the controller (a ``podman exec`` per look) takes
seconds on a loaded machine, long enough for the ladder to end in between. Instead, :func:`hold_client` runs
one watcher inside the host that looks every 50 ms: once the attempt's spool holds the points ``spooled``
and not ``unfinished`` while a client holds the bench lock, it stops that client's process tree (SIGSTOP,
the root first, then its descendants until none is left running) and looks at the spool again. A stopped
client cannot finish a point, so whatever the test does next finds the call mid-point; the client stays
stopped until the host guard or the stop phase ends it (SIGTERM, then SIGKILL), as it would end a client
still sending load.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import simhost_util as sh

from sglbench.hostlib import host_guard

# Python for the host's python3; the holder is read as tests/host_probes.py reads it (/proc/locks, never
# taking the lock).
_WATCHER = """
import glob, json, os, signal, sys, time
LOCK, SPOOL, WANT, UNFINISHED = sys.argv[1], sys.argv[2], set(json.loads(sys.argv[3])), sys.argv[4]

def spooled():
    return {os.path.basename(p)[: -len(".json")] for p in glob.glob(SPOOL + "/*.json")}

def holder():
    try:
        st = os.stat(LOCK)
    except FileNotFoundError:
        return None
    key = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    with open("/proc/locks") as fh:
        if not any(ln.split()[1:2] == ["FLOCK"] and ln.split()[5:6] == [key] for ln in fh):
            return None
    with open(LOCK) as fh:
        text = fh.read().strip()
    return json.loads(text) if text else None

def tree(root):
    kids = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as fh:
                kids.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += kids.get(pid, [])
    return seen

while True:
    found, who = spooled(), holder()
    if who and WANT <= found and UNFINISHED not in found:
        stopped = []
        while fresh := [p for p in tree(who["pid"]) if p not in stopped]:
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
                stopped.append(pid)
        found = spooled()
        if UNFINISHED in found:
            for pid in stopped:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            print(json.dumps({"missed": sorted(found)}))
            break
        points = {}
        for key in sorted(found):
            with open(os.path.join(glob.glob(SPOOL)[0], key + ".json")) as fh:
                points[key] = json.load(fh)["point"]
        print(json.dumps({"holder": who, "points": points, "stopped": stopped}))
        break
    time.sleep(0.05)
"""


def hold_client(
    name: str, spool: str, spooled: Collection[str], unfinished: str, timeout: float = 1500
) -> dict[str, Any]:
    """Stop the benchmark client of sim host ``name`` once the spool directory ``spool`` (a glob) holds the
    points ``spooled`` and not ``unfinished``. Returns ``holder`` (its bench lock line), ``points`` (every
    spooled point as the spool had it then, by key) and ``stopped`` (the pids). ``timeout`` only bounds a
    failure (a campaign that never gets there), sized for a 2-core machine under heavy load."""
    done = sh.host(
        name,
        *("python3", "-c", _WATCHER, host_guard.lock_path(), spool, json.dumps(sorted(spooled)), unfinished),
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "missed" not in seen, f"{unfinished} was spooled before its client could be stopped: {seen}"
    assert seen["holder"]["pid"] in seen["stopped"], seen
    return seen
