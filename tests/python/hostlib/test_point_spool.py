"""sglbench.hostlib.point_spool: the host's copy of measured points until the controller commits them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglbench.hostlib import point_spool

H1, H2 = "a" * 64, "b" * 64


def test_a_spooled_point_reads_back_only_under_its_own_hash(tmp_path: Path) -> None:
    d = str(tmp_path / "spool" / "run-x")
    point = {"key": "c4-r1", "summary": {"n_ok": 3}, "records": [{"idx": 0}]}
    point_spool.write_spooled(d, "c4-r1", H1, point)
    assert point_spool.read_spooled(d, "c4-r1", H1) == point
    assert point_spool.read_spooled(d, "c4-r1", H2) is None  # the config changed: never returned
    assert point_spool.read_spooled(d, "c1-r0", H1) is None
    assert oct(os.stat(d).st_mode & 0o777) == "0o700"
    assert oct(os.stat(point_spool.spool_path(d, "c4-r1")).st_mode & 0o777) == "0o600"


def test_a_damaged_or_foreign_file_is_no_point(tmp_path: Path) -> None:
    d = str(tmp_path)
    Path(point_spool.spool_path(d, "c1-r0")).write_text('{"schema": "sglbench.spool/1", "key": "c1-r0"')
    assert point_spool.read_spooled(d, "c1-r0", H1) is None
    Path(point_spool.spool_path(d, "c2-r0")).write_text(f'{{"schema": "x", "key": "c2-r0", "hash": "{H1}"}}')
    assert point_spool.read_spooled(d, "c2-r0", H1) is None
    point_spool.write_spooled(d, "c3-r0", H1, {"key": "c3-r0"})
    os.replace(point_spool.spool_path(d, "c3-r0"), point_spool.spool_path(d, "c9-r0"))
    assert point_spool.read_spooled(d, "c9-r0", H1) is None  # a file under another key's name


def test_prune_keeps_only_the_wanted_points_of_this_identity(tmp_path: Path) -> None:
    d = str(tmp_path)
    for key in ("c1-r0", "c1-r1", "c2-r0"):
        point_spool.write_spooled(d, key, H1, {"key": key})
    point_spool.write_spooled(d, "c4-r0", H2, {"key": "c4-r0"})
    Path(d, "notes.txt").write_text("not ours")
    removed = point_spool.prune(d, {"c1-r1", "c2-r0", "c4-r0"}, H1)
    assert sorted(removed) == ["c1-r0", "c4-r0"]  # committed, and of another identity
    assert sorted(os.listdir(d)) == ["c1-r1.json", "c2-r0.json", "notes.txt"]
    assert point_spool.prune(str(tmp_path / "missing"), set(), H1) == []


def test_remove_dir_removes_an_attempts_spool(tmp_path: Path) -> None:
    d = str(tmp_path / "s")
    point_spool.write_spooled(d, "c1-r0", H1, {"key": "c1-r0"})
    assert point_spool.remove_dir(d) is True and not os.path.exists(d)
    assert point_spool.remove_dir(d) is False and point_spool.remove_dir("") is False


@pytest.mark.parametrize("key", ["", "../x", "a/b", ".hidden"])
def test_a_key_that_is_not_a_plain_name_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="plain name"):
        point_spool.write_spooled(str(tmp_path), key, H1, {})


@given(
    st.text(min_size=1, max_size=20).filter(
        lambda k: "/" not in k and not k.startswith(".") and "\x00" not in k
    )
)
def test_any_plain_key_round_trips(key: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            point_spool.write_spooled(d, key, H1, {"key": key, "v": 1})
        except OSError:  # a name the file system refuses (too long in bytes): nothing is kept, nothing breaks
            return
        assert point_spool.read_spooled(d, key, H1) == {"key": key, "v": 1}
