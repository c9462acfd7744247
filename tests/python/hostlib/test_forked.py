"""A helper process forked and driven over two pipes (hostlib.forked)."""

from __future__ import annotations

import os

from sglbench.hostlib import forked


def _echo(ctl_fd: int, res_fd: int) -> int:
    data = os.read(ctl_fd, 64)
    os.write(res_fd, data.upper())
    return 7


def _boom(ctl_fd: int, res_fd: int) -> int:
    raise RuntimeError("the child's own failure")


def test_the_child_answers_over_the_pipes_and_leaves_with_its_code() -> None:
    pid, ctl, res = forked.fork_with_pipes(_echo)
    try:
        os.write(ctl, b"ping")
        assert os.read(res, 64) == b"PING"
    finally:
        os.close(ctl)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    assert os.read(res, 64) == b""  # the child's write end is closed: no other writer holds it open
    os.close(res)


def test_a_child_that_raises_exits_1_and_never_returns_into_the_parents_code() -> None:
    pid, ctl, res = forked.fork_with_pipes(_boom)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
    for fd in (ctl, res):
        os.close(fd)


def test_the_child_closes_what_it_is_told_to() -> None:
    r, w = os.pipe()
    pid, ctl, res = forked.fork_with_pipes(lambda c, s: 0, also_close=[w])
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b""  # no writer left: the child closed its inherited copy too
    for fd in (r, ctl, res):
        os.close(fd)
