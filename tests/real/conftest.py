"""The real-SGLang tier: runs with `make test` where the machine can, and alone with `make test-real`.

The tests need the environment that scripts/real-sglang-env.sh builds. `make test` and `make test-real`
pass the gate's verdict (scripts/real-sglang/tier.sh, which sets the env up or says in one line why it
cannot) as SGLBENCH_REAL_TIER:
  1      run the tier (the env is ready);
  0      the tier is off on this machine: its modules are not even collected, the gate's line said why;
  unset  a plain `pytest` (not through make): the tier's tests are skipped with one reason line, unless
         asked for with `-m real`.
Modules: test_real_server.py (one real server on the host, shared with the contract suite's API module),
test_realsim_bench.py (bench.yml against the real-SGLang sim host: one real server start per config).
Tests run in file order, serialised, except for the tests that stop the shared server (below).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

TIER = os.environ.get("SGLBENCH_REAL_TIER", "")

if TIER == "0":
    collect_ignore_glob = ["test_*.py"]


@pytest.hookimpl(trylast=True)  # after pytest has grouped the items by their parametrised fixtures
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stop_shared_server_last(items)
    if TIER == "1" or re.search(r"(?<!not )\breal\b", config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(
        reason="real-SGLang tier runs with `make test` / `make test-real` (or pytest -m real)"
    )
    here = str(Path(__file__).parent)
    for item in items:  # only this directory's: tests/contract decides for its own real side
        if item.get_closest_marker("real") is not None and str(item.fspath).startswith(here):
            item.add_marker(skip)


def stop_shared_server_last(items: list[pytest.Item]) -> None:
    """The real server on serve.sh's flags is shared by the modules that hold a test marked
    ``real_sglang.stops_shared_server`` (the contract suite's API module, test_real_server.py): such a
    test (its real-side item) moves to after the last other real-side item of those modules. The module
    of that last item keeps its own stopping test first, so its module fixture is set up only once."""
    stoppers = [
        i
        for i in items
        if getattr(getattr(i, "function", None), "stops_shared_real_server", False)
        and i.get_closest_marker("real") is not None
    ]
    if len(stoppers) < 2:  # one module alone already ends with its own stopping test
        return
    modules = {i.path for i in stoppers}
    users = [i for i in items if i.path in modules and i.get_closest_marker("real") is not None]
    last = max(items.index(i) for i in users if i not in stoppers)
    after = items[last]
    stoppers.sort(key=lambda i: i.path != after.path)  # the last user's module first
    rest = [i for i in items if i not in stoppers]
    at = rest.index(after) + 1
    items[:] = rest[:at] + stoppers + rest[at:]
