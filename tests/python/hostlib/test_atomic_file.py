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
    link = Path(__file__).resolve().parents[3] / "plugins/module_utils/sglbench_hostlib"
    assert link.is_symlink() and (link / "atomic_file.py").resolve() == Path(atomic_file.__file__).resolve()


def test_writes_bytes_and_path_objects(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    atomic_file.write_atomic(target, b"\x00\xffraw", 0o600)
    assert target.read_bytes() == b"\x00\xffraw"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    atomic_file.write_atomic(target, "snow \u2603\n")
    assert target.read_bytes() == "snow \u2603\n".encode()


def test_write_temp_leaves_the_target_alone_until_renamed(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    tmp = atomic_file.write_temp(target, b"new", 0o640)
    assert os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith(".report.html.")
    assert tmp.endswith(".tmp") and Path(tmp).read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o640
    assert target.read_text() == "old"
    atomic_file.discard(tmp)
    atomic_file.discard(tmp)  # already gone: no error
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    with pytest.raises(FileNotFoundError):  # the directory is the caller's business
        atomic_file.write_temp(tmp_path / "missing" / "x", "x")


def test_write_temp_failure_removes_its_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        atomic_file.write_temp(tmp_path / "a.png", b"png")
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_renames_what_the_writer_wrote(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "requests.parquet"
    with atomic_file.atomic_path(target, 0o600) as tmp:
        assert Path(tmp).parent == target.parent and Path(tmp).read_bytes() == b""
        assert not target.exists()
        Path(tmp).write_bytes(b"PAR1")
    assert target.read_bytes() == b"PAR1"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["requests.parquet"]


def test_atomic_path_failure_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "requests.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="writer died"), atomic_file.atomic_path(target) as tmp:
        Path(tmp).write_bytes(b"half")
        raise RuntimeError("writer died")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["requests.parquet"]
