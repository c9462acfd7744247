"""What a test asks a sim host container (``podman exec``), without touching what the campaign uses."""

from __future__ import annotations

from sglbench.hostlib import host_guard

# Python for the host's python3 (``python3 -c``): prints the bench lock's holder line while some process
# holds the lock, nothing otherwise. It reads /proc/locks instead of trying the lock, so it never takes the
# lock for an instant in which a benchmark starting at the same time would be refused. (A pipelined module
# runs as a bare ``python3`` reading its code from stdin, so its argv does not name it; the lock does.)
BENCH_LOCK_HOLDER = f"""
import os
path = {host_guard.lock_path()!r}
try:
    st = os.stat(path)
except FileNotFoundError:
    raise SystemExit(0)
key = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
with open("/proc/locks") as fh:
    held = any(ln.split()[1:2] == ["FLOCK"] and ln.split()[5:6] == [key] for ln in fh)
if held:
    with open(path) as fh:
        print(fh.read().strip() or "holder unknown")
"""


def bench_lock_argv() -> list[str]:
    """The command that runs :data:`BENCH_LOCK_HOLDER` on the host."""
    return ["python3", "-c", BENCH_LOCK_HOLDER]
