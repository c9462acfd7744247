"""A helper process forked beside the benchmark and driven over two pipes (stdlib only).

The load generator's client processes (``procs`` > 1) and the telemetry sampler each run in a process
forked from the benchmark module, so that neither takes the load generator's interpreter lock. Both talk to
the parent the same way: the parent writes commands on one pipe and reads results from the other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable


def fork_with_pipes(run: Callable[[int, int], int], also_close: Iterable[int] = ()) -> tuple[int, int, int]:
    """Fork a process that closes the parent's pipe ends and ``also_close``, runs ``run(ctl_read_fd,
    res_write_fd)`` and leaves with its return code through ``os._exit`` (1 when it raises; it never returns
    in the child). The parent gets ``(pid, ctl_write_fd, res_read_fd)``. OSError when the fork fails, every
    pipe end closed."""
    ctl_r, ctl_w = os.pipe()
    res_r, res_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (ctl_r, ctl_w, res_r, res_w):
            os.close(fd)
        raise
    if pid == 0:
        code = 1
        try:
            for fd in (ctl_w, res_r, *also_close):
                with contextlib.suppress(OSError):
                    os.close(fd)
            code = run(ctl_r, res_w)
        finally:
            os._exit(code)
    os.close(ctl_r)
    os.close(res_w)
    return pid, ctl_w, res_r
