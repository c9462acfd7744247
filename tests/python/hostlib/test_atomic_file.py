"""hostlib/atomic_file.py: whole file or old file, never a part; no temp files left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sglbench.hostlib import atomic_file


def test_writes_text_and_mode_and_creates_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "record.json"
    atomic_file.write_atomic(str(target), '{"x": 1}\n', 0o600)
    assert target.read_text() == '{"x": 1}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    atomic_file.write_atomic(str(target), "second\n")
    assert target.read_text() == "second\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_failure_keeps_old_file_and_removes_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "unit.service"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        atomic_file.write_atomic(str(target), "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["unit.service"]


def test_shipped_to_hosts_as_module_utils() -> None:
    link = Path(__file__).resolve().parents[3] / "plugins/module_utils/sglbench_atomic_file.py"
    assert link.is_symlink() and link.resolve() == Path(atomic_file.__file__).resolve()
