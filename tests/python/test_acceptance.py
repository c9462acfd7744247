"""Per-position acceptance from the requests' acceptance histograms, on constructed records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import recordfactory as rf

from sglbench import acceptance, results


def test_position_rates_are_conditional_on_reaching_the_position():
    # 10 steps: 2 accepted nothing, 3 accepted one draft, 5 accepted two (of three drafts)
    rates = acceptance.position_rates(np.array([2, 3, 5, 0]))
    assert rates[0] == pytest.approx(8 / 10)  # 8 of 10 steps accepted the first draft
    assert rates[1] == pytest.approx(5 / 8)  # of the 8 that did, 5 accepted the second
    assert rates[2] == 0.0  # none accepted the third
    assert np.isnan(acceptance.position_rates(np.array([0, 0, 0]))).all()


def _rows(hists: list[tuple[str, int, list[int] | None]]) -> list[dict[str, Any]]:
    rows = []
    for i, (category, conc, hist) in enumerate(hists):
        row = rf.request(conc, 0, i, 16, category=category, verify=4)
        row["spec_accept_histogram"] = hist
        rows.append(row)
    return rows


def _res(root: Path, rows: list[dict[str, Any]]) -> results.Results:
    b = rf.bench([rf.point(1, 0, 100.0), rf.point(4, 0, 300.0)])
    rf.write(root, rf.record(config="ar", algorithm="none", benchmark=b), _rows([("chat", 1, None)]))
    rf.write(root, rf.record(config="eagle", algorithm="EAGLE3", benchmark=b), rows)
    return results.load(root / "run1")


def test_tables_per_point_and_per_category(tmp_path):
    res = _res(
        tmp_path,
        _rows([("chat", 1, [1, 1, 2]), ("chat", 4, [0, 2, 2]), ("code", 1, [0, 0, 4]), ("code", 4, None)]),
    )
    hist = acceptance.histograms(res)
    assert set(hist["config"]) == {"eagle"}  # the baseline recorded no histogram
    table = acceptance.position_table(hist).set_index(["point", "category"])
    chat = table.loc[("all", "chat")]
    assert chat["requests"] == 2 and chat["steps"] == 8
    assert chat["pos_1"] == pytest.approx(7 / 8) and chat["pos_2"] == pytest.approx(4 / 7)
    c1 = table.loc[("c1", "all")]
    assert c1["steps"] == 8 and c1["accepted_mean"] == pytest.approx((1 + 4 + 8) / 8)
    code = table.loc[("all", "code")]
    assert code["requests"] == 1 and code["pos_1"] == 1.0 and code["pos_2"] == 1.0
    shown = {(r["point"], r["category"]): r for r in acceptance.display_rows(acceptance.position_table(hist))}
    assert shown[("all", "chat")]["steps by accepted drafts 0/1/2/…"] == "0.12 0.38 0.50"
    assert shown[("all", "chat")]["p1"] == "0.88" and shown[("all", "code")]["p2"] == "1.00"


def test_no_histogram_no_rows_and_no_request_read(tmp_path):
    res = _res(tmp_path, _rows([("chat", 1, None)]))
    assert acceptance.histograms(res).empty
    assert acceptance.position_table(acceptance.histograms(res)).empty


def test_histograms_survive_parquet(tmp_path):
    from sglbench import columnar

    rows = _rows([("chat", 1, [1, 2, 3])])
    table = columnar.table_from_rows(rows)
    assert str(table.schema.field("spec_accept_histogram").type) == "list<item: int64>"


def test_summary_and_report_show_the_positions(tmp_path):
    from sglbench import report, summarize

    res = _res(tmp_path, _rows([("chat", 1, [1, 1, 2]), ("code", 4, [0, 0, 4])]))
    text = summarize.to_markdown(summarize.summary_table(res, n_boot=20), res)
    assert f"## {acceptance.HEADING}" in text
    assert "| eagle" in text and "0.75" in text  # chat: 3 of 4 steps accepted the first draft
    html = "\n".join(report._acceptance_positions(res))
    assert f"<h3>{acceptance.HEADING}</h3>" in html and ">code</td>" in html
    plain = _res(tmp_path / "plain", _rows([("chat", 1, None)]))
    assert acceptance.HEADING not in summarize.to_markdown(summarize.summary_table(plain, n_boot=20), plain)
    assert report._acceptance_positions(plain) == []
