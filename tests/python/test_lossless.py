"""The losslessness gate on constructed records: exact matches pass, an injected divergence fails with
its position, and sampled runs, missing baselines or missing token ids are not applicable."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import recordfactory as rf

from sglbench import lossless, results, summarize
from sglbench.records import RecordError

BASE = [list(range(100 + i, 132 + i)) for i in range(6)]  # six prompts, 32 output ids each


def _rows(outputs: list[list[int] | None], **kw: Any) -> list[dict[str, Any]]:
    rows = []
    for i, ids in enumerate(outputs):
        row = rf.request(1, 0, i, len(ids or [1]), **kw)
        row["output_ids"] = ids
        rows.append(row)
    return rows


def _campaign(
    root: Path,
    spec_outputs: list[list[int] | None],
    *,
    base_outputs: list[list[int] | None] | None = None,
    temperature: float = 0.0,
    with_baseline: bool = True,
) -> results.Results:
    def bench() -> dict[str, Any]:
        b = rf.bench([rf.point(1, 0, 100.0)])
        b["meta"]["sampling"] = {"max_new_tokens": 32, "temperature": temperature}
        return b

    if with_baseline:
        rf.write(
            root, rf.record(config="ar", algorithm="none", benchmark=bench()), _rows(base_outputs or BASE)
        )
    rf.write(root, rf.record(config="eagle", algorithm="EAGLE3", benchmark=bench()), _rows(spec_outputs))
    return results.load(root / "run1")


def test_first_divergence_positions():
    assert lossless.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert lossless.first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert lossless.first_divergence([1, 2, 3], [1, 2]) == 2  # stopped early
    assert lossless.first_divergence([], [5]) == 0


def test_identical_outputs_pass(tmp_path):
    gate = lossless.gate(_campaign(tmp_path, [list(x) for x in BASE]))
    (row,) = gate.to_dict("records")
    assert row["config"] == "eagle" and row["baseline"] == "ar"
    assert row[lossless.COLUMN] == lossless.PASS
    assert (row["n_compared"], row["n_exact"], row["share_exact"]) == (6, 6, 1.0)
    assert math.isnan(row["first_divergence_min"])


def test_divergence_is_caught_with_its_position(tmp_path):
    spec = [list(x) for x in BASE]
    spec[2][7] += 1
    spec[4][20] += 1
    spec[4][25] += 1  # only the first divergence of a request counts
    gate = lossless.gate(_campaign(tmp_path, spec))
    (row,) = gate.to_dict("records")
    assert row[lossless.COLUMN] == lossless.FAIL
    assert row["n_exact"] == 4 and row["share_exact"] == pytest.approx(4 / 6)
    assert (row["first_divergence_min"], row["first_divergence_max"]) == (7.0, 20.0)
    assert row["text"].startswith("NO: 67% of 6 exact, first divergence at token 7")


def test_sampled_run_is_not_applicable(tmp_path):
    spec = [list(x) for x in BASE]
    spec[0][0] += 1
    (row,) = lossless.gate(_campaign(tmp_path, spec, temperature=0.7)).to_dict("records")
    assert row[lossless.COLUMN] == lossless.NA and "temperature 0.7" in row["reason"]


def test_off_switch_and_missing_inputs(tmp_path):
    (row,) = lossless.gate(_campaign(tmp_path / "a", BASE), enabled=False).to_dict("records")
    assert row[lossless.COLUMN] == lossless.NA and row["reason"] == "gate switched off"
    (row,) = lossless.gate(_campaign(tmp_path / "b", BASE, with_baseline=False)).to_dict("records")
    assert row[lossless.COLUMN] == lossless.NA and "no algorithm: none" in row["reason"]
    (row,) = lossless.gate(_campaign(tmp_path / "c", [None] * 6)).to_dict("records")
    assert row[lossless.COLUMN] == lossless.NA and "no output token ids" in row["reason"]


def test_summary_marks_the_speedup_of_a_config_that_diverges(tmp_path):
    spec = [list(x) for x in BASE]
    spec[1][3] += 1
    res = _campaign(tmp_path, spec)
    table = summarize.summary_table(res, n_boot=50)
    by_config = table.set_index("config")[lossless.COLUMN]
    assert by_config["eagle"] == lossless.FAIL and by_config["ar"] is None
    shown = {r["config"]: r for r in summarize.display_rows(table)}
    assert shown["eagle"][lossless.HEADER].startswith("NO: 83%")
    assert "not lossless" in shown["eagle"]["speedup [95% CI]"]
    assert shown["ar"][lossless.HEADER] == "baseline"


def test_parquet_keeps_token_ids_as_integers(tmp_path):
    from sglbench import columnar

    table = columnar.table_from_rows(_rows(BASE))
    assert str(table.schema.field("output_ids").type) == "list<item: int64>"
    bad = _rows(BASE)
    bad[0]["output_ids"] = [1.5, 2]
    with pytest.raises(RecordError, match=r"line 1.output_ids': expected a list of integers"):
        rf.write(tmp_path, rf.record(benchmark=rf.bench([rf.point(1, 0, 1.0)])), bad)
        results.load(tmp_path / "run1").request_columns(["config"])


def test_report_section_and_finding_name_the_diverging_config(tmp_path):
    from sglbench import report

    spec = [list(x) for x in BASE]
    spec[5][0] += 1
    res = _campaign(tmp_path, spec)
    table = summarize.summary_table(res, n_boot=50)
    text = "\n".join(report._lossless(lossless.gate(res)))
    assert f"<h2>{report.LOSSLESS}</h2>" in text and '<tr class="failed">' in text
    assert ">5/6</td>" in text and ">0 / 0 / 0</td>" in text
    assert any("eagle is not lossless" in line for line in report.findings(res, table))
    clean = _campaign(tmp_path / "clean", [list(x) for x in BASE])
    text = "\n".join(report._lossless(lossless.gate(clean)))
    assert 'class="failed"' not in text and ">6/6</td>" in text
    assert not any("not lossless" in line for line in report.findings(clean, summarize.summary_table(clean)))


def test_markdown_explains_the_column_only_when_it_is_shown(tmp_path):
    res = _campaign(tmp_path, [list(x) for x in BASE])
    assert lossless.NOTE in summarize.to_markdown(summarize.summary_table(res, n_boot=20), res)
    alone = _campaign(tmp_path / "alone", [list(x) for x in BASE], with_baseline=False)
    rf.write(
        tmp_path / "ar-only",
        rf.record(config="ar", algorithm="none", benchmark=rf.bench([rf.point(1, 0, 1.0)])),
    )
    plain = results.load(tmp_path / "ar-only" / "run1")
    assert lossless.NOTE not in summarize.to_markdown(summarize.summary_table(plain, n_boot=20), plain)
    assert lossless.NOTE in summarize.to_markdown(
        summarize.summary_table(alone, n_boot=20), alone
    )  # n/a shown
