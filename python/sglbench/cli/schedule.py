"""`sglbench schedule`: the arguments; the timer is installed by `python/sglbench/schedule.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench import schedule
from sglbench.schedule import run_schedule


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "schedule",
        help="install a systemd timer on this controller that runs `sglbench run` on a calendar",
        description=(schedule.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--name", default="nightly", help="schedule name (units sglbench-NAME.service/.timer)")
    p.add_argument("--on-calendar", help="systemd OnCalendar expression, e.g. 'Mon..Fri 02:00'")
    p.add_argument("--keep", type=int, default=30, help="retention: keep the newest N runs (default 30)")
    p.add_argument("--keep-days", type=int, default=0, help="retention: also keep runs younger than D days")
    p.add_argument(
        "--wait", type=int, default=3600, help="seconds a run waits for busy GPU hosts (default 3600)"
    )
    p.add_argument("--results", type=Path, help="results root (default <project>/results)")
    p.add_argument("--user", help="user the run executes as (default root)")
    p.add_argument("--unit-dir", type=Path, help="unit directory (default /etc/systemd/system)")
    p.add_argument(
        "--env-file",
        type=Path,
        help="root-only file (mode 600) of environment for the run, e.g. SGLBENCH_API_KEY=...",
    )
    p.add_argument("--no-systemd", action="store_true", help="only write the unit files (no reload/enable)")
    p.add_argument("--remove", action="store_true", help="stop the timer and remove both units")
    p.add_argument("--check", action="store_true", help="show what would change (ansible check mode)")
    p.add_argument("--project-dir", type=Path, help="sglbench checkout (default: found)")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the arguments of `sglbench run`")
    p.set_defaults(func=run_schedule)
