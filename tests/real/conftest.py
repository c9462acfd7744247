"""The real-SGLang tier: runs with `make test` where the machine can, and alone with `make test-real`.

The tests need the environment that scripts/real-sglang-env.sh builds. `make test` and `make test-real`
pass the gate's verdict (scripts/real-sglang/tier.sh, which sets the env up or says in one line why it
cannot) as SGLBENCH_REAL_TIER:
  1      run the tier (the env is ready);
  0      the tier is off on this machine: its modules are not even collected, the gate's line said why;
  unset  a plain `pytest` (not through make): the tier's tests are skipped with one reason line, unless
         asked for with `-m real`.
Modules: test_real_server.py (one real server on the host), test_realsim_bench.py (bench.yml against
the real-SGLang sim host: one real server start per config). Tests run in file order, serialised.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

TIER = os.environ.get("SGLBENCH_REAL_TIER", "")

if TIER == "0":
    collect_ignore_glob = ["test_*.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if TIER == "1" or re.search(r"(?<!not )\breal\b", config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(
        reason="real-SGLang tier runs with `make test` / `make test-real` (or pytest -m real)"
    )
    here = str(Path(__file__).parent)
    for item in items:  # only this directory's: tests/contract decides for its own real side
        if item.get_closest_marker("real") is not None and str(item.fspath).startswith(here):
            item.add_marker(skip)
