"""The real-SGLang tier: runs only when asked for (`make test-real`, i.e. `pytest -m real`).

The tests need the environment that scripts/real-sglang-env.sh builds (`make real-sglang`); without
it they skip with one line saying so. A plain `pytest` (as `make test` runs it) skips them even
where the environment exists, so the tier joins `make test` only when the Makefile says so.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "real" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="real-SGLang tier runs only with `make test-real` (pytest -m real)")
    for item in items:
        if item.get_closest_marker("real") is not None:
            item.add_marker(skip)
