"""hostlib/unit_files.py: which unit files to write or prune, diffs, atomic writes."""

from __future__ import annotations

from pathlib import Path

from sglbench.hostlib import unit_files as uf

MARK = "sglbench:sglang_units"


def test_plan() -> None:
    existing = {
        "sglang-a.service": f"# {MARK}\nA",
        "sglang-b.service": f"# {MARK}\nold",
        "sglang-gone.service": f"# {MARK}\nG",
        "sglang-theirs.service": "someone else's",
        "other.service": f"# {MARK}",
    }
    desired = {
        "sglang-a.service": f"# {MARK}\nA",
        "sglang-b.service": f"# {MARK}\nnew",
        "sglang-c.service": "C",
    }
    plan = uf.plan_files(existing, desired, "sglang-*.service", MARK)
    assert plan.unchanged == ["sglang-a.service"]
    assert sorted(plan.write) == ["sglang-b.service", "sglang-c.service"]
    assert plan.remove == ["sglang-gone.service"]
    assert plan.changed
    diffs = uf.diff_entries(plan, "/etc/systemd/system")
    assert {d["after_header"] for d in diffs} == {
        "/etc/systemd/system/sglang-b.service",
        "/etc/systemd/system/sglang-c.service",
        "/etc/systemd/system/sglang-gone.service (absent)",
    }
    new = next(d for d in diffs if d["after_header"].endswith("sglang-c.service"))
    assert new["before"] == "" and new["before_header"].endswith("(absent)")


def test_second_plan_is_empty() -> None:
    desired = {"sglang-a.service": "A"}
    assert not uf.plan_files(desired, desired, "sglang-*.service", MARK).changed


def test_read_and_write(tmp_path: Path) -> None:
    uf.write_atomic(str(tmp_path / "sglang-a.service"), "A", 0o644)
    (tmp_path / "unrelated.conf").write_text("x")
    got = uf.read_matching(str(tmp_path), ["sglang.target"], "sglang-*.service")
    assert got == {"sglang-a.service": "A"}
    assert oct((tmp_path / "sglang-a.service").stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert uf.read_matching(str(tmp_path / "missing"), [], "*") == {}


def test_one_atomic_writer_on_both_sides() -> None:
    """The host's unit writer and the controller's record writer are the same function (one copy)."""
    from sglbench import resume
    from sglbench.hostlib import atomic_file

    assert uf.write_atomic is atomic_file.write_atomic
    assert resume.write_atomic is atomic_file.write_atomic
