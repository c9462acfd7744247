"""sglbench.tree: the campaign's process tree holds the host's tree lock for as long as any of its
processes lives, and dies (with the cleanup playbook run) when `sglbench run` dies or is interrupted.

A fake "ansible-playbook" stands in: it forks a worker that detaches with setsid (as ansible's workers
do) and sleeps; a fake cleanup playbook writes a marker. No Ansible, no sim host: seconds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sglbench import lock, tree

REPO = Path(__file__).resolve().parents[2]

FAKE_PLAYBOOK = textwrap.dedent(
    """\
    #!{python}
    import os, sys, time
    marker = sys.argv[-1]
    if sys.argv[1].endswith("stop.yml"):
        open(marker + ".cleanup", "w").write(" ".join(sys.argv[1:]))
        sys.exit(0)
    pid = os.fork()
    if pid == 0:
        os.setsid()  # a detached worker, like ansible's
        open(marker + ".worker", "w").write(str(os.getpid()))
        time.sleep(120)
        os._exit(0)
    open(marker + ".playbook", "w").write(str(os.getpid()))
    mode = os.environ.get("FAKE_MODE", "")
    if mode == "finish":
        time.sleep(0.5)
        sys.exit(0)
    time.sleep(120)
    """
)

# Plays `sglbench run`: starts the keeper as its child (the keeper checks its parent pid), says its pid.
PARENT = textwrap.dedent(
    """\
    import os, subprocess, sys
    env = dict(os.environ)
    cfg = {cfg}
    cfg["parent_pid"] = os.getpid()
    env["SGLBENCH_TREE"] = __import__("json").dumps(cfg)
    child = subprocess.Popen([sys.executable, "-m", "sglbench.tree", "bench.yml", {marker!r}], env=env)
    print(child.pid, flush=True)
    sys.exit(child.wait())
    """
)


def _cfg(tmp_path: Path) -> dict:
    fake = tmp_path / "ansible-playbook"
    fake.write_text(FAKE_PLAYBOOK.format(python=sys.executable))
    fake.chmod(0o755)
    return {
        "ansible_playbook": str(fake),
        "playbook": "bench.yml",
        "cleanup_playbook": str(tmp_path / "stop.yml"),
        "state_file": str(tmp_path / "tree.json"),
        "log_file": str(tmp_path / "tree.log"),
        "parent_pid": 0,
        "locks": [{"path": str(tmp_path / "gpu1.tree.lock"), "holder": {"host": "gpu1", "run_id": "r1"}}],
        "grace_s": 3.0,
        "cleanup_timeout_s": 30.0,
    }


def _start(tmp_path: Path, mode: str = "") -> tuple[subprocess.Popen[str], int]:
    code = PARENT.format(cfg=repr(_cfg(tmp_path)), marker=str(tmp_path / "m"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "FAKE_MODE": mode}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    int(parent.stdout.readline())  # the relay ansible-runner would know; the keeper proper is its child
    _wait_for(lambda: (tmp_path / "m.worker").exists() and (tmp_path / "m.playbook").exists())
    # the keeper writes its state once it has started the playbook: on a loaded machine, after the
    # playbook's first steps
    _wait_for(lambda: _phase(tmp_path) not in (None, "starting"))
    keeper = json.loads((tmp_path / "tree.json").read_text())["pid"]
    return parent, keeper


def _phase(tmp_path: Path) -> str | None:
    try:
        return str(json.loads((tmp_path / "tree.json").read_text())["phase"])
    except FileNotFoundError:
        return None


def _wait_for(cond, timeout: float = 120.0) -> None:  # bounds a failure only
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def test_sigkill_of_sglbench_run_takes_the_whole_tree_down_and_runs_the_cleanup(tmp_path: Path) -> None:
    parent, keeper = _start(tmp_path)
    worker = int((tmp_path / "m.worker").read_text())
    playbook = int((tmp_path / "m.playbook").read_text())
    tree_lock = tmp_path / "gpu1.tree.lock"
    assert not lock.probe_free(tree_lock)  # held by the tree
    assert json.loads(tree_lock.read_text())["pid"] == keeper
    parent.kill()  # SIGKILL: no handler of sglbench run runs
    parent.wait(120)
    _wait_for(lambda: not _alive(keeper))
    assert not _alive(worker) and not _alive(playbook)  # the detached worker too
    assert lock.probe_free(tree_lock)  # released only once every process is gone
    assert "stop.yml" in (tmp_path / "m.cleanup").read_text()  # the units were stopped
    state = json.loads((tmp_path / "tree.json").read_text())
    assert state["phase"] == "cleaned" and state["cleanup_rc"] == 0 and state["parent_alive"] is False


def test_a_detached_worker_keeps_the_tree_lock_until_it_ends(tmp_path: Path) -> None:
    """Even when the keeper itself is SIGKILLed, an orphaned worker still holds the inherited lock."""
    parent, keeper = _start(tmp_path)
    worker = int((tmp_path / "m.worker").read_text())
    tree_lock = tmp_path / "gpu1.tree.lock"
    try:
        os.kill(keeper, signal.SIGKILL)
        parent.wait(120)
        time.sleep(0.3)
        assert _alive(worker) and not lock.probe_free(tree_lock)
    finally:
        for pid in (worker, int((tmp_path / "m.playbook").read_text())):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: lock.probe_free(tree_lock))


def test_the_relay_killed_by_ansible_runner_still_gets_the_units_stopped(tmp_path: Path) -> None:
    """ansible-runner's pexpect SIGKILLs the process it started when an exception (a full results disk)
    unwinds through it: that process is only a relay; the keeper proper cleans up when it dies."""
    code = PARENT.format(cfg=repr(_cfg(tmp_path)), marker=str(tmp_path / "m"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    relay = int(parent.stdout.readline())
    _wait_for(lambda: (tmp_path / "m.worker").exists() and (tmp_path / "m.playbook").exists())
    # the keeper writes its state once it has started the playbook: on a loaded machine, after the
    # playbook's first steps
    _wait_for(lambda: _phase(tmp_path) not in (None, "starting"))
    keeper = json.loads((tmp_path / "tree.json").read_text())["pid"]
    worker = int((tmp_path / "m.worker").read_text())
    os.kill(relay, signal.SIGKILL)
    parent.wait(120)
    _wait_for(lambda: not _alive(keeper))
    assert not _alive(worker) and (tmp_path / "m.cleanup").exists()
    assert lock.probe_free(tmp_path / "gpu1.tree.lock")


def test_interrupt_ends_the_tree_then_stops_the_units(tmp_path: Path) -> None:
    parent, keeper = _start(tmp_path)
    os.kill(keeper, signal.SIGTERM)  # what sglbench run sends on Ctrl-C
    assert parent.wait(120) == 128 + signal.SIGTERM
    assert (tmp_path / "m.cleanup").exists()
    assert json.loads((tmp_path / "tree.json").read_text())["parent_alive"] is True


def test_normal_end_passes_the_playbook_exit_code_and_leaves_nothing(tmp_path: Path) -> None:
    parent, _keeper = _start(tmp_path, mode="finish")
    assert parent.wait(120) == 0
    worker = int((tmp_path / "m.worker").read_text())
    assert not _alive(worker)  # a leftover is ended at the end, or it would hold the lock
    assert not (tmp_path / "m.cleanup").exists()
    assert lock.probe_free(tmp_path / "gpu1.tree.lock")


def test_a_keeper_whose_parent_is_already_gone_starts_nothing(tmp_path: Path) -> None:
    cfg = {**_cfg(tmp_path), "parent_pid": 1}
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), tree.ENV: json.dumps(cfg)}
    proc = subprocess.run([sys.executable, "-m", "sglbench.tree", "bench.yml", "x"], env=env, timeout=30)
    assert proc.returncode == 1 and not (tmp_path / "m.playbook").exists()


def test_descendants_and_cleanup_argv() -> None:
    parents = {10: 1, 11: 10, 12: 11, 13: 1, 14: 12}
    assert tree.descendants(10, parents) == [11, 12, 14]
    cfg = tree.TreeConfig("ap", "/p/bench.yml", "/p/stop.yml", "s", "l", 1)
    k = tree.Keeper(cfg, ["/p/bench.yml", "-i", "inv", "-e", "@x"])
    assert k.cleanup_argv() == ["ap", "/p/stop.yml", "-i", "inv", "-e", "@x"]


def test_missing_configuration_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.delenv(tree.ENV, raising=False)
    assert tree.main([]) == 2
    assert "started by `sglbench run`" in capsys.readouterr().err


def test_ssh_connection_masters_are_told_apart_from_leftovers(tmp_path: Path) -> None:
    """A ControlPersist master outlives every playbook by design: ended at the end, but not reported as a
    leftover. Anything else is."""
    argvs = {
        11: b"ssh: /root/.ansible/cp/67742145b3 [mux]\0",
        12: b"ssh\0-o\0ControlMaster=auto\0simhost\0/bin/sh -c 'python3'\0",
        13: b"/usr/bin/python3\0-m\0worker\0",
    }
    for pid, argv in argvs.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(argv)
    assert tree.ssh_masters([11, 12, 13, 14], proc=tmp_path) == [11]


def test_a_killed_parent_not_yet_reaped_counts_as_gone(tmp_path: Path) -> None:
    # signal 0 still reaches an exited process until its parent reaps it: the keeper must not call it alive
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while not tree.is_zombie(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tree.is_zombie(child.pid)
    keeper = tree.Keeper(tree.TreeConfig("ap", "/p/bench.yml", "/p/stop.yml", "s", "l", child.pid), [])
    assert keeper.parent_alive() is False
    child.wait()
    assert not tree.is_zombie(child.pid) and keeper.parent_alive() is False
    me = tree.Keeper(tree.TreeConfig("ap", "/p/bench.yml", "/p/stop.yml", "s", "l", os.getpid()), [])
    assert not tree.is_zombie(os.getpid()) and me.parent_alive()
