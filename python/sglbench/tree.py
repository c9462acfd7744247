"""The campaign's process tree: ``ansible-playbook`` runs under this keeper, which lives exactly as long
as the tree and takes it down when ``sglbench run`` goes away.

``sglbench run`` (:mod:`sglbench.runner`) asks ansible-runner to start this module's script instead of
``ansible-playbook`` (ansible-runner's ``binary``); the keeper then

1. marks itself a child subreaper, so every process of the tree (ansible-playbook, the workers it
   detaches with ``setsid``, their ``ssh``/``podman exec`` children) stays its descendant even when its
   own parent dies, and asks the kernel for SIGTERM when ``sglbench run`` dies (``PR_SET_PDEATHSIG``,
   SIGKILL included);
2. takes the tree locks (one per GPU host, :mod:`sglbench.lock`) on file descriptors every process of
   the tree inherits: the lock is free only when the last process of the tree is gone, so a second
   campaign can never drive a host while a process of this one still does;
3. runs ``ansible-playbook`` and waits. On SIGTERM/SIGINT (Ctrl-C of ``sglbench run``, or its death)
   it terminates the whole tree (SIGTERM, then SIGKILL after a grace period), then runs the cleanup
   playbook (``playbooks/stop.yml``: stop every SGLang unit, free the GPUs, end orphaned benchmark
   clients on the host) with the same inventory and variables, and only then exits, releasing the
   locks. Its report goes to ``<state file>`` (JSON) and the cleanup's output to ``<log>``.

Configuration comes in the environment variable ``SGLBENCH_TREE`` (JSON, see :class:`TreeConfig`); the
arguments are those ansible-runner built for ``ansible-playbook``. Linux only (``prctl``, ``/proc``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sglbench.hostlib.atomic_file import write_atomic

ENV = "SGLBENCH_TREE"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.2


@dataclass
class TreeConfig:
    ansible_playbook: str  # the ansible-playbook executable
    playbook: str  # the campaign playbook (its argument is replaced by `cleanup_playbook` for the cleanup)
    cleanup_playbook: str  # stops every unit and frees the GPUs
    state_file: str  # JSON report of the keeper: pid, phase, cleanup outcome
    log_file: str  # the cleanup playbook's output
    parent_pid: int  # sglbench run; if it is already gone when we start, nothing runs
    locks: list[dict[str, Any]] = field(default_factory=list)  # [{"path": ..., "holder": {...}}]
    grace_s: float = 10.0  # SIGTERM -> SIGKILL for the tree
    cleanup_timeout_s: float = 900.0
    lock_timeout_s: float = 30.0
    command_artifact: str = ""  # ansible-runner's artifacts/<ident>/command: its env is redacted at start

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> TreeConfig:
        raw = (environ if environ is not None else os.environ).get(ENV)
        if not raw:
            raise ValueError(f"{ENV} is not set: this keeper is started by `sglbench run`")
        data = json.loads(raw)
        return cls(**data)

    def to_env(self) -> str:
        return json.dumps(asdict(self))


# -- process tree -------------------------------------------------------------------------------------
def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def parent_map(proc: Path = Path("/proc")) -> dict[int, int]:
    """``{pid: ppid}`` of every process we can see."""
    out: dict[int, int] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        rest = stat_fields(d / "stat")
        if rest is None:
            continue
        with contextlib.suppress(IndexError, ValueError):
            out[int(d.name)] = int(rest[1])
    return out


def stat_fields(path: Path) -> list[str] | None:
    """The fields of a ``/proc/<pid>/stat`` after the command name (state, ppid, ...); None when unreadable.

    The line is "pid (comm) state ppid ...", where comm may contain spaces and parentheses."""
    try:
        stat = path.read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def is_zombie(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (state ``Z``): signal 0 still reaches it."""
    rest = stat_fields(proc / str(pid) / "stat")
    return rest is not None and rest[:1] == ["Z"]


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    """Every descendant of ``root`` (children first, then theirs)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        if pid in out or pid == root:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def ssh_masters(pids: Iterable[int], proc: Path = Path("/proc")) -> list[int]:
    """The pids that are ssh connection masters (ControlPersist: ``ssh: <control path> [mux]``), which
    outlive the playbook by design and hold no lock (ssh closes every inherited descriptor)."""
    out = []
    for pid in pids:
        try:
            argv = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if argv.startswith(b"ssh: ") and argv.rstrip(b"\0").endswith(b"[mux]"):
            out.append(pid)
    return out


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap() -> dict[int, int]:
    """Collect every exited child (adopted orphans included), without blocking: ``{pid: exit code}``."""
    done: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = os.waitstatus_to_exitcode(status)


def terminate_tree(
    root: int,
    grace_s: float,
    *,
    list_fn: Callable[[int], list[int]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """SIGTERM every descendant of ``root``, SIGKILL what is left after ``grace_s``; returns the pids
    signalled. Processes that appear meanwhile (a worker forking) are caught by the later rounds."""
    lister = list_fn or (lambda r: descendants(r, parent_map()))
    seen: list[int] = []
    pids = lister(root)
    seen.extend(pids)
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        left = lister(root)
        if not left:
            return seen
        new = [p for p in left if p not in seen]
        seen.extend(new)
        _signal_all(new, signal.SIGTERM)
        sleep(POLL_S)
    for _ in range(50):
        _reap()
        left = lister(root)
        if not left:
            break
        seen.extend(p for p in left if p not in seen)
        _signal_all(left, signal.SIGKILL)
        sleep(POLL_S)
    _reap()
    return seen


# -- locks --------------------------------------------------------------------------------------------
def take_locks(locks: list[dict[str, Any]], timeout_s: float) -> list[int]:
    """Open and flock each tree lock (exclusive), inheritable so every process of the tree holds it."""
    fds: list[int] = []
    deadline = time.monotonic() + timeout_s
    for lk in locks:
        path = str(lk["path"])
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            writable = True
        except PermissionError:  # left by another user: flock works on a read-only descriptor too
            fd = os.open(path, os.O_RDONLY)
            writable = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    for f in fds:
                        os.close(f)
                    raise TimeoutError(f"tree lock {path} is held by another process tree") from None
                time.sleep(POLL_S)
        holder = dict(lk.get("holder") or {})
        holder["pid"] = os.getpid()
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        os.set_inheritable(fd, True)
        fds.append(fd)
    return fds


def redact_command_artifact(path: str) -> bool:
    """ansible-runner stores the whole environment of the run in ``artifacts/<ident>/command``; the values
    of secret-looking variables (SGLBENCH_API_KEY, HF_TOKEN) are replaced there. True when it changed."""
    from sglbench.secretcheck import redact, redact_argv

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    clean = dict(data)
    if isinstance(data.get("env"), dict):
        clean["env"] = redact(data["env"])
    if isinstance(data.get("command"), list):
        clean["command"] = redact_argv([str(w) for w in data["command"]])
    if clean == data:
        return False
    try:
        write_atomic(path, json.dumps(clean), mode=0o600)
    except OSError:
        return False
    return True


# -- the keeper -----------------------------------------------------------------------------------------
class Keeper:
    def __init__(self, cfg: TreeConfig, args: list[str]) -> None:
        self.cfg = cfg
        self.args = args
        self.state: dict[str, Any] = {"pid": os.getpid(), "phase": "starting", "started_at": time.time()}
        self.stop_signal: int | None = None

    def save(self, **kw: Any) -> None:
        self.state.update(kw)
        text = json.dumps(self.state, indent=1)
        with contextlib.suppress(OSError):
            write_atomic(self.cfg.state_file, text)

    def say(self, text: str) -> None:
        """A line on the pty (sglbench run's artifacts) and in the log; a dead pty is fine."""
        line = f"sglbench tree [{os.getpid()}]: {text}\n"
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(line)
            sys.stdout.flush()
        with contextlib.suppress(OSError), open(self.cfg.log_file, "a", encoding="utf-8") as fh:
            fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + line)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    def run(self) -> int:
        """Split in two: this process (the one ansible-runner's pexpect knows, which it SIGKILLs when an
        exception unwinds through it) only relays; its child, the keeper proper, does the work and runs
        the cleanup when this relay dies, whatever killed it."""
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != self.cfg.parent_pid:  # sglbench run died before we could watch it
            self.say("sglbench run is already gone; not starting the playbook")
            self.save(phase="orphaned-at-start")
            return 1
        relay = os.getpid()
        keeper = os.fork()
        if keeper == 0:
            os._exit(self.keep(relay))
        return self.relay(keeper)

    def relay(self, keeper: int) -> int:
        """Forward stop signals to the keeper; exit with its status once it is done."""

        def forward(signum: int, _frame: Any) -> None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(keeper, signal.SIGTERM)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, forward)
        while True:
            try:
                _pid, status = os.waitpid(keeper, 0)
            except ChildProcessError:
                return 1
            except InterruptedError:
                continue
            rc = os.waitstatus_to_exitcode(status)
            return rc if rc >= 0 else 128 - rc

    def parent_alive(self) -> bool:
        """Whether ``sglbench run`` still runs: a killed one its own parent has not reaped yet is gone."""
        try:
            os.kill(self.cfg.parent_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not is_zombie(self.cfg.parent_pid)

    def keep(self, relay: int) -> int:
        self.state["pid"] = os.getpid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the relay's death (killed, or sglbench run gone)
        if os.getppid() != relay and self.stop_signal is None:
            self.stop_signal = signal.SIGTERM
        if self.cfg.command_artifact:
            redact_command_artifact(self.cfg.command_artifact)
        try:
            lock_fds = take_locks(self.cfg.locks, self.cfg.lock_timeout_s)
        except (OSError, TimeoutError) as exc:
            self.say(f"cannot take the tree locks: {exc}")
            self.save(phase="lock-failed", error=str(exc))
            return 2
        if self.stop_signal is not None:  # the relay died before the playbook started: nothing to end
            self.save(phase="orphaned-at-start")
            return 1
        argv = [self.cfg.ansible_playbook, *self.args]
        child = subprocess.Popen(argv, pass_fds=lock_fds, close_fds=True)
        self.save(phase="running", playbook_pid=child.pid)
        rc: int | None = None
        while rc is None:
            if self.stop_signal is not None:
                return self.interrupt(child)
            rc = _reap().get(child.pid)
            if rc is None:
                time.sleep(POLL_S)
        child.returncode = rc
        # A normal end leaves nothing behind but the ssh connection masters; be sure.
        masters = ssh_masters(descendants(os.getpid(), parent_map()))
        left = [pid for pid in terminate_tree(os.getpid(), 2.0) if pid not in masters]
        if left:
            self.say(f"ended {len(left)} leftover process(es) of the playbook: {left}")
        self.save(phase="finished", rc=rc)
        return rc if rc >= 0 else 128 - rc

    def interrupt(self, child: subprocess.Popen[bytes]) -> int:
        sig = self.stop_signal or signal.SIGTERM
        parent_alive = self.parent_alive()
        why = "sglbench run was interrupted" if parent_alive else "sglbench run is gone"
        self.say(f"{why} (signal {signal.Signals(sig).name}): ending the playbook and every process of it")
        self.save(phase="terminating", signal=signal.Signals(sig).name, parent_alive=parent_alive)
        # Ignore further signals while we clean up: the cleanup must run to its end.
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        ended = terminate_tree(os.getpid(), self.cfg.grace_s)
        with contextlib.suppress(ChildProcessError, OSError, subprocess.TimeoutExpired):
            child.wait(timeout=1)
        self.save(phase="cleanup", terminated=len(ended))
        rc = self.cleanup()
        self.save(phase="cleaned" if rc == 0 else "cleanup-failed", cleanup_rc=rc, ended_at=time.time())
        self.say(
            "every SGLang unit was stopped and the GPUs were checked free"
            if rc == 0
            else f"the cleanup playbook failed (rc {rc}); see {self.cfg.log_file}"
        )
        return 128 + sig

    def cleanup_argv(self) -> list[str]:
        args = list(self.args)
        if self.cfg.playbook in args:
            args[args.index(self.cfg.playbook)] = self.cfg.cleanup_playbook
        else:
            args.append(self.cfg.cleanup_playbook)
        return [self.cfg.ansible_playbook, *args]

    def cleanup(self) -> int:
        """Run the cleanup playbook. Its output passes through us into the log, best effort: the log lives
        on the results disk, which may be the very thing that is full, and the units must stop anyway."""
        # Plain output: ansible-runner's event callback would write to the (possibly dead) pty.
        drop = ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_STDOUT_CALLBACK", "ORIGINAL_STDOUT_CALLBACK")
        env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("RUNNER_")}
        env.update(ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
        argv = self.cleanup_argv()
        log = _BestEffortLog(self.cfg.log_file)
        log.write(f"$ {' '.join(argv)}\n".encode())
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self.say(f"cannot run the cleanup playbook: {exc}")
            return 127
        assert proc.stdout is not None
        deadline = time.monotonic() + self.cfg.cleanup_timeout_s
        fd = proc.stdout.fileno()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    break
                log.write(data)
        else:
            terminate_tree(os.getpid(), 5.0)
            log.close()
            return 124
        log.close()
        try:
            return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            terminate_tree(os.getpid(), 5.0)
            return 124


class _BestEffortLog:
    """Appends to a file, dropping what cannot be written (ENOSPC, EIO) instead of failing."""

    def __init__(self, path: str) -> None:
        try:
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            self.fd = None

    def write(self, data: bytes) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, data)

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = TreeConfig.from_env()
    except (ValueError, TypeError) as exc:
        print(f"sglbench tree: {exc}", file=sys.stderr)
        return 2
    os.environ.pop(ENV, None)
    return Keeper(cfg, list(sys.argv[1:] if argv is None else argv)).run()


def script_text(python: str, src_dir: str) -> str:
    """The executable ansible-runner starts in place of ansible-playbook."""
    return (
        f"#!{python}\n"
        "# Written by sglbench run: keeps the campaign's process tree (see python/sglbench/tree.py).\n"
        "import sys\n"
        f"sys.path.insert(0, {src_dir!r})\n"
        "from sglbench.tree import main\n"
        "sys.exit(main())\n"
    )


if __name__ == "__main__":
    sys.exit(main())
