"""sglbench schedule: the role renders verified units (idempotently) and the CLI validates its input."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sglbench import cli, schedule

REPO = Path(__file__).resolve().parents[2]


def test_role_renders_units_idempotently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    units.mkdir()
    argv = [
        "schedule",
        "--name",
        "weekly",
        "--on-calendar",
        "Sat 03:00",
        "--keep",
        "7",
        "--keep-days",
        "14",
        "--unit-dir",
        str(units),
        "--no-systemd",
        "--results",
        str(tmp_path / "res"),
        "--",
        "--tp",
        "all",
        "--configs",
        "a b",
        "--policy",
        "skip",
    ]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert "changed=2" in first
    service = (units / "sglbench-weekly.service").read_text()
    timer = (units / "sglbench-weekly.timer").read_text()
    for text in (service, timer):
        assert text.startswith("#\n# Ansible managed\n#\n")
    assert (
        '"run" "--results" "' + str(tmp_path / "res") + '" "--wait" "3600" "--tp" "all" "--configs" "a b"'
        in service
    )
    assert (
        'ExecStopPost="' in service
        and '"prune" "--results"' in service
        and '"--keep" "7" "--keep-days" "14"' in service
    )
    assert "OnCalendar=Sat 03:00" in timer and "Unit=sglbench-weekly.service" in timer
    if shutil.which("systemd-analyze"):
        v = subprocess.run(
            [
                "systemd-analyze",
                "verify",
                "--man=no",
                str(units / "sglbench-weekly.timer"),
                str(units / "sglbench-weekly.service"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert v.returncode == 0, v.stderr
    # second run changes nothing
    assert cli.main(argv) == 0
    assert "changed=0" in capsys.readouterr().out
    # removal
    assert (
        cli.main(["schedule", "--name", "weekly", "--remove", "--unit-dir", str(units), "--no-systemd"]) == 0
    )
    assert list(units.iterdir()) == []


def test_cli_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schedule", "--unit-dir", str(tmp_path)]) == 2
    assert "--on-calendar is required" in capsys.readouterr().err
    assert cli.main(["schedule", "--on-calendar", "x", "--keep", "0"]) == 2
    if shutil.which("systemd-analyze"):
        assert cli.main(["schedule", "--on-calendar", "every full moon"]) == 2
        assert "systemd rejects it" in capsys.readouterr().err


def test_run_args_after_double_dash_reach_the_role(tmp_path: Path) -> None:
    args = cli.build_parser().parse_args(["schedule", "--on-calendar", "daily", "--", "--tp", "4"])
    seen = {}

    class R:
        status, rc = "successful", 0

    def fake(**kw):
        seen.update(kw)
        return R()

    assert schedule.run_schedule(args, runner_fn=fake) == 0
    ev = seen["extravars"]
    assert (
        ev["sglbench_schedule_run_args"] == ["--tp", "4"] and ev["sglbench_schedule_on_calendar"] == "daily"
    )
    assert ev["sglbench_schedule_project_dir"] == str(REPO)
    assert seen["inventory"] == "localhost,"
