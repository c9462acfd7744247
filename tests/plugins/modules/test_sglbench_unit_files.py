"""sglbench_unit_files: one-round-trip install of unit files, verification, pruning, check mode, diff."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import sglbench_unit_files
from ansible.module_utils.basic import AnsibleModule

MARK = "# sglbench:sglang_units\n"
UNIT = MARK + "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n"


def record_commands(monkeypatch: pytest.MonkeyPatch, rc: int = 0) -> list[list[str]]:
    calls: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        calls.append(list(argv))
        return rc, "", "bad unit" if rc else ""

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    return calls


def args(tmp_path: Path, files: dict[str, str], **over: Any) -> dict[str, Any]:
    return {"dir": str(tmp_path), "files": [{"name": n, "content": c} for n, c in files.items()], **over}


def test_install_then_idempotent(run_module, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    record_commands(monkeypatch)
    files = {"sglang.target": MARK, "sglang-a-tp1.service": UNIT}
    first = run_module(sglbench_unit_files, args(tmp_path, files, validate=False))
    assert first.result["changed"] and first.result["written"] == ["sglang-a-tp1.service", "sglang.target"]
    assert (tmp_path / "sglang-a-tp1.service").read_text() == UNIT
    second = run_module(sglbench_unit_files, args(tmp_path, files, validate=False))
    assert not second.result["changed"] and second.result["written"] == []


def test_prunes_only_our_removed_units_and_stops_them(run_module, monkeypatch, tmp_path: Path) -> None:
    calls = record_commands(monkeypatch)
    (tmp_path / "sglang-old-tp1.service").write_text(UNIT)
    (tmp_path / "sglang-theirs.service").write_text("[Unit]\n")
    done = run_module(sglbench_unit_files, args(tmp_path, {"sglang-a-tp1.service": UNIT}, validate=False))
    assert done.result["removed"] == ["sglang-old-tp1.service"]
    assert not (tmp_path / "sglang-old-tp1.service").exists()
    assert (tmp_path / "sglang-theirs.service").exists()
    assert ["systemctl", "stop", "sglang-old-tp1.service"] in calls


def test_check_mode_and_diff_change_nothing(run_module, monkeypatch, tmp_path: Path) -> None:
    record_commands(monkeypatch)
    (tmp_path / "sglang-a-tp1.service").write_text(UNIT)
    new = UNIT.replace("/bin/true", "/bin/false")
    done = run_module(sglbench_unit_files, args(tmp_path, {"sglang-a-tp1.service": new}, validate=False),
                      check_mode=True, diff=True)  # fmt: skip
    assert done.result["changed"]
    assert done.result["diff"][0]["before"] == UNIT and done.result["diff"][0]["after"] == new
    assert (tmp_path / "sglang-a-tp1.service").read_text() == UNIT


def test_a_unit_that_does_not_verify_installs_nothing(run_module, monkeypatch, tmp_path: Path) -> None:
    calls = record_commands(monkeypatch, rc=1)
    done = run_module(sglbench_unit_files, args(tmp_path, {"sglang-a-tp1.service": UNIT}))
    assert done.failed and "sglang-a-tp1.service does not verify" in done.result["msg"]
    assert not (tmp_path / "sglang-a-tp1.service").exists()
    assert calls[0][:2] == ["systemd-analyze", "verify"] and calls[0][2].endswith("/sglang-a-tp1.service")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_real_systemd_analyze_rejects_a_broken_unit(run_module, tmp_path: Path) -> None:
    broken = MARK + "[Service]\nExecStart=relative/path --x\n"
    done = run_module(sglbench_unit_files, args(tmp_path, {"sglang-a-tp1.service": broken}))
    assert done.failed and "does not verify" in done.result["msg"]
