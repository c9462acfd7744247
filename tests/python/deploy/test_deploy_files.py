"""breakeven.json, frontier.json, limits.json: written by summarize, read back as written, stale or damaged
files recomputed, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import cli, results
from sglbench.deploy import answer, schema, store
from sglbench.hostlib import sglang_facts as facts
from sglbench.hostlib.result_schema import RecordError

FILES = ("breakeven.json", "frontier.json", "limits.json")


def _run(root: Path) -> Path:
    rf.curve(root, "ar", {1: 40.0, 2: 80.0, 4: 150.0, 8: 280.0})
    rf.curve(root, "dflash", {1: 90.0, 2: 160.0, 4: 220.0, 8: 250.0}, algorithm="DFLASH")
    return root / "run1"


def test_summarize_writes_three_documents_that_read_back_equal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    assert cli.main(["summarize", str(run)]) == 0
    capsys.readouterr()
    for name, schema_id in zip(
        FILES, (facts.BREAKEVEN_SCHEMA, facts.FRONTIER_SCHEMA, facts.LIMITS_SCHEMA), strict=True
    ):
        doc = json.loads((run / name).read_text())
        assert doc["schema"] == schema_id and doc["simulated"] is True and doc["run_id"] == "run1"
        assert doc["source"]["records"] == 2 and doc["source"]["n_boot"] == 2000
    stored = store.read("run1", run)
    (fresh,) = answer.compute(results.load(run))
    assert stored.breakeven == fresh.breakeven
    assert stored.frontier == fresh.frontier
    assert stored.limits == fresh.limits


def test_readers_use_current_files_and_recompute_stale_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    res = results.load(run)
    (built,) = answer.compute(res)
    marked = schema.BreakevenDoc(**{**built.breakeven.__dict__, "method": "read from the file"})
    store.write([answer.Answer(built.run_id, built.run_dir, marked, built.frontier, built.limits)])
    (got,) = store.answers(res, prog="report")
    assert got.breakeven.method == "read from the file" and capsys.readouterr().err == ""
    rec = json.loads((run / "gpu1" / "ar-tp1" / "record.json").read_text())
    rec["benchmark"]["points"][0]["output_throughput_tok_s"] = 41.0
    (run / "gpu1" / "ar-tp1" / "record.json").write_text(json.dumps(rec))
    res = results.load(run)
    (got,) = store.answers(res, prog="report")
    assert got.breakeven.method != "read from the file"
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "breakeven.json is stale (the records or bootstrap settings changed since)" in err[0]
    )
    # another seed is another answer too
    store.write(answer.compute(res))
    store.answers(res, prog="compare", seed=3)
    assert "is stale" in capsys.readouterr().err


def test_a_damaged_or_foreign_file_is_recomputed_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    res = results.load(run)
    store.write(answer.compute(res))
    doc = json.loads((run / "limits.json").read_text())
    doc["limits"][0]["tp"] = "one"
    (run / "limits.json").write_text(json.dumps(doc))
    with pytest.raises(
        RecordError, match=r"limits.json: field 'limits\[0\].tp': expected an integer, got str"
    ):
        schema.read_document(schema.LimitsDoc, run / "limits.json")
    (got,) = store.answers(res, prog="report")
    assert got.limits.limits[0].tp == 1
    assert "field 'limits[0].tp'" in capsys.readouterr().err
    (run / "frontier.json").write_text('{"schema": "sglbench.frontier/9"}')
    with pytest.raises(RecordError, match=r"expected sglbench\.frontier/1"):
        schema.read_document(schema.FrontierDoc, run / "frontier.json")
    (run / "breakeven.json").write_text("{not json")
    with pytest.raises(RecordError, match="is not JSON"):
        schema.read_document(schema.BreakevenDoc, run / "breakeven.json")


def test_a_read_only_run_directory_is_a_warning_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sglbench import outfiles

    run = _run(tmp_path)

    def refuse(files: object, flag: str = "-o") -> list[Path]:
        raise outfiles.OutputError(f"{flag}: cannot write {run / 'breakeven.json'} (Permission denied)")

    monkeypatch.setattr(outfiles, "write_files", refuse)
    assert cli.main(["summarize", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "## Deployment answer" in out and "Deployment answer files" not in out
    assert err.strip() == (
        "sglbench summarize: warning: deployment answer not stored: deploy files: cannot write "
        f"{run / 'breakeven.json'} (Permission denied)"
    )
    assert not any((run / n).exists() for n in FILES)


def test_no_nan_reaches_the_files(tmp_path: Path) -> None:
    # one repeat, no request rows: no interval anywhere, every bound null
    rf.curve(tmp_path, "ar", {1: 40.0, 4: 150.0}, repeats=1)
    rf.curve(tmp_path, "dflash", {1: 90.0, 4: 120.0}, algorithm="DFLASH", repeats=1)
    (a,) = answer.compute(results.load(tmp_path / "run1"))
    text = schema.to_json(a.breakeven).decode()
    assert "NaN" not in text
    p = a.breakeven.pairs[0]
    assert {lv.verdict for lv in p.levels} == {"no CI"} and p.crossover.estimate.ci_low is None
    assert a.breakeven.deploy[0].segments[0].config == "ar"  # no evidence of a gain without an interval
