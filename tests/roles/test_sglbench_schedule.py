"""sglbench schedule: the role renders verified units (idempotently) and the CLI validates its input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# -- refusals are one line, before anything is installed; no secret in a unit
@pytest.mark.parametrize(
    ("extra", "run_args", "expected"),
    [
        (["--user", "nosuchuser-sglbench"], [], "--user 'nosuchuser-sglbench': no such user"),
        ([], ["--tp", "four"], "the run arguments after --: --tp 'four': give a TP size"),
        ([], ["--nosuch"], "the run arguments after --: unrecognized arguments: --nosuch"),
        ([], ["--policy", "maybe"], "the run arguments after --: argument --policy: invalid choice"),
        ([], ["--inventory", "inventory/nosuch"], "--inventory inventory/nosuch: no such file or directory"),
        ([], ["--results", "/x"], "-- --results: set the results root with sglbench schedule --results"),
        ([], ["-e", "sglbench_api_key=K3Y"], "secrets may not be put in the run arguments"),
        ([], ["-e", "x=hf_abcdefghijklmnopqrstuvwxyz"], "secrets may not be put in the run arguments"),
        (["--name", "bad name"], [], "--name 'bad name': use letters, digits"),
        (["--keep-days", "-1"], [], "--keep-days must be >= 0"),
    ],
)
def test_schedule_refusals_are_one_line_and_install_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], run_args: list[str], expected: str
) -> None:
    units = tmp_path / "units"
    units.mkdir()
    argv = [
        "schedule",
        "--on-calendar",
        "daily",
        "--unit-dir",
        str(units),
        "--no-systemd",
        *extra,
        "--",
        *run_args,
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err
    assert list(units.iterdir()) == []


def test_secrets_reach_a_scheduled_run_only_through_a_root_only_env_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    units = tmp_path / "units"
    units.mkdir()
    env_file = tmp_path / "nightly.env"
    env_file.write_text("SGLBENCH_API_KEY=sk-scheduled-secret-123456\n")
    env_file.chmod(0o644)
    base = ["schedule", "--on-calendar", "daily", "--unit-dir", str(units), "--no-systemd", "--env-file"]
    assert cli.main([*base, str(env_file)]) == 2
    assert "readable by others (mode 0644); chmod 600 it" in capsys.readouterr().err
    env_file.chmod(0o600)
    assert cli.main([*base, str(env_file), "--results", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    service = (units / "sglbench-nightly.service").read_text()
    assert f"EnvironmentFile={env_file}" in service and "sk-scheduled-secret" not in service


def test_the_role_refuses_secrets_and_unknown_users_too(tmp_path: Path) -> None:
    """The role used directly (ansible-playbook playbooks/schedule.yml) keeps the same rules."""

    def play(extra: dict) -> subprocess.CompletedProcess[str]:
        import json

        ev = {
            "sglbench_schedule_unit_dir": str(tmp_path),
            "sglbench_schedule_manage_systemd": False,
            "sglbench_schedule_project_dir": str(REPO),
            "sglbench_schedule_results_dir": str(tmp_path / "r"),
            "sglbench_schedule_executable": "/usr/bin/true",
            **extra,
        }
        return subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/schedule.yml",
             "-i", "localhost,", "-e", json.dumps(ev)],
            cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        )  # fmt: skip

    out = play({"sglbench_schedule_environment": {"HF_TOKEN": "x"}})
    assert out.returncode != 0 and "secrets at ['HF_TOKEN']" in out.stdout
    out = play({"sglbench_schedule_user": "nosuchuser-sglbench"})
    assert out.returncode != 0 and "nosuchuser-sglbench: no such user" in out.stdout
    assert list(tmp_path.glob("*.service")) == []
