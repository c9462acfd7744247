"""Columnar request rows (sglbench.columnar): requests.parquet written and read, only the columns a command
needs read, JSONL-only runs migrated on read and by ``sglbench migrate``, damaged files named in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import recordfactory as rf

from sglbench import bootstrap, cli, columnar, results, resume, summarize
from sglbench.hostlib.result_schema import RecordError, RequestRow

# Rows that exercise every rule of the derived columns (RequestRow's accessors are the reference).
EDGE_ROWS = [
    rf.request(1, 0, 0, 64, verify=16),
    rf.request(1, 0, 1, 8, error="HTTP 500"),  # no end_s, an error: not ok, no e2e
    {**rf.request(1, 0, 2, 10), "chunk_tokens": [0, 0, 4, 10]},  # first chunk with a token is the 3rd
    {**rf.request(1, 0, 3, 10), "chunk_t": [0.3], "chunk_tokens": [0, 5]},  # lists of unequal length
    {**rf.request(1, 0, 4, 10), "chunk_tokens": [3, 1, 2]},  # not monotonic: the 1st rises above 0
    {**rf.request(1, 0, 5, 10), "chunk_t": None},  # no chunk timing: no ttft
    {**rf.request(1, 0, 6, 0), "spec_verify_ct": 0},  # zero tokens / zero verify: no acceptance
    {**rf.request(1, 0, 7, 10), "chunk_tokens": [], "chunk_t": []},
    {**rf.request(1, 0, 8, 10), "sent_s": None},
]


def _reference(row: dict) -> dict:
    r = RequestRow.from_dict("x", "row", row)
    return {"ok": r.ok, "ttft_ms": r.ttft_ms(), "e2e_ms": r.e2e_ms(), "accept_length": r.accept_length()}


def _same(a: object, b: object) -> bool:
    if a is None or b is None or (isinstance(a, float) and np.isnan(a)):
        return (a is None or np.isnan(a)) and (b is None or (isinstance(b, float) and np.isnan(b)))
    return a == pytest.approx(b)


def test_parquet_is_written_with_derived_columns_that_match_the_row_contract(tmp_path: Path) -> None:
    path = columnar.write_rows(EDGE_ROWS, tmp_path / "requests.parquet")
    table = pq.read_table(path)
    assert table.schema.metadata[columnar.SCHEMA_KEY] == columnar.SCHEMA
    assert set(columnar.DERIVED) <= set(table.column_names)
    got = table.select(list(columnar.DERIVED)).to_pylist()
    for row, have in zip(EDGE_ROWS, got, strict=True):
        want = _reference(row)
        assert all(_same(have[k], want[k]) for k in want), (row["idx"], have, want)
    # Read back through the reader: the rows and their fields as written.
    back = columnar.ParquetRows.open(path).read(["idx", "completion_tokens", "chunk_tokens"]).to_pylist()
    assert [r["idx"] for r in back] == list(range(len(EDGE_ROWS)))
    assert back[2]["chunk_tokens"] == [0, 0, 4, 10]


def test_derived_columns_are_computed_on_read_for_files_without_them(tmp_path: Path) -> None:
    """A requests.parquet from before the derived columns (plain rows) reads the same."""
    path = tmp_path / "requests.parquet"
    pq.write_table(columnar.table_from_rows(EDGE_ROWS).drop(list(columnar.DERIVED)), path)
    got = columnar.ParquetRows.open(path).read(list(columnar.DERIVED)).to_pylist()
    for row, have in zip(EDGE_ROWS, got, strict=True):
        want = _reference(row)
        assert all(_same(have[k], want[k]) for k in want), (row["idx"], have, want)


def _run(tmp_path: Path, *, parquet: bool) -> Path:
    rows = [rf.request(1, r, i, 10 + 10 * (i % 3), verify=5) for r in (0, 1) for i in range(6)]
    pts = [rf.point(1, 0, 40.0, duration_s=1.0, n_ok=6), rf.point(1, 1, 44.0, duration_s=1.0, n_ok=6)]
    rf.write(tmp_path, rf.record(config="ar", benchmark=rf.bench(pts)), requests=rows)
    rf.write(
        tmp_path,
        rf.record(config="spec", algorithm="DFLASH", benchmark=rf.bench(pts)),
        requests=[{**r, "completion_tokens": r["completion_tokens"] * 2} for r in rows],
    )
    run = tmp_path / "run1"
    if parquet:
        assert cli.main(["migrate", str(run)]) == 0
    return run


def test_a_command_reads_only_the_columns_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path, parquet=True)
    asked: list[list[str]] = []
    real = pq.ParquetFile.read

    def spy(self: pq.ParquetFile, columns: list[str] | None = None, **kw: object) -> pa.Table:
        asked.append(list(columns) if columns is not None else ["<every column>"])
        return real(self, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    res = results.load(run)
    assert asked == []  # loading opens the files (footer, column types) and reads no rows
    summarize.summary_table(res)
    assert len(asked) == 2  # one read per attempt
    for cols in asked:
        assert set(cols) <= {"prompt_set", "point", "repeat", "warmup", "ok", "completion_tokens"}, cols
        assert "completion_tokens" in cols and "chunk_t" not in cols
    asked.clear()
    frame = res.request_columns(["config", "ttft_ms"])
    assert list(frame.columns) == ["config", "ttft_ms"] and len(frame) == 24
    assert all(set(cols) == {"ttft_ms", "warmup"} for cols in asked)  # stored: never the chunk lists


def test_jsonl_only_runs_load_and_migrate_to_the_same_results(tmp_path: Path) -> None:
    old = _run(tmp_path / "old", parquet=False)
    assert not list(old.rglob("requests.parquet"))
    before = results.load(old)
    assert isinstance(next(iter(before.sources.values())), columnar.TableRows)  # migrated on read
    table_before = summarize.summary_table(before, seed=3)
    assert cli.main(["migrate", str(old)]) == 0
    assert len(list(old.rglob("requests.parquet"))) == 2 and len(list(old.rglob("requests.jsonl"))) == 2
    after = results.load(old)
    assert all(isinstance(s, columnar.ParquetRows) for s in after.sources.values())
    assert summarize.summary_table(after, seed=3).equals(table_before)
    cols = ["config", "repeat", "completion_tokens", "ok", "ttft_ms", "e2e_ms", "accept_length"]
    assert after.requests[cols].equals(before.requests[cols])
    assert before.requests["ttft_ms"].notna().all()


def test_migrate_writes_nothing_twice_and_exports_jsonl(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = _run(tmp_path, parquet=True)
    capsys.readouterr()
    assert cli.main(["migrate", str(run)]) == 0
    assert "0 file(s) written" in capsys.readouterr().out
    for f in run.rglob("requests.jsonl"):
        f.unlink()
    assert cli.main(["migrate", str(run), "--jsonl"]) == 0
    exported = next(run.rglob("requests.jsonl"))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(rows) == 12 and "ttft_ms" not in rows[0] and rows[0]["chunk_tokens"] == [1, 5, 10]


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    assert cli.main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sglbench") and "error: " in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("command", ["summarize", "compare", "report"])
def test_a_corrupted_parquet_file_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: str
) -> None:
    run = _run(tmp_path, parquet=True)
    path = run / "gpu1" / "spec-tp1" / "requests.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # an interrupted copy: no footer
    argv = {
        "summarize": ["summarize", str(run)],
        "compare": ["compare", str(run), str(run)],
        "report": ["report", str(run), "-o", str(tmp_path / "out" / "r.html")],
    }[command]
    line = _one_line_error(argv, capsys)
    assert str(path) in line and "cannot be read as Parquet" in line


def test_a_parquet_column_of_the_wrong_type_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = _run(tmp_path, parquet=True)
    path = run / "gpu1" / "ar-tp1" / "requests.parquet"
    table = pq.read_table(path)
    i = table.column_names.index("completion_tokens")
    pq.write_table(table.set_column(i, "completion_tokens", pa.array(["many"] * table.num_rows)), path)
    with pytest.raises(RecordError) as err:
        results.load(run)
    assert err.value.path == str(path) and err.value.field == "column completion_tokens"
    assert "column completion_tokens" in _one_line_error(["summarize", str(run)], capsys)


def test_assemble_keeps_the_fetched_rows_as_jsonl_when_they_break_the_contract(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    resume.commit_point(
        str(tmp_path),
        exp[0],
        outcome="ok",
        summary={"point": "c1", "n_ok": 1, "n_err": 0, "output_throughput_tok_s": 1.0},
        records=[{"point": "c1", "repeat": "not a number"}],
    )
    resume.assemble_benchmark(str(tmp_path), exp, prompt_set="p", identity_hash="h")
    assert not (tmp_path / "requests.parquet").exists()
    assert json.loads((tmp_path / "requests.jsonl").read_text())["repeat"] == "not a number"


def test_the_normal_limit_of_a_large_repeat_matches_drawing_every_request() -> None:
    """bootstrap.token_sums: a repeat with many requests takes its total from the normal limit; its
    interval agrees with drawing every request to within the resampling's own Monte-Carlo error."""
    tokens = np.repeat([16.0, 64.0, 100.0, 128.0], [50, 150, 100, 700])
    assert bootstrap.normal_is_exact_enough(tokens)
    assert not bootstrap.normal_is_exact_enough(np.array([10.0, 30.0]))  # few requests: drawn one by one
    assert not bootstrap.normal_is_exact_enough(np.repeat([1.0, 1000.0], [990, 10]))  # too skewed
    fast = bootstrap.token_sums(tokens, 4000, bootstrap.rng_for(1, "x"))
    rng = bootstrap.rng_for(1, "x")
    direct = tokens[rng.integers(0, len(tokens), size=(4000, len(tokens)))].sum(axis=1)
    assert fast.mean() == pytest.approx(direct.mean(), rel=0.002)
    assert fast.std() == pytest.approx(direct.std(), rel=0.05)
    sd = direct.std()
    for q in (2.5, 97.5):
        assert abs(np.percentile(fast, q) - np.percentile(direct, q)) < 0.15 * sd, q


def test_a_clean_jsonl_file_reads_whole_and_the_same_as_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in EDGE_ROWS))
    cols = ["idx", "repeat", "completion_tokens", *columnar.DERIVED]
    whole = columnar.from_jsonl(path).read(cols)
    by_row = columnar.table_from_rows([json.loads(line) for line in path.read_text().splitlines()])
    assert whole.to_pylist() == columnar.select(by_row, cols).to_pylist()
    path.write_text(path.read_text() + '{"point": "c1", "repeat": "x"}\n')  # one bad row: named by line
    with pytest.raises(RecordError) as err:
        columnar.from_jsonl(path)
    assert err.value.field == f"line {len(EDGE_ROWS) + 1}.repeat"


def test_telemetry_tables_round_trip_the_raw_document(tmp_path: Path) -> None:
    raw = rf.raw_telemetry(gpus=(0, 3), throttle=lambda t, g: 2**63 + 4 if g == 3 else 0)
    raw["gpu"]["rows"][0][2] = None  # a field nvidia-smi printed as [N/A]
    raw["gpu"]["columns"].append("t_source")  # a column the contract may grow
    for row in raw["gpu"]["rows"]:
        row.append(1.0)
    raw["errors"] = ["timestamp unparsable: receipt time used"]
    src = tmp_path / "c1-r0.telemetry.json"
    src.write_text(json.dumps(raw))
    written = columnar.write_telemetry(src, tmp_path, "c1-r0")
    assert [p.name for p in written] == ["c1-r0.telemetry-gpu.parquet", "c1-r0.telemetry-server.parquet"]
    assert pq.read_table(written[0]).schema.field("throttle_mask").type == pa.uint64()
    src.unlink()
    back = columnar.read_telemetry(tmp_path, "c1-r0")
    assert back == raw


def test_telemetry_falls_back_to_the_raw_file_and_to_none(tmp_path: Path) -> None:
    assert columnar.read_telemetry(tmp_path, "c1-r0") is None
    (tmp_path / "c1-r0.telemetry.json").write_text('{"schema": 1, "window": {"start": 1, "end": 2}}')
    assert columnar.read_telemetry(tmp_path, "c1-r0") == {"schema": 1, "window": {"start": 1, "end": 2}}
    (tmp_path / "c1-r0.telemetry.json").write_text("{not json")
    with pytest.raises(RecordError, match=r"c1-r0\.telemetry\.json"):
        columnar.read_telemetry(tmp_path, "c1-r0")


def test_telemetry_with_untypable_values_raises_for_the_caller_to_keep_the_raw_file(tmp_path: Path) -> None:
    raw = rf.raw_telemetry()
    raw["gpu"]["rows"][0][2] = "312 W"
    src = tmp_path / "k.telemetry.json"
    src.write_text(json.dumps(raw))
    with pytest.raises((ValueError, TypeError)):
        columnar.write_telemetry(src, tmp_path, "k")
    assert not list(tmp_path.glob("*.parquet")) or all(p.stat().st_size for p in tmp_path.glob("*.parquet"))
