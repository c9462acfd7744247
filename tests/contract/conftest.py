"""Contract tests, real SGLang vs the stand-in (contract_lib.py says how they compare).

Every test takes a ``side`` ("real" or "stand-in") from a module-scoped, parametrised fixture, so the
same code checks both. The real side carries the ``real`` marker and runs with the real-SGLang tier
(``make test`` where the machine can run it, ``make test-real``, ``pytest -m real``); with ``-m real``
and no environment it skips with one line. A plain ``pytest`` leaves it out and checks the stand-in
against the recording of the real server.

At the end of the session the per-surface table is printed (in full with ``pytest -s``), saved to
build/contract/table.md, and written into docs/contract.md with ``SGLBENCH_CONTRACT_UPDATE=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from contract_lib import HAVE_ENV, LEDGER, NO_REAL_ENV, OBSERVED, REPO, SURFACES, VERSION, Row

DOC = REPO / "docs" / "contract.md"
BEGIN, END = "<!-- contract-table:begin -->", "<!-- contract-table:end -->"


TIER = os.environ.get("SGLBENCH_REAL_TIER", "")  # as tests/real/conftest.py: 1 run, 0 off, unset: ask


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real side runs where the real-SGLang tier runs: `make test` / `make test-real` on a machine
    that can (SGLBENCH_REAL_TIER=1), or `pytest -m real`; otherwise it is left out (deselected; the
    summary says so), and the stand-in side is held against the recording."""
    here = str(Path(__file__).parent)
    real = [i for i in items if i.get_closest_marker("real") is not None and str(i.fspath).startswith(here)]
    if not real:
        return
    if TIER == "1" or re.search(r"(?<!not )\breal\b", config.option.markexpr or ""):
        if HAVE_ENV:
            return
        config._sglbench_contract_no_env = len(real)  # type: ignore[attr-defined]
    else:
        config._sglbench_contract_real_left_out = len(real)  # type: ignore[attr-defined]
    config.hook.pytest_deselected(items=real)
    items[:] = [i for i in items if i not in real]


def table(rows: list[Row]) -> str:
    out = [
        f"| surface | real {VERSION} (CPU) | stand-in ({VERSION}) | verdict | differences, and why |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        notes = "<br>".join(n.replace("|", "\\|") for n in row.notes()) or ""
        out.append(
            f"| `{row.surface}`: {row.title} | {row.real} | {row.stand_in} | {row.verdict} | {notes} |"
        )
    return "\n".join(out) + "\n"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not LEDGER.rows:
        if getattr(config, "_sglbench_contract_no_env", 0):
            n = config._sglbench_contract_no_env  # type: ignore[attr-defined]
            terminalreporter.write_line(f"contract: real side skipped ({n} tests): {NO_REAL_ENV}")
        return
    order = list(SURFACES)
    rows = sorted(LEDGER.rows.values(), key=lambda r: order.index(r.surface) if r.surface in order else 99)
    text = table(rows)
    OBSERVED.mkdir(parents=True, exist_ok=True)
    (OBSERVED / "table.md").write_text(text)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    left_out = getattr(config, "_sglbench_contract_real_left_out", 0)
    no_env = getattr(config, "_sglbench_contract_no_env", 0)
    tr = terminalreporter
    tr.section(f"contract: real SGLang {VERSION} vs stand-in")
    if no_env:  # the one line saying why the real side did not run
        tr.write_line(f"contract: real side skipped ({no_env} tests): {NO_REAL_ENV}")
    if config.option.capture == "no" or os.environ.get("SGLBENCH_CONTRACT_UPDATE") == "1":
        tr.write(text)
    tr.write_line(f"{len(rows)} surfaces: {summary} (table: build/contract/{VERSION}/table.md)")
    if left_out:
        tr.write_line(
            f"real side not run here ({left_out} tests; it runs with the real-SGLang tier: `make test-real`, "
            "`pytest -m real`); the stand-in was held against the recording of the real server"
        )
    if os.environ.get("SGLBENCH_CONTRACT_UPDATE") == "1":
        doc = DOC.read_text()
        if BEGIN in doc and END in doc:
            new = re.sub(
                re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: f"{BEGIN}\n{text}{END}", doc, flags=re.S
            )
            DOC.write_text(new)
            tr.write_line(f"wrote the table into {DOC.relative_to(REPO)}")
