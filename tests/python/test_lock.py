"""Per-GPU-host locks: exclusive across processes, holder named, waiting, released on exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sglbench import lock

REPO = Path(__file__).resolve().parents[2]


def _child_holding(code: str) -> subprocess.Popen[str]:
    """Run ``code`` (which prints "held" once it holds its lock, then waits for stdin) in a child."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _hold_in_child(lock_dir: Path, host: str) -> subprocess.Popen[str]:
    """A second process that takes the lock, says so, and holds it until stdin closes."""
    code = textwrap.dedent(
        f"""
        import sys
        from sglbench.lock import HostLock
        lk = HostLock({host!r}, {str(lock_dir)!r}, command="sglbench run --tp 4")
        lk.acquire()
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    return _child_holding(code)


def test_second_campaign_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path, "gpu-1")
    try:
        with pytest.raises(lock.LockBusy) as err:
            lock.HostLock("gpu-1", tmp_path).acquire(wait_s=0)
        msg = str(err.value)
        assert f"pid {child.pid}" in msg and "sglbench run --tp 4" in msg and "--wait" in msg
        assert err.value.holder is not None and err.value.holder.pid == child.pid
        # another host is independent
        with lock.HostLock("gpu-2", tmp_path) as other:
            assert other.held
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(10)
    # the kernel released it when the holder exited: we get it now
    with lock.HostLock("gpu-1", tmp_path) as lk:
        holder = json.loads(lk.path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == "gpu-1"
    assert lk.path.read_text() == ""  # holder details cleared on release


def test_wait_polls_until_the_deadline(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path, "gpu-1")
    sleeps: list[float] = []
    try:
        lk = lock.HostLock("gpu-1", tmp_path)
        with pytest.raises(lock.LockBusy, match="after waiting"):
            lk.acquire(wait_s=0.05, sleep=sleeps.append)
        assert sleeps and all(0 <= s <= lock.POLL_S for s in sleeps)
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(10)


def test_wait_succeeds_when_the_holder_leaves(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path, "gpu-1")
    lk = lock.HostLock("gpu-1", tmp_path)

    def release_then_sleep(_s: float) -> None:
        if child.poll() is None:
            child.stdin.close()  # type: ignore[union-attr]
            child.wait(10)

    lk.acquire(wait_s=30, sleep=release_then_sleep)
    assert lk.held
    lk.release()


def test_lock_hosts_is_all_or_nothing(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path, "b")
    try:
        with pytest.raises(lock.LockBusy), lock.lock_hosts(["c", "a", "b"], tmp_path):
            pass
        # "a" (taken before "b" failed) was released again
        with lock.HostLock("a", tmp_path) as lk:
            assert lk.held
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(10)
    with lock.lock_hosts(["c", "a", "b", "a"], tmp_path) as locks:
        assert [lk.host for lk in locks] == ["a", "b", "c"]


def test_stale_file_without_flock_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / "gpu-1.lock").write_text(
        json.dumps(
            {"host": "gpu-1", "pid": 1, "user": "x", "controller": "y", "started_at": 0, "command": "old"}
        )
    )
    with lock.HostLock("gpu-1", tmp_path) as lk:
        assert json.loads(lk.path.read_text())["pid"] == os.getpid()


def test_names_and_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lock.lock_name("gpu-1.example.org") == "gpu-1.example.org.lock"
    assert lock.lock_name("../etc/passwd") == "_etc_passwd.lock"
    monkeypatch.setenv("SGLBENCH_LOCK_DIR", str(tmp_path / "x"))
    assert lock.default_lock_dir() == tmp_path / "x"


def _hold_tree_in_child(lock_dir: Path, host: str) -> subprocess.Popen[str]:
    """A process tree left by a campaign whose sglbench run is gone: holds the host's tree lock."""
    code = textwrap.dedent(
        f"""
        import sys
        from sglbench.tree import take_locks
        take_locks([{{"path": {str(lock_dir / lock.tree_lock_name(host))!r},
                      "holder": {{"host": {host!r}, "user": "alice", "controller": "ctl", "started_at": 0,
                                 "command": "sglbench run --tp 8"}}}}], 5)
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    return _child_holding(code)


def test_a_host_stays_busy_while_an_orphaned_campaign_tree_lives(tmp_path: Path) -> None:
    """SIGKILL of sglbench run freed the host lock while its playbook still ran."""
    child = _hold_tree_in_child(tmp_path, "gpu-1")
    try:
        with pytest.raises(lock.LockBusy) as err, lock.lock_hosts(["gpu-1"], tmp_path):
            pass
        msg = str(err.value)
        assert err.value.tree and "still running although its sglbench run has ended" in msg
        assert f"pid {child.pid}" in msg and "sglbench run --tp 8" in msg and "--wait" in msg
        # the host lock itself was released again (all or nothing)
        with lock.HostLock("gpu-1", tmp_path) as lk:
            assert lk.held
        told: list[str] = []

        def leave_soon() -> None:
            time.sleep(0.5)
            child.stdin.close()  # type: ignore[union-attr]

        t = threading.Thread(target=leave_soon)
        t.start()
        with lock.lock_hosts(["gpu-1"], tmp_path, wait_s=30, on_wait=lambda h, _who: told.append(h)) as locks:
            assert locks[0].held and told == ["gpu-1"]
        t.join()
    finally:
        if child.stdin and not child.stdin.closed:
            child.stdin.close()
        child.wait(10)
