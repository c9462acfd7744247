"""``sglbench run``: run ``playbooks/bench.yml`` through ansible-runner's Python API.

What it does, in order:

1. Resolve the project (the checkout holding ``playbooks/bench.yml``), the inventory and its GPU hosts
   (``ansible-inventory --list``, group ``sglang_gpu``); a bad inventory exits 2.
2. Pick the run: a new ``<results>/<UTC timestamp>`` id, or (without ``--fresh``) the newest run that
   did not finish, so an interrupted campaign resumes in place (the playbook skips completed points).
3. Lock every GPU host of the inventory (:mod:`sglbench.lock`); a busy host exits 2 naming the holder
   unless ``--wait`` lets us queue.
4. ``ansible_runner.run(private_data_dir=<run>/_runner, ident=<invocation>, event_handler=...)``:
   artifacts (job events, stdout, rc) stay per run under ``<run>/_runner/artifacts/<ident>/``; every
   event updates per-host progress (:mod:`sglbench.events`) and a line is printed when a host changes
   phase or config.
5. Print the summary (:mod:`sglbench.summarize`) and exit 0 when every attempt is ok and every point
   valid, 1 when some configs failed or were skipped, 2 when the run could not proceed (unreachable
   host, failed preflight, bad inventory, busy host, no record written).

Extra variables passed to the playbook are listed in ``EXTRAVARS_DOC`` and docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sglbench import events
from sglbench.lock import LockBusy, default_lock_dir, lock_hosts

GPU_GROUP = "sglang_gpu"
PLAYBOOK = "playbooks/bench.yml"
RUNNER_DIR = "_runner"
POLICIES = ("skip", "autotune", "force")
EXTRAVARS_DOC = {
    "tp": "TP phase: 1, 4, 8 or all (sglang_preflight)",
    "run_id": "results directory name of this run (sglang_preflight)",
    "sglbench_run_id": "same, read by sglang_cycle",
    "sglbench_results_dir": "results root on the controller (sglang_cycle)",
    "policy": "capacity policy skip|autotune|force (sglang_cycle)",
    "sglang_cycle_configs": "config names to run, [] = all (sglang_cycle)",
    "sglbench_configs": "same, under the public name (see notes/runner-vars.md)",
    "sglbench_fresh": "true with --fresh: do not reuse completed points (see notes/runner-vars.md)",
}


class RunError(Exception):
    """The run cannot start (bad inventory, no project); exit 2 with this message."""


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


def resumable_run(results_root: Path) -> str | None:
    """The newest run started by ``sglbench run`` that did not finish (None if the newest finished)."""
    if not results_root.is_dir():
        return None
    runs = sorted(p for p in results_root.iterdir() if p.is_dir() and (p / RUNNER_DIR / "run.json").is_file())
    if not runs:
        return None
    meta = read_run_meta(runs[-1])
    if meta is None or meta.get("status") == "finished":
        return None
    return runs[-1].name


def choose_run_id(opts: RunOptions, now: float | None = None) -> tuple[str, bool]:
    """(run id, resumed?)"""
    if opts.run_id:
        return opts.run_id, (opts.results_root / opts.run_id).is_dir()
    if not opts.fresh:
        prev = resumable_run(opts.results_root)
        if prev:
            return prev, True
    base = new_run_id(now)
    run_id, n = base, 1
    while (opts.results_root / run_id).exists():  # two runs in one second never share a directory
        n += 1
        run_id = f"{base}-{n}"
    return run_id, False


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
    """Environment for ansible: our ansible.cfg and this Python's bin dir first on PATH."""
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": str(project_dir / "ansible.cfg"),
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
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=opts.project_dir,
        env={**os.environ, **_env(opts.project_dir)},
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RunError(f"bad inventory ({' '.join(cmd[1:])}): {proc.stderr.strip()[-800:]}")
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        raise RunError(f"ansible-inventory printed no JSON: {proc.stdout[:200]!r}") from None
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, path)


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
            key = (h.phase, h.instance, len(h.done), h.unreachable, h.setup_failed)
            if self._last.get(name) != key:
                self._last[name] = key
                self.out(events.host_line(h, now))
        return True  # keep the event in the run's artifacts


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
    run_id, resumed = choose_run_id(opts)
    run_dir = opts.results_root / run_id
    pdd = run_dir / RUNNER_DIR
    pdd.mkdir(parents=True, exist_ok=True)
    ident = "invocation-" + new_run_id()
    extravars = build_extravars(opts, run_id)
    meta: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "resumed": resumed,
        "ident": ident,
        "started_at": time.time(),
        "pid": os.getpid(),
        "command": " ".join(sys.argv),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
        "extravars": extravars,
        "hosts": hosts,
    }
    out(
        f"sglbench run: {'resuming' if resumed else 'starting'} run {run_id} on {', '.join(sorted(hosts))} "
        f"(tp={opts.tp}, configs={','.join(opts.configs) or 'all'}, "
        f"policy={opts.policy or 'playbook default'})"
    )
    out(f"sglbench run: results in {run_dir}, ansible-runner artifacts in {pdd / 'artifacts' / ident}")

    def on_wait(host: str, holder: Any) -> None:
        out(
            f"sglbench run: waiting up to {opts.wait_s:.0f} s for GPU host {host}: held by "
            f"{holder.describe() if holder else 'another process'}"
        )

    printer = ProgressPrinter(tuple(opts.configs), out)
    with lock_hosts(list(hosts.values()), opts.lock_dir, wait_s=opts.wait_s, on_wait=on_wait):
        _write_json(pdd / "run.json", meta)
        if runner_fn is None:
            import ansible_runner

            runner_fn = ansible_runner.run
        r = runner_fn(
            private_data_dir=str(pdd),
            project_dir=str(opts.project_dir),
            playbook=str(opts.project_dir / PLAYBOOK),
            inventory=str(opts.inventory.resolve()) if opts.inventory else None,
            extravars=extravars,
            envvars=_env(opts.project_dir),
            ident=ident,
            event_handler=printer,
            quiet=True,
        )
    attempts = _attempt_outcomes(run_dir)
    code = decide_exit(r.status, r.rc, printer.state, attempts)
    message = events.failure_kind(printer.state) or ""
    if code == 2 and not message:
        message = (
            f"ansible-runner finished with status {r.status} (rc {r.rc}) and no record was written; "
            f"see {pdd / 'artifacts' / ident / 'stdout'}"
        )
    meta.update(status="finished", ended_at=time.time(), runner_status=r.status, rc=r.rc, exit_code=code)
    _write_json(pdd / "run.json", meta)
    return RunOutcome(run_id, run_dir, code, r.status, r.rc, printer.state, message)


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
    return out


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "run",
        help="run the campaign (playbooks/bench.yml) with live progress, locks and a summary",
        description="Run playbooks/bench.yml through ansible-runner with live per-host progress, a lock per "
        "GPU host, artifacts kept under <results>/<run_id>/_runner/, and the summary at the end. Exit 0: "
        "every point completed; 1: some configs failed or were skipped; 2: the run could not proceed "
        "(unreachable host, failed preflight, bad inventory, host busy).",
    )
    p.add_argument("--inventory", "-i", type=Path, help="inventory (default: the one in ansible.cfg)")
    p.add_argument("--tp", default="all", help="TP phase: 1, 4, 8 or all (default all)")
    p.add_argument("--configs", default="", help="comma-separated config names (default: every config)")
    p.add_argument("--policy", choices=POLICIES, help="capacity policy for configs predicted not to start")
    p.add_argument("--fresh", action="store_true", help="start a new run even if the last one did not finish")
    p.add_argument("--results", type=Path, help="results root (default $SGLBENCH_RESULTS_DIR or ./results)")
    p.add_argument("--run-id", help="use (or resume) this run id instead of a new UTC timestamp")
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for busy GPU hosts (default 0: exit 2 naming the holder)",
    )
    p.add_argument("--lock-dir", type=Path, help=f"lock directory (default {default_lock_dir()})")
    p.add_argument("--project-dir", type=Path, help="sglbench checkout holding playbooks/ (default: found)")
    p.add_argument(
        "-e",
        "--extra-var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra playbook variable (repeatable; VALUE may be JSON)",
    )
    p.set_defaults(func=run_cli)


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
    from sglbench.records import RecordError
    from sglbench.results import ResultsError, load
    from sglbench.summarize import summary_table, to_markdown

    try:
        res = load(run_dir)
    except (ResultsError, RecordError) as exc:
        print(f"sglbench run: no summary: {exc}", file=sys.stderr)
        return
    print()
    print(to_markdown(summary_table(res), res))
