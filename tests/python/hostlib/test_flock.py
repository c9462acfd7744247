"""hostlib/flock.py: the one flock lock, as the bench lock and the controller's locks use it."""

from __future__ import annotations

import os
from pathlib import Path

from sglbench.hostlib import flock


def test_lock_is_held_while_a_descriptor_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    assert not flock.lock_held(path)  # missing file: free
    fd = flock.try_lock(path, 0o600)
    assert fd is not None and flock.lock_held(path)
    assert flock.try_lock(path, 0o600) is None  # a second holder is refused
    flock.write_holder(fd, "pid 1\n", sync=True)
    flock.write_holder(fd, "2\n")  # replaced, not appended
    assert path.read_text() == "2\n" and (path.stat().st_mode & 0o777) == 0o600
    os.close(fd)
    assert not flock.lock_held(path)  # the file stays, the lock goes with the descriptor
    fd2 = flock.try_lock(path, 0o600)
    assert fd2 is not None
    os.close(fd2)
