"""hostlib/result_schema.py: the result contract's documents, metric list and typed reading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglbench.hostlib import metrics, result_schema, sglang_facts
from sglbench.hostlib.result_schema import METRICS, Benchmark, PointFile, RecordError, RequestRow

REPO = Path(__file__).resolve().parents[3]


# -- metrics ---------------------------------------------------------------------------------------------
def test_every_column_is_the_point_summary_field_and_statistic_joined() -> None:
    """One spelling: the summary's ``ttft_ms.p50`` is the column ``ttft_ms_p50`` in every frame and table."""
    cols = result_schema.point_metric_columns()
    assert len(cols) == len(set(cols)) == len(METRICS) * len(result_schema.STATS)
    for m in METRICS:
        assert m.key.endswith("_" + m.unit)
        for stat in result_schema.STATS:
            assert f"{m.key}_{stat}" in cols
    shown = result_schema.table_metric_columns()
    assert shown[:2] == ["ttft_ms_p50", "ttft_ms_p99"] and set(shown) <= set(cols)


def test_table_headers_come_from_label_statistics_and_unit() -> None:
    headers = {m.key: m.header for m in result_schema.table_metrics()}
    assert headers["ttft_ms"] == "TTFT p50/p99 ms" and headers["itl_ms"] == "ITL p50/p99 ms"


def test_every_metric_is_a_distribution_the_host_computes() -> None:
    """A metric named in the list but not computed by summarize_point would be an empty column."""
    rec = {"sent_s": 0.0, "end_s": 0.5, "chunk_t": [0.1, 0.2, 0.3], "chunk_tokens": [1, 2, 4], "error": None}
    summary = metrics.summarize_point([rec, dict(rec)])
    for m in METRICS:
        assert isinstance(summary[m.key], dict), m.key
        assert {s for s in result_schema.STATS} <= set(summary[m.key]), m.key
        assert summary[m.key]["p50"] is not None, m.key


# -- the benchmark summary -----------------------------------------------------------------------------------
def _point(label: str, conc: int, repeat: int, tok_s: float) -> dict[str, object]:
    dist = {"p50": 10.0 + repeat, "p90": 12.0, "p99": 20.0, "mean": 11.0}
    return {
        "point": label,
        "concurrency": conc,
        "request_rate": None,
        "repeat": repeat,
        "n_ok": 4,
        "n_err": 0,
        "output_throughput_tok_s": tok_s,
        "valid": True,
        "simulated": False,
        **{m.key: dist for m in METRICS},
    }


def test_the_summary_groups_repeats_in_first_seen_order() -> None:
    pts = [_point("c2", 2, 0, 100.0), _point("c1", 1, 0, 50.0), _point("c2", 2, 1, 110.0)]
    doc = result_schema.bench_summary(pts, {"simulated": False, "model": "m"})
    assert doc["schema"] == sglang_facts.BENCH_SCHEMA and doc["points"] == pts
    assert [a["point"] for a in doc["aggregates"]] == ["c2", "c1"]
    c2 = doc["aggregates"][0]
    assert c2["concurrency"] == 2 and c2["n_repeats"] == 2
    assert c2["output_throughput_tok_s"]["mean"] == pytest.approx(105.0)
    assert "prompt_set" not in doc and "resume" not in doc  # the host knows neither


def test_the_controller_adds_prompt_set_and_resume_and_simulated_comes_from_either_side() -> None:
    sim_point = {**_point("c1", 1, 0, 50.0), "simulated": True}
    doc = result_schema.bench_summary([sim_point], {}, prompt_set="chat", resume={"missing": ["c2-r0"]})
    assert (
        doc["simulated"] is True and doc["prompt_set"] == "chat" and doc["resume"] == {"missing": ["c2-r0"]}
    )
    assert list(doc)[:3] == ["schema", "simulated", "prompt_set"]
    assert result_schema.bench_summary([_point("c1", 1, 0, 50.0)], {"simulated": True})["simulated"] is True
    assert result_schema.bench_summary([_point("c1", 1, 0, 50.0)], {})["simulated"] is False


def test_a_written_summary_reads_back_with_every_metric() -> None:
    doc = result_schema.bench_summary(
        [_point("c4", 4, 1, 80.0)], {"prompts": "code"}, resume={"missing": ["x"]}
    )
    bench = Benchmark.from_dict("summary.json", json.loads(json.dumps(doc)), "", False)
    (p,) = bench.points
    assert (bench.prompt_set, bench.missing, p.point, p.repeat) == ("code", ["x"], "c4", 1)
    for m in METRICS:
        assert p.dist(m.key).p50 == 11.0 and p.dist(m.key).p99 == 20.0
    assert p.dist("no_such_ms").p50 is None


def test_an_older_summary_without_a_metric_reads_as_not_measured() -> None:
    old = {k: v for k, v in _point("c1", 1, 0, 50.0).items() if k != "tpot_ms"}
    (p,) = Benchmark.from_dict("s.json", {"points": [old]}, "benchmark", False).points
    assert p.dist("tpot_ms") == result_schema.Distribution() and p.dist("ttft_ms").p50 == 10.0


# -- the point file ------------------------------------------------------------------------------------------
def test_a_point_file_round_trips_and_is_reused_only_when_clean() -> None:
    pf = PointFile(
        key="c1-r0",
        hash="h1",
        point={"point": "c1", "concurrency": 1, "request_rate": None, "repeat": 0, "seed": 7},
        outcome="ok",
        committed_at=5.0,
        requests_file="points/c1-r0.requests.jsonl",
        summary={"n_err": 0},
    )
    doc = pf.to_dict()
    assert doc["schema"] == sglang_facts.POINT_SCHEMA
    assert PointFile.from_dict(json.loads(json.dumps(doc))) == pf
    assert pf.is_done("h1") and not pf.is_done("h2")
    assert not PointFile.from_dict({**doc, "summary": {"n_err": 1}}).is_done("h1")  # type: ignore[union-attr]
    assert not PointFile.from_dict({**doc, "summary": None}).is_done("h1")  # type: ignore[union-attr]
    assert not PointFile.from_dict({**doc, "outcome": "failed"}).is_done("h1")  # type: ignore[union-attr]
    assert PointFile.from_dict(["not", "a", "point"]) is None


# -- the per-request row -------------------------------------------------------------------------------------
def test_a_request_row_gives_its_latencies_and_acceptance() -> None:
    row = RequestRow.from_dict(
        "r.jsonl",
        "line 1",
        {"sent_s": 0.1, "end_s": 1.1, "chunk_t": [0.15, 0.2, 0.6], "chunk_tokens": [0, 1, 8],
         "completion_tokens": 8, "spec_verify_ct": 4, "error": None},
    )  # fmt: skip
    assert row.ok and not row.warmup
    assert row.ttft_ms() == pytest.approx(100.0) and row.e2e_ms() == pytest.approx(1000.0)
    assert row.accept_length() == 2.0
    empty = RequestRow.from_dict("r.jsonl", "line 2", {"error": "boom"})
    assert (
        not empty.ok and empty.ttft_ms() is None and empty.e2e_ms() is None and empty.accept_length() is None
    )


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"sent_s": "0.1"}, "line 3.sent_s"),
        ({"chunk_t": [0.1, "x"]}, "line 3.chunk_t"),
        ({"repeat": True}, "line 3.repeat"),
        ({"completion_tokens": 2**70}, "line 3.completion_tokens"),
    ],
)
def test_a_request_row_of_the_wrong_type_names_the_field(row: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as err:
        RequestRow.from_dict("r.jsonl", "line 3", row)
    assert err.value.field == field and "r.jsonl" in str(err.value)


# -- on the GPU host -----------------------------------------------------------------------------------------
def test_runs_as_ansible_module_utils_with_stdlib_only(tmp_path: Path) -> None:
    """On the GPU host only the shipped module_utils package exists: the contract imports its siblings
    from there."""
    mu = tmp_path / "ansible" / "module_utils"
    pkg = mu / "sglbench_hostlib"
    pkg.mkdir(parents=True)
    (tmp_path / "ansible" / "__init__.py").write_text("")
    (mu / "__init__.py").write_text("")
    shipped = REPO / "plugins" / "module_utils" / "sglbench_hostlib"
    assert shipped.is_symlink()
    for name in ("__init__", "result_schema", "metrics", "sglang_facts"):
        (pkg / f"{name}.py").write_text((shipped / f"{name}.py").read_text())
    code = (
        "from ansible.module_utils.sglbench_hostlib import result_schema as rs\n"
        "doc = rs.bench_summary([{'point': 'c1', 'n_ok': 1, 'valid': True}], {'simulated': True})\n"
        "print(doc['schema'], doc['simulated'], doc['aggregates'][0]['n_repeats'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [sglang_facts.BENCH_SCHEMA, "True", "1"]
