"""``sglbench schedule``: install (or remove) a systemd timer on the controller that runs ``sglbench run``.

Thin: turn the options into ``sglbench_schedule_*`` variables and apply ``playbooks/schedule.yml``
(role ``roles/sglbench_schedule``) to localhost through ansible-runner. Everything after ``--`` is passed
to ``sglbench run`` by the timer's service. Example (docs/operations.md):

    sglbench schedule --name nightly --on-calendar '*-*-* 02:00' --keep 30 -- --tp all --policy skip
"""

from __future__ import annotations

import argparse
import contextlib
import grp
import io
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sglbench.runner import RunError, RunnerFn, _env, find_project_dir
from sglbench.secretcheck import redact_argv

PLAYBOOK = "playbooks/schedule.yml"
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def build_vars(args: argparse.Namespace, project: Path, executable: str) -> dict[str, Any]:
    results = (args.results or project / "results").resolve()
    ev: dict[str, Any] = {
        "sglbench_schedule_name": args.name,
        "sglbench_schedule_state": "absent" if args.remove else "present",
        "sglbench_schedule_executable": executable,
        "sglbench_schedule_project_dir": str(project),
        "sglbench_schedule_results_dir": str(results),
        "sglbench_schedule_keep": args.keep,
        "sglbench_schedule_keep_days": args.keep_days,
        "sglbench_schedule_wait_s": args.wait,
        "sglbench_schedule_run_args": list(args.run_args),
    }
    if args.on_calendar:
        ev["sglbench_schedule_on_calendar"] = args.on_calendar
    if args.user:
        ev["sglbench_schedule_user"] = args.user
    if args.unit_dir:
        ev["sglbench_schedule_unit_dir"] = str(args.unit_dir)
    if args.no_systemd:
        ev["sglbench_schedule_manage_systemd"] = False
    if getattr(args, "env_file", None):
        ev["sglbench_schedule_environment_file"] = str(Path(args.env_file).resolve())
    return ev


def check_run_args(run_args: list[str], project: Path) -> None:
    """The scheduled ``sglbench run`` arguments, checked now as ``sglbench run`` would check them at 02:00."""
    from sglbench import cli, runner

    if any(a == "--results" or a.startswith("--results=") for a in run_args):
        raise RunError(
            "-- --results: set the results root with sglbench schedule --results, not in the run arguments"
        )
    if redact_argv(list(run_args)) != list(run_args):
        raise RunError(
            "-- ...: secrets may not be put in the run arguments (they would be in a world-readable unit "
            "file and in ps); put SGLBENCH_API_KEY=... in a root-only file and pass --env-file FILE"
        )
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = cli.build_parser(only="run").parse_args(["run", *run_args])
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        msg = lines[-1].split("error: ", 1)[-1] if lines else "bad arguments"
        raise RunError(f"the run arguments after --: {msg}") from None
    ns.project_dir = project
    try:
        opts = runner.options_from_args(ns)
    except RunError as exc:
        raise RunError(f"the run arguments after --: {exc}") from None
    if opts.inventory is not None:
        inv = opts.inventory if opts.inventory.is_absolute() else project / opts.inventory
        if not inv.exists():
            raise RunError(
                f"the run arguments after --: --inventory {opts.inventory}: no such file or directory "
                f"in {project}"
            )


def check_inputs(args: argparse.Namespace, project: Path) -> None:
    """Everything the timer would need, checked before anything is installed; one line per refusal."""
    if not NAME_RE.match(args.name or ""):
        raise RunError(
            f"--name {args.name!r}: use letters, digits, - and _ only (units are sglbench-NAME.timer)"
        )
    if args.remove:
        return
    if not args.on_calendar:
        raise RunError("--on-calendar is required (e.g. '*-*-* 02:00'), or pass --remove")
    if args.keep < 1:
        raise RunError("--keep must be >= 1")
    if args.keep_days < 0:
        raise RunError("--keep-days must be >= 0")
    if args.wait < 0:
        raise RunError("--wait must be >= 0 seconds")
    if err := check_calendar(args.on_calendar):
        raise RunError(f"--on-calendar {args.on_calendar!r}: systemd rejects it: {err}")
    user = args.user or "root"
    try:
        gid = pwd.getpwnam(user).pw_gid
        grp.getgrgid(gid)
    except KeyError:
        raise RunError(
            f"--user {user!r}: no such user (or group) on this controller; the run would fail every time"
        ) from None
    if args.results is not None and Path(args.results).exists() and not Path(args.results).is_dir():
        raise RunError(f"--results {args.results}: not a directory")
    if getattr(args, "env_file", None):
        check_env_file(Path(args.env_file))
    check_run_args(list(args.run_args), project)


def check_env_file(path: Path) -> None:
    """The scheduled run's secrets (EnvironmentFile=): a regular file readable by its owner only."""
    try:
        st = path.stat()
    except OSError as exc:
        raise RunError(f"--env-file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RunError(f"--env-file {path}: not a regular file")
    if st.st_mode & 0o077:
        raise RunError(
            f"--env-file {path}: readable by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 it"
        )


def check_calendar(expr: str) -> str | None:
    """systemd's own verdict on an OnCalendar expression (None when fine or systemd-analyze is missing)."""
    if shutil.which("systemd-analyze") is None:
        return None
    p = subprocess.run(["systemd-analyze", "calendar", expr], capture_output=True, text=True, check=False)
    return None if p.returncode == 0 else (p.stderr.strip() or p.stdout.strip() or "invalid")


def run_schedule(args: argparse.Namespace, runner_fn: RunnerFn | None = None) -> int:
    if args.run_args and args.run_args[0] == "--":
        args.run_args = args.run_args[1:]
    try:
        project = (args.project_dir or find_project_dir()).resolve()
        if not (project / PLAYBOOK).is_file():
            raise RunError(f"--project-dir {project}: no {PLAYBOOK} there")
        check_inputs(args, project)
    except RunError as exc:
        print(f"sglbench schedule: error: {exc}", file=sys.stderr)
        return 2
    executable = shutil.which("sglbench") or str(Path(sys.executable).parent / "sglbench")
    extravars = build_vars(args, project, executable)
    if runner_fn is None:
        import ansible_runner

        runner_fn = ansible_runner.run
    failures: list[str] = []
    changed: list[str] = []

    def on_event(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        if event.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            failures.append(f"{data.get('task', '?')}: {str(res.get('msg') or '').strip()}")
        elif event.get("event") == "runner_on_ok" and res.get("changed"):
            changed.append(str(data.get("task", "")))
        return True

    with tempfile.TemporaryDirectory(prefix="sglbench-schedule-") as pdd:
        r = runner_fn(
            private_data_dir=pdd,
            project_dir=str(project),
            playbook=str(project / PLAYBOOK),
            inventory="localhost,",
            extravars=extravars,
            envvars=_env(project),
            cmdline="--check --diff" if args.check else None,
            quiet=not args.check,  # --check shows the diff; otherwise one line, below
            event_handler=on_event,
        )
    if r.status != "successful":
        why = (
            failures[0].splitlines()[0] if failures else f"the schedule playbook ended with status {r.status}"
        )
        print(f"sglbench schedule: error: {why} (rc {r.rc})", file=sys.stderr)
        return 2
    unit = f"sglbench-{args.name}"
    what = f"changed={len(changed)}"
    if args.remove:
        print(f"sglbench schedule: removed {unit}.timer and {unit}.service ({what})")
    else:
        results = extravars["sglbench_schedule_results_dir"]
        print(
            f"sglbench schedule: {unit}.timer runs `sglbench run {' '.join(args.run_args)}` on "
            f"{args.on_calendar!r}, keeping the newest {args.keep} runs in {results} ({what}). Check it "
            f"with: systemctl list-timers {unit}.timer; journalctl -u {unit}.service"
        )
    return 0
