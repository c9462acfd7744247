"""``sglbench run``: run ``playbooks/bench.yml`` through ansible-runner's Python API.

What it does, in order:

1. Resolve the project (the checkout holding ``playbooks/bench.yml``), the inventory and its GPU hosts
   (``ansible-inventory --list``, group ``sglang_gpu``); a bad inventory exits 2.
2. Lock every GPU host of the inventory (:mod:`sglbench.lock`), and wait until no process of an
   earlier campaign still drives one (its tree lock); a busy host exits 2 naming the holder unless
   ``--wait`` lets us queue.
3. Under those locks, pick the run: a new ``<results>/<UTC timestamp>`` id, or (without ``--fresh``)
   the newest run of the same GPU hosts that did not finish *and whose owner is provably gone* (its
   ``_runner/run.lock`` is free), so an interrupted campaign resumes in place and a live one is never
   joined. We hold that run lock until we end.
4. ``ansible_runner.run(private_data_dir=<run>/_runner, ident=<invocation>, event_handler=...)`` with
   ``ansible-playbook`` started under the tree keeper (:mod:`sglbench.tree`): the whole process tree
   holds the tree locks and dies with us; Ctrl-C (or SIGTERM) ends the playbook, stops every SGLang
   unit on the hosts (``playbooks/stop.yml``) and leaves the run resumable (status ``interrupted``,
   exit 130). Artifacts (job events, stdout, rc) stay per run under ``<run>/_runner/artifacts/<ident>/``;
   every event updates per-host progress (:mod:`sglbench.events`) and a line is printed when a host
   changes phase or config.
5. Print the summary (:mod:`sglbench.summarize`) and exit 0 when every attempt is ok and every point
   valid, 1 when some configs failed or were skipped, 2 when the run could not proceed (unreachable
   host, failed preflight, bad inventory, busy host, no record written, results not writable).

Secrets never travel on a command line: ``-e`` with a secret-looking name or value is refused (the
key comes from the inventory or from ``SGLBENCH_API_KEY`` in the environment), and the command stored
in lock files and ``run.json`` is redacted.

Extra variables passed to the playbook are listed in ``EXTRAVARS_DOC`` and docs/operations.md.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sglbench import events, tree
from sglbench.hostlib.atomic_file import write_atomic
from sglbench.lock import LockBusy, RunLock, holder_record, lock_hosts
from sglbench.secretcheck import redact, redact_argv, secret_paths

GPU_GROUP = "sglang_gpu"
PLAYBOOK = "playbooks/bench.yml"
CLEANUP_PLAYBOOK = "playbooks/stop.yml"
RUNNER_DIR = "_runner"
EXIT_INTERRUPTED = 130
# Less free space than this on the results disk stops the campaign (see _Interrupts.watch_disk).
MIN_FREE_BYTES = 4 << 20
# run.json statuses a later `sglbench run` resumes (when the run's owner is gone)
RESUMABLE = ("running", "interrupted", "incomplete")
POLICIES = ("skip", "autotune", "force")
EXTRAVARS_DOC = {
    "tp": "TP phase: 1, 4, 8 or all (sglang_preflight)",
    "run_id": "results directory name of this run (sglang_preflight)",
    "sglbench_run_id": "same, read by sglang_cycle",
    "sglbench_results_dir": "results root on the controller (sglang_cycle)",
    "policy": "capacity policy skip|autotune|force (sglang_cycle)",
    "sglang_cycle_configs": "config names to run, [] = all (sglang_cycle)",
    "sglbench_configs": "same, under the public name (docs/operations.md)",
    "sglbench_fresh": "true with --fresh: do not reuse completed points (docs/operations.md)",
}


class RunError(Exception):
    """The run cannot start (bad inventory, no project); exit 2 with this message."""

    exit_code = 2


class Interrupted(RunError):
    """Interrupted twice: we stop waiting for the cleanup (which goes on); exit 130."""

    exit_code = 130


@dataclass
class RunOptions:
    project_dir: Path
    inventory: Path | None = None
    tp: str = "all"
    configs: list[str] = field(default_factory=list)
    policy: str | None = None
    fresh: bool = False
    results_dir: Path | None = None
    run_id: str | None = None
    wait_s: float = 0.0
    lock_dir: Path | None = None
    extra_vars: dict[str, Any] = field(default_factory=dict)

    @property
    def results_root(self) -> Path:
        if self.results_dir is not None:
            return self.results_dir
        env = os.environ.get("SGLBENCH_RESULTS_DIR")
        return Path(env) if env else self.project_dir / "results"


class RunnerResult(Protocol):
    """What we use of ansible_runner.Runner (a fake in tests)."""

    status: str
    rc: int | None


RunnerFn = Callable[..., RunnerResult]


# -- pure helpers -----------------------------------------------------------------------------------
def new_run_id(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))


def build_extravars(opts: RunOptions, run_id: str) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "tp": opts.tp,
        "run_id": run_id,
        "sglbench_run_id": run_id,
        "sglbench_results_dir": str(opts.results_root.resolve()),
    }
    if opts.configs:
        ev["sglang_cycle_configs"] = list(opts.configs)
        ev["sglbench_configs"] = list(opts.configs)
    if opts.policy:
        ev["policy"] = opts.policy
    if opts.fresh:
        ev["sglbench_fresh"] = True
    ev.update(opts.extra_vars)
    return ev


def read_run_meta(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / RUNNER_DIR / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _same_hosts(meta: dict[str, Any], hosts: dict[str, str] | None) -> bool:
    if hosts is None:
        return True
    theirs = meta.get("hosts")
    return isinstance(theirs, dict) and sorted(map(str, theirs.values())) == sorted(hosts.values())


def resumable_run(results_root: Path, hosts: dict[str, str] | None = None) -> str | None:
    """The newest run of these GPU hosts started by ``sglbench run`` that did not finish (None if the
    newest one finished). Whether its owner is gone is decided by :func:`choose_run` under the locks."""
    if not results_root.is_dir():
        return None
    runs = sorted(p for p in results_root.iterdir() if p.is_dir() and (p / RUNNER_DIR / "run.json").is_file())
    for run in reversed(runs):
        meta = read_run_meta(run)
        if meta is None or not _same_hosts(meta, hosts):
            continue
        return run.name if meta.get("status") in RESUMABLE else None
    return None


def _owner_alive(meta: dict[str, Any]) -> bool:
    """A run's recorded owner still runs on this controller (a run lock is the proof; this covers a
    run written before run locks existed)."""
    pid = meta.get("pid")
    if meta.get("controller") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"sglbench" in cmdline and b"run" in cmdline


def choose_run(
    opts: RunOptions, hosts: dict[str, str] | None = None, now: float | None = None
) -> tuple[str, bool, RunLock]:
    """(run id, resumed?, the run's lock, held) -- call with the host locks held.

    A run is resumed only when its owner is provably gone: its ``run.lock`` is free (we take it and
    keep it) and no live ``sglbench run`` of this controller is recorded in its ``run.json``."""
    root = opts.results_root
    if opts.run_id:
        run_dir = root / opts.run_id
        existed = run_dir.is_dir()
        lk = RunLock(run_dir / RUNNER_DIR / "run.lock")
        meta = read_run_meta(run_dir) or {}
        if not lk.try_acquire() or _owner_alive(meta):
            lk.release()
            raise RunError(
                f"--run-id {opts.run_id}: that run is in use by another sglbench run "
                f"(pid {meta.get('pid', '?')} on {meta.get('controller', '?')}); wait for it to end or "
                "choose another run id"
            )
        return opts.run_id, existed, lk
    if not opts.fresh:
        prev = resumable_run(root, hosts)
        if prev:
            lk = RunLock(root / prev / RUNNER_DIR / "run.lock")
            if lk.try_acquire() and not _owner_alive(read_run_meta(root / prev) or {}):
                return prev, True, lk
            lk.release()  # its owner is alive (it drives other hosts, or another controller): never join
    base = new_run_id(now)
    run_id, n = base, 1
    while (root / run_id).exists():  # two runs in one second never share a directory
        n += 1
        run_id = f"{base}-{n}"
    lk = RunLock(root / run_id / RUNNER_DIR / "run.lock")
    if not lk.try_acquire():  # created by a racing campaign in the meantime
        return choose_run(opts, hosts, (now or time.time()) + 1)
    return run_id, False, lk


def choose_run_id(opts: RunOptions, now: float | None = None) -> tuple[str, bool]:
    """(run id, resumed?) without keeping the run lock (kept for callers that only need the name)."""
    run_id, resumed, lk = choose_run(opts, None, now)
    lk.release()
    return run_id, resumed


def gpu_hosts(inventory_json: dict[str, Any], group: str = GPU_GROUP) -> dict[str, str]:
    """``{inventory name: lock identity}`` of the hosts in ``group`` (children included) from
    ``ansible-inventory --list`` output; the identity is ``ansible_host`` when set."""
    hostvars = (inventory_json.get("_meta") or {}).get("hostvars") or {}
    seen: set[str] = set()
    names: list[str] = []

    def walk(g: str) -> None:
        if g in seen:
            return
        seen.add(g)
        node = inventory_json.get(g) or {}
        for h in node.get("hosts") or []:
            if h not in names:
                names.append(h)
        for child in node.get("children") or []:
            walk(child)

    walk(group)
    return {h: str((hostvars.get(h) or {}).get("ansible_host") or h) for h in names}


def decide_exit(
    status: str, rc: int | None, progress: events.Progress, attempts: list[dict[str, Any]]
) -> int:
    """0 every attempt ok and every point valid; 1 some configs failed or were skipped (or points were
    invalid, or attempts are missing); 2 the run could not proceed."""
    if events.failure_kind(progress):
        return 2
    if not attempts:
        return 2
    missing = any(h.total is not None and len(h.done) < h.total for h in progress.hosts.values())
    bad = any(a.get("outcome") != "ok" or not a.get("valid", True) for a in attempts)
    if bad or missing or status != "successful" or rc not in (0, None):
        return 1
    return 0


# -- effects ----------------------------------------------------------------------------------------
def find_project_dir(start: Path | None = None) -> Path:
    env = os.environ.get("SGLBENCH_PROJECT_DIR")
    if env:
        return Path(env)
    here = (start or Path(__file__)).resolve()
    for d in [here, *here.parents]:
        if (d / PLAYBOOK).is_file():
            return d
    cwd = Path.cwd()
    if (cwd / PLAYBOOK).is_file():
        return cwd
    raise RunError(
        f"cannot find {PLAYBOOK}: run from the sglbench checkout, "
        "or pass --project-dir / set SGLBENCH_PROJECT_DIR"
    )


def _env(project_dir: Path) -> dict[str, str]:
    """Environment for ansible: our ansible.cfg and this Python's bin dir first on PATH. ansible-runner sets
    ANSIBLE_CALLBACK_PLUGINS for its own event callback, which hides ansible.cfg's callback_plugins: the
    project's callbacks (those ansible.cfg enables) are named here, and runner adds its own after them."""
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": str(project_dir / "ansible.cfg"),
        "ANSIBLE_CALLBACK_PLUGINS": str(project_dir / "plugins" / "callback"),
    }
    for k in ("CONTAINERS_CONF", "SGLBENCH_SIMHOST_IMAGE"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    return env


def load_inventory(opts: RunOptions) -> dict[str, Any]:
    exe = shutil.which("ansible-inventory", path=_env(opts.project_dir)["PATH"])
    if exe is None:
        raise RunError("ansible-inventory not found; install ansible-core in this environment (make venv)")
    cmd = [exe, "--list"]
    if opts.inventory is not None:
        if not opts.inventory.exists():
            raise RunError(f"--inventory {opts.inventory}: no such file or directory")
        cmd += ["-i", str(opts.inventory)]
    # An inventory source no plugin can parse is an error, not an empty inventory ("no hosts in group").
    strict = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1"}
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=opts.project_dir,
        env={**os.environ, **_env(opts.project_dir), **strict},
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        where = (
            f"--inventory {opts.inventory}" if opts.inventory is not None else "the inventory of ansible.cfg"
        )
        why = inventory_error(proc.stderr)
        if " (at " not in why and opts.inventory is not None and (found := _yaml_error_in(opts.inventory)):
            why = found
        raise RunError(f"{where} cannot be read: {why}")
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        raise RunError(f"ansible-inventory printed no JSON: {proc.stdout[:200]!r}") from None
    return data


def inventory_error(stderr: str) -> str:
    """One line from ansible-inventory's complaint: the parser's message and where (file:line:column)."""
    text = events.ANSI.sub("", stderr)
    cause = origin = None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln == "<<< caused by >>>" and i + 1 < len(lines) and cause is None:
            cause = lines[i + 1]
        if ln.startswith("Origin: ") and origin is None and re.search(r":\d+(:\d+)?$", ln):
            origin = ln[len("Origin: ") :]
    if cause is None:
        errs = [ln for ln in lines if ln.startswith("[ERROR]")] or lines[-1:] or ["ansible-inventory failed"]
        cause = errs[0].removeprefix("[ERROR]:").strip()
    return f"{cause} (at {origin})" if origin else cause


def _yaml_error_in(path: Path) -> str | None:
    """The first YAML file under an inventory path that does not parse, with the line (Ansible does not
    say which group_vars file it was)."""
    import yaml

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".yml", ".yaml"))
    for f in files:
        try:
            yaml.safe_load(f.read_text(encoding="utf-8", errors="replace"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f"{f}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(f)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            return f"YAML parsing failed: {problem} (at {at})"
        except OSError:
            continue
    return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON, atomically (parents created); owner-only (0600), as ``run.json`` always was."""
    write_atomic(path, json.dumps(data, indent=1, default=str), mode=0o600)


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    exit_code: int
    status: str
    rc: int | None
    progress: events.Progress
    message: str = ""


class ProgressPrinter:
    """Runner event handler: fold events, print a host's line when its phase or config changes."""

    def __init__(self, configs: tuple[str, ...], out: Callable[[str], None]) -> None:
        self.state = events.Progress(configs=configs)
        self.out = out
        self._last: dict[str, tuple[Any, ...]] = {}

    def __call__(self, event: dict[str, Any]) -> bool:
        try:
            self.state = events.apply_event(self.state, event)
        except Exception as exc:  # a surprising event must never kill the run
            self.out(f"(progress: ignored an unreadable event: {exc})")
            return True
        now = self.state.last_seen or time.time()
        for name, h in self.state.hosts.items():
            key = (h.phase, h.instance, len(h.done), h.unreachable, h.setup_failed, h.results_failed)
            if self._last.get(name) != key:
                self._last[name] = key
                self.out(events.host_line(h, now))
        return True  # keep the event in the run's artifacts


class _Interrupts:
    """SIGINT/SIGTERM during the playbook: the first asks the tree keeper to end the playbook and stop
    every unit (the keeper's pid is in its state file); a second one gives up waiting for it."""

    def __init__(self, state_file: Path, out: Callable[[str], None]) -> None:
        self.state_file = state_file
        self.out = out
        self.signal: int | None = None
        self.sent = False
        self.disk_full: str | None = None  # why the results disk stopped the run

    def keeper_pid(self) -> int | None:
        try:
            pid = json.loads(self.state_file.read_text()).get("pid")
        except (OSError, ValueError, AttributeError):
            return None
        return pid if isinstance(pid, int) and pid > 1 else None

    def forward(self) -> None:
        """Send the stop to the keeper once it is known (called again from the event handler)."""
        if self.signal is None or self.sent:
            return
        pid = self.keeper_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
            self.sent = True

    def handler(self, signum: int, _frame: Any) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signum
        self.out(
            f"sglbench run: {signal.Signals(signum).name}: ending the playbook, then stopping every SGLang "
            "unit on the GPU hosts so the GPUs are free (interrupt again to stop waiting; the stop goes on)"
        )
        self.forward()

    def watch_disk(self, root: Path, min_free: int = MIN_FREE_BYTES) -> bool:
        """ansible-runner's periodic callback (every few seconds, output or not): a results disk that is
        full stops the campaign cleanly (the units are stopped) before Ansible and ansible-runner hang or
        fail half-way writing their files on it. Never cancels through ansible-runner (returns False)."""
        if self.disk_full is None and self.signal is None:
            try:
                free = shutil.disk_usage(root).free
            except OSError:
                free = min_free
            if free < min_free:
                self.disk_full = f"the results disk is full ({free // 1024} KiB free under {root})"
                self.signal = signal.SIGTERM
                self.out(
                    f"sglbench run: {self.disk_full}: ending the playbook, then stopping every SGLang unit"
                )
        self.forward()
        return False

    def stop_keeper_and_wait(self, timeout_s: float = 900.0) -> str:
        """The run failed under us: have the keeper end the playbook and stop the units; wait for it."""
        pid = self.keeper_pid()
        if pid is None:
            return "no playbook was running"
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            if tree.is_zombie(pid):  # exited, not yet reaped
                break
            time.sleep(0.5)
        else:
            return f"the SGLang units are still being stopped by pid {pid}"
        try:
            rc = json.loads(self.state_file.read_text()).get("cleanup_rc")
        except (OSError, ValueError, AttributeError):
            rc = None
        if rc == 0:
            return "every SGLang unit on the GPU hosts was stopped, the GPUs checked free"
        if rc is None:
            return "the units were stopped by its keeper (its report could not be written)"
        return f"stopping the SGLang units FAILED (rc {rc}): run ansible-playbook {CLEANUP_PLAYBOOK}"

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Interrupts]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {sig: signal.signal(sig, self.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)


def _keeper(
    opts: RunOptions, pdd: Path, ident: str, run_id: str, locks: list[Any]
) -> tuple[Path, dict[str, str]]:
    """Write the keeper script ansible-runner starts instead of ansible-playbook; its environment."""
    exe = shutil.which("ansible-playbook", path=_env(opts.project_dir)["PATH"])
    if exe is None:
        raise RunError("ansible-playbook not found; install ansible-core in this environment (make venv)")
    script = pdd / "sglbench-playbook"
    text = tree.script_text(sys.executable, str(Path(tree.__file__).resolve().parents[1]))
    script.write_text(text)
    script.chmod(0o700)
    cfg = tree.TreeConfig(
        ansible_playbook=exe,
        playbook=str(opts.project_dir / PLAYBOOK),
        cleanup_playbook=str(opts.project_dir / CLEANUP_PLAYBOOK),
        state_file=str(pdd / f"tree-{ident}.json"),
        command_artifact=str(pdd / "artifacts" / ident / "command"),
        log_file=str(pdd / f"tree-{ident}.log"),
        parent_pid=os.getpid(),
        locks=[
            {"path": str(lk.tree_path), "holder": {**holder_record(lk.host, lk.command), "run_id": run_id}}
            for lk in locks
        ],
    )
    return script, {tree.ENV: cfg.to_env()}


def _write_or_fail(path: Path, data: dict[str, Any]) -> None:
    try:
        _write_json(path, data)
    except OSError as exc:
        hint = (
            " (free space on the results disk, then run again: the run resumes)"
            if exc.errno
            in (
                errno.ENOSPC,
                errno.EDQUOT,
            )
            else ""
        )
        raise RunError(f"cannot write {path}: {exc.strerror or exc}{hint}") from None


def run_campaign(
    opts: RunOptions,
    *,
    runner_fn: RunnerFn | None = None,
    inventory_fn: Callable[[RunOptions], dict[str, Any]] | None = None,
    out: Callable[[str], None] = print,
) -> RunOutcome:
    """Everything ``sglbench run`` does (see the module docstring); returns the outcome with its exit code."""
    hosts = gpu_hosts((inventory_fn or load_inventory)(opts))
    if not hosts:
        raise RunError(f"the inventory has no hosts in group {GPU_GROUP}; add your GPU hosts there")

    def on_wait(host: str, holder: Any) -> None:
        out(
            f"sglbench run: waiting up to {opts.wait_s:.0f} s for GPU host {host}: held by "
            f"{holder.describe() if holder else 'another process'}"
        )

    with lock_hosts(list(hosts.values()), opts.lock_dir, wait_s=opts.wait_s, on_wait=on_wait) as locks:
        run_id, resumed, run_lock = choose_run(opts, hosts)
        try:
            return _run_locked(opts, hosts, locks, run_id, resumed, runner_fn, out)
        finally:
            run_lock.release()


def _run_meta(
    opts: RunOptions, hosts: dict[str, str], run_id: str, resumed: bool, ident: str, extravars: dict[str, Any]
) -> dict[str, Any]:
    """run.json while the playbook runs (the status and exit code are added when it ends)."""
    return {
        "run_id": run_id,
        "status": "running",
        "resumed": resumed,
        "ident": ident,
        "started_at": time.time(),
        "pid": os.getpid(),
        "controller": socket.gethostname(),
        "command": " ".join(redact_argv(sys.argv)),
        "options": redact({k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()}),
        "extravars": redact(extravars),
        "hosts": hosts,
    }


def _keeper_kwargs(
    opts: RunOptions, pdd: Path, ident: str, run_id: str, locks: list[Any], interrupts: _Interrupts
) -> tuple[dict[str, Any], dict[str, str]]:
    """ansible-runner's arguments that start the playbook under the tree keeper; the keeper's environment."""
    script, tree_env = _keeper(opts, pdd, ident, run_id, locks)
    keeper_kw = {
        "binary": str(script),
        "cmdline": shlex.quote(str(opts.project_dir / PLAYBOOK)),
        # ansible-runner's default cancel handler would SIGKILL the keeper's process group on Ctrl-C,
        # leaving the units running; our handler asks the keeper to stop them instead. Called every
        # few seconds, it also watches the results disk.
        "cancel_callback": lambda: interrupts.watch_disk(opts.results_root),
        # No env/ files: a resumed run would otherwise get the first invocation's environment and
        # variables back from them (they win over what we pass), e.g. the previous keeper's parent pid.
        "suppress_env_files": True,
    }
    for stale in ("envvars", "extravars", "cmdline"):
        with contextlib.suppress(FileNotFoundError):
            (pdd / "env" / stale).unlink()
    return keeper_kw, tree_env


def _invoke(
    runner_fn: RunnerFn,
    runner_kw: dict[str, Any],
    interrupts: _Interrupts,
    meta: dict[str, Any],
    pdd: Path,
    ident: str,
    run_id: str,
) -> RunnerResult:
    """Run the playbook; a full results disk or a second interrupt ends the wait with run.json updated."""
    try:
        with interrupts.installed():
            return runner_fn(**runner_kw)
    except OSError as exc:  # ansible-runner could not write its own artifacts (a full results disk)
        done = interrupts.stop_keeper_and_wait()
        with contextlib.suppress(OSError):
            meta.update(status="incomplete", ended_at=time.time(), exit_code=2)
            _write_json(pdd / "run.json", meta)
        raise RunError(
            f"ansible-runner could not write under {pdd}: {exc.strerror or exc}; the playbook was ended and "
            f"{done}. Free the space, then run again: run {run_id} resumes"
        ) from None
    except KeyboardInterrupt:  # interrupted twice: the keeper goes on stopping the units on its own
        meta.update(status="interrupted", ended_at=time.time(), exit_code=EXIT_INTERRUPTED)
        with contextlib.suppress(OSError):
            _write_json(pdd / "run.json", meta)
        raise Interrupted(
            f"interrupted twice: no longer waiting; the campaign's keeper (pid {interrupts.keeper_pid()}) "
            f"is still stopping the SGLang units (log: {pdd / f'tree-{ident}.log'}). Run {run_id} stays "
            "resumable."
        ) from None


def _conclusion(
    r: RunnerResult,
    interrupts: _Interrupts,
    printer: ProgressPrinter,
    run_dir: Path,
    pdd: Path,
    ident: str,
    run_id: str,
) -> tuple[int, str, str]:
    """(exit code, message, run.json status) of the finished playbook."""
    attempts = _attempt_outcomes(run_dir)
    if interrupts.disk_full is not None:
        message = (
            f"{interrupts.disk_full}: results could not be written; "
            f"{_interrupted_message(pdd, ident, run_id).removeprefix('interrupted: ')}"
        )
        return 2, message, "incomplete"
    if interrupts.signal is not None:
        return EXIT_INTERRUPTED, _interrupted_message(pdd, ident, run_id), "interrupted"
    code = decide_exit(r.status, r.rc, printer.state, attempts)
    message = events.failure_kind(printer.state) or ""
    if code == 2 and not message:
        message = (
            f"ansible-runner finished with status {r.status} (rc {r.rc}) and no record was written; "
            f"see {pdd / 'artifacts' / ident / 'stdout'}"
        )
    missing = any(h.total is None or len(h.done) < h.total for h in printer.state.hosts.values())
    # Anything short of every planned attempt recorded stays resumable: nothing done is lost.
    return code, message, "finished" if code in (0, 1) and not missing else "incomplete"


def _run_locked(
    opts: RunOptions,
    hosts: dict[str, str],
    locks: list[Any],
    run_id: str,
    resumed: bool,
    runner_fn: RunnerFn | None,
    out: Callable[[str], None],
) -> RunOutcome:
    run_dir = opts.results_root / run_id
    pdd = run_dir / RUNNER_DIR
    ident = "invocation-" + new_run_id()
    extravars = build_extravars(opts, run_id)
    meta = _run_meta(opts, hosts, run_id, resumed, ident, extravars)
    out(
        f"sglbench run: {'resuming' if resumed else 'starting'} run {run_id} on {', '.join(sorted(hosts))} "
        f"(tp={opts.tp}, configs={','.join(opts.configs) or 'all'}, "
        f"policy={opts.policy or 'playbook default'})"
    )
    out(f"sglbench run: results in {run_dir}, ansible-runner artifacts in {pdd / 'artifacts' / ident}")
    _write_or_fail(pdd / "run.json", meta)
    printer = ProgressPrinter(tuple(opts.configs), out)
    interrupts = _Interrupts(pdd / f"tree-{ident}.json", out)
    keeper_kw: dict[str, Any] = {}
    envvars = _env(opts.project_dir)
    if runner_fn is None:
        import ansible_runner

        runner_fn = ansible_runner.run
        keeper_kw, tree_env = _keeper_kwargs(opts, pdd, ident, run_id, locks, interrupts)
        envvars.update(tree_env)

    def handle(event: dict[str, Any]) -> bool:
        interrupts.forward()
        return printer(event)

    runner_kw = {
        "private_data_dir": str(pdd),
        "project_dir": str(opts.project_dir),
        "playbook": str(opts.project_dir / PLAYBOOK),
        "inventory": str(opts.inventory.resolve()) if opts.inventory else None,
        "extravars": extravars,
        "envvars": envvars,
        "ident": ident,
        "event_handler": handle,
        "quiet": True,
        **keeper_kw,
    }
    r = _invoke(runner_fn, runner_kw, interrupts, meta, pdd, ident, run_id)
    tree.redact_command_artifact(str(pdd / "artifacts" / ident / "command"))  # its env: no secret kept
    code, message, status = _conclusion(r, interrupts, printer, run_dir, pdd, ident, run_id)
    meta.update(status=status, ended_at=time.time(), runner_status=r.status, rc=r.rc, exit_code=code)
    # The hosts that dropped out while the others went on: summaries and reports mark them.
    meta["dropped"] = redact([d.to_dict() for d in events.dropped_hosts(printer.state)])
    _write_or_fail(pdd / "run.json", meta)
    return RunOutcome(run_id, run_dir, code, r.status, r.rc, printer.state, message)


def _interrupted_message(pdd: Path, ident: str, run_id: str) -> str:
    try:
        state = json.loads((pdd / f"tree-{ident}.json").read_text())
    except (OSError, ValueError):
        state = {}
    log = pdd / f"tree-{ident}.log"
    if state.get("cleanup_rc") == 0:
        stopped = "every SGLang unit on the GPU hosts was stopped and the GPUs checked free"
    elif "cleanup_rc" in state:
        stopped = (
            f"stopping the SGLang units FAILED (rc {state['cleanup_rc']}, see {log}); stop them with: "
            f"ansible-playbook {CLEANUP_PLAYBOOK}"
        )
    else:
        stopped = f"the playbook was ended (see {log})"
    return f"interrupted: {stopped}; run {run_id} stays resumable (sglbench run resumes it)"


def _attempt_outcomes(run_dir: Path) -> list[dict[str, Any]]:
    from sglbench.records import RecordError
    from sglbench.results import ResultsError, load

    try:
        res = load(run_dir)
    except (ResultsError, RecordError):
        return []
    out = []
    for a in res.attempts.to_dict("records"):
        pts = res.points[(res.points["host"] == a["host"]) & (res.points["instance"] == a["instance"])]
        valid = bool(pts["valid"].astype(bool).all()) if len(pts) else True
        out.append({**a, "valid": valid and not (a.get("points_missing") or 0)})
    return out


# -- CLI --------------------------------------------------------------------------------------------
def _parse_extra(values: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values:
        key, sep, raw = v.partition("=")
        if not sep or not key:
            raise RunError(f"-e {v!r}: use KEY=VALUE (VALUE may be JSON)")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    leaks = secret_paths(out)
    if leaks:
        raise RunError(
            f"-e {leaks[0]}: secrets may not be passed on the command line (every local user sees it in "
            "ps, and it would land in the lock file); put it in the inventory (ansible-vault) or export "
            "SGLBENCH_API_KEY / HF_TOKEN before sglbench run"
        )
    return out


def options_from_args(args: argparse.Namespace) -> RunOptions:
    tp = str(args.tp).strip().lower()
    if tp != "all" and not tp.isdigit():
        raise RunError(f"--tp {args.tp!r}: give a TP size (1, 4, 8) or all")
    if args.wait < 0:
        raise RunError("--wait must be >= 0 seconds")
    if args.run_id and ("/" in args.run_id or args.run_id.startswith((".", "_"))):
        raise RunError(f"--run-id {args.run_id!r}: a plain directory name is needed")
    project = args.project_dir or find_project_dir()
    if not (project / PLAYBOOK).is_file():
        raise RunError(f"--project-dir {project}: no {PLAYBOOK} there")
    return RunOptions(
        project_dir=project.resolve(),
        inventory=args.inventory,
        tp=tp,
        configs=[c.strip() for c in args.configs.split(",") if c.strip()],
        policy=args.policy,
        fresh=args.fresh,
        results_dir=args.results,
        run_id=args.run_id,
        wait_s=args.wait,
        lock_dir=args.lock_dir,
        extra_vars=_parse_extra(args.extra_var),
    )


def run_cli(args: argparse.Namespace, runner_fn: RunnerFn | None = None) -> int:
    try:
        opts = options_from_args(args)
        outcome = run_campaign(opts, runner_fn=runner_fn, out=lambda s: print(s, flush=True))
    except (RunError, LockBusy) as exc:
        print(f"sglbench run: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except OSError as exc:  # results or lock directory not writable, disk full, ...
        where = f" {exc.filename}" if exc.filename else ""
        print(f"sglbench run: error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for line in events.attempt_lines(outcome.progress):
        print("  " + line)
    if outcome.message:
        print(f"sglbench run: {outcome.message}", file=sys.stderr)
    _print_summary(outcome.run_dir)
    print(
        f"sglbench run: run {outcome.run_id} ended (ansible-runner {outcome.status}, rc {outcome.rc}); "
        f"exit {outcome.exit_code}"
    )
    return outcome.exit_code


def _print_summary(run_dir: Path) -> None:
    from sglbench.overhead import campaign_overhead, overhead_lines
    from sglbench.records import RecordError
    from sglbench.results import ResultsError, load
    from sglbench.summarize import summary_with_answer

    try:
        res = load(run_dir)
    except (ResultsError, RecordError) as exc:
        print(f"sglbench run: no summary: {exc}", file=sys.stderr)
        return
    print()
    print(summary_with_answer(res))  # the deploy table first, as `sglbench summarize` prints it
    # Only this session's attempts: a resumed run's earlier records were measured by their own session.
    began = (read_run_meta(run_dir) or {}).get("started_at")
    since = float(began) if isinstance(began, (int, float)) and not isinstance(began, bool) else None
    overheads = campaign_overhead(res.records, since)
    lines = overhead_lines(overheads, earlier=len(res.records) - len(overheads))
    if lines:
        print("\n".join(lines))
