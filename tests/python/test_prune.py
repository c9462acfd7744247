"""sglbench prune: retention by count and age; only sglbench runs; never a running one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import cli, prune


def _run(root: Path, name: str, age_days: float, status: str = "finished", pid: int = 0) -> Path:
    d = root / name / "_runner"
    d.mkdir(parents=True)
    (d / "run.json").write_text(
        json.dumps({"status": status, "pid": pid, "started_at": time.time() - age_days * 86400})
    )
    return root / name


def test_keeps_the_newest_n_and_young_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i, age in enumerate([30, 20, 10, 2, 1]):
        _run(tmp_path, f"r{i}", age)
    (tmp_path / "notes").mkdir()  # not a run: never touched
    (tmp_path / "notes" / "x.txt").write_text("keep me")
    assert (
        cli.main(["prune", "--results", str(tmp_path), "--keep", "2", "--keep-days", "15", "--dry-run"]) == 0
    )
    assert "would remove" in capsys.readouterr().out and (tmp_path / "r0").exists()
    assert cli.main(["prune", "--results", str(tmp_path), "--keep", "2", "--keep-days", "15"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "r2", "r3", "r4"]
    assert cli.main(["prune", "--results", str(tmp_path), "--keep", "1"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "r4"]


def test_running_runs_and_record_only_runs(tmp_path: Path) -> None:
    _run(tmp_path, "old-running", 50, status="running", pid=os.getpid())
    _run(tmp_path, "old-killed", 40, status="running", pid=2**22 + 12345)  # no such pid: a dead run
    rf.write(tmp_path, rf.record(run_id="legacy"))  # ansible-playbook run without _runner/
    os.utime(tmp_path / "legacy", (time.time() - 30 * 86400,) * 2)
    _run(tmp_path, "new", 0)
    runs = prune.list_runs(tmp_path)
    assert [r.path.name for r in runs] == ["old-running", "old-killed", "legacy", "new"]
    doomed = prune.select_prunable(runs, keep=1, keep_days=0, now=time.time())
    assert [r.path.name for r in doomed] == ["old-killed", "legacy"]


def test_bad_arguments(tmp_path: Path) -> None:
    assert cli.main(["prune", "--results", str(tmp_path), "--keep", "0"]) == 2
    assert cli.main(["prune", "--results", str(tmp_path / "missing"), "--keep", "3"]) == 0


def test_results_that_is_a_file_is_an_error_not_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`prune --results <file>` said 'does not exist' and exited 0."""
    f = tmp_path / "results"
    f.write_text("not a directory")
    assert cli.main(["prune", "--results", str(f), "--keep", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sglbench prune: error: --results {f} is not a directory")
    assert cli.main(["prune", "--results", str(tmp_path / "none"), "--keep", "1"]) == 0  # nothing yet: fine
    assert cli.main(["prune", "--results", str(tmp_path), "--keep", "1", "--keep-days", "nan"]) == 2
