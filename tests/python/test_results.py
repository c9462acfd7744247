"""sglbench.results.load and the record contract (sglbench.records) on constructed records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import recordfactory as rf

from sglbench import results
from sglbench.records import RecordError, load_record


def _campaign(root: Path) -> Path:
    rf.write(
        root,
        rf.record(
            config="ar",
            benchmark=rf.bench([rf.point(1, 0, 100.0), rf.point(1, 1, 110.0)]),
            plan_=rf.plan(kv=120_000, mrr=8),
        ),
    )
    rf.write(
        root,
        rf.record(
            config="dflash",
            algorithm="DFLASH",
            benchmark=rf.bench([rf.point(1, 0, 200.0, accept=3.5)]),
            plan_=rf.plan(kv=90_000, mrr=4),
            kv_observed=91_000,
            mrr_observed=4,
        ),
        requests=[rf.request(1, 0, i, 64, verify=16, category="math") for i in range(3)],
    )
    rf.write(
        root,
        rf.record(
            config="mrr8",
            algorithm="DFLASH",
            outcome="skipped",
            kv_observed=None,
            plan_=rf.plan(fits=False, mrr=0),
            failure={"phase": "plan", "cause": "planned_failure", "message": "0 request slots", "lines": []},
        ),
    )
    rf.write(root, rf.record(host="gpu2", config="ar", benchmark=rf.bench([rf.point(1, 0, 90.0)])))
    return root / "run1"


def test_load_builds_tidy_frames(tmp_path: Path) -> None:
    res = results.load(_campaign(tmp_path))
    assert len(res.runs) == 1
    assert res.runs.iloc[0]["attempts"] == 4 and res.runs.iloc[0]["skipped"] == 1
    a = res.attempts.set_index(["host", "instance"])
    assert set(res.attempts["outcome"]) == {"ok", "skipped"}
    assert a.loc[("gpu1", "dflash-tp1"), "kv_tokens_predicted"] == 90_000
    assert a.loc[("gpu1", "dflash-tp1"), "kv_tokens_observed"] == 91_000
    assert a.loc[("gpu1", "dflash-tp1"), "max_running_requests_observed"] == 4
    assert a.loc[("gpu1", "mrr8-tp1"), "cause"] == "planned_failure"
    assert a.loc[("gpu1", "mrr8-tp1"), "max_running_requests_predicted"] == 0
    assert a.loc[("gpu1", "ar-tp1"), "time_to_ready_s"] == 12.5
    assert res.simulated
    # one row per point and repeat, attempt keys carried along
    assert len(res.points) == 4
    row = res.points[(res.points.config == "dflash")].iloc[0]
    assert (row["prompt_set"], row["concurrency"], row["repeat"], row["accept_length_mean"]) == (
        "chat",
        1,
        0,
        3.5,
    )
    assert row.ttft_ms_p50 == 50.0 and row.itl_ms_p99 == 20.0
    # per-request rows only where kept; derived ttft/e2e/acceptance
    assert len(res.requests) == 3
    req = res.requests.iloc[0]
    assert req.category == "math" and req.accept_length == 4.0
    assert req.ttft_ms == pytest.approx(100.0) and req.e2e_ms == pytest.approx(1000.0)


def test_load_accepts_results_root_and_lists(tmp_path: Path) -> None:
    _campaign(tmp_path)
    rf.write(tmp_path, rf.record(run_id="run2", config="ar", benchmark=rf.bench([rf.point(1, 0, 1.0)])))
    assert set(results.load(tmp_path).runs["run_id"]) == {"run1", "run2"}
    both = results.load([tmp_path / "run1", tmp_path / "run2", tmp_path / "run1"])
    assert len(both.attempts) == 5


def test_moved_aside_attempts_and_runner_dirs_are_ignored(tmp_path: Path) -> None:
    run = _campaign(tmp_path)
    old = run / "gpu1" / ".superseded-ar-tp1"
    old.mkdir()
    (old / "record.json").write_text("{broken")
    (run / "_runner").mkdir()
    assert len(results.load(run).attempts) == 4


def test_missing_optional_parts_are_tolerated(tmp_path: Path) -> None:
    rec = rf.record()
    for key in ("plan", "observed", "benchmark", "timings", "journal", "unit", "argv", "failure"):
        rec.pop(key)
    rf.write(tmp_path, rec)
    res = results.load(tmp_path / "run1")
    a = res.attempts.iloc[0]
    assert a.kv_tokens_predicted is None and a.kv_tokens_observed is None and a.time_to_ready_s is None
    assert len(res.points) == 0 and len(res.requests) == 0


def test_summary_json_beside_the_record_is_used_when_the_field_is_null(tmp_path: Path) -> None:
    path = rf.write(tmp_path, rf.record(benchmark=None))
    (path.parent / "summary.json").write_text(json.dumps(rf.bench([rf.point(4, 0, 10.0)], prompts="code")))
    res = results.load(tmp_path / "run1")
    assert list(res.points["prompt_set"]) == ["code"] and list(res.points["concurrency"]) == [4]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda r: r.update(schema="sglbench.attempt/9"), "schema", "expected sglbench.attempt/1"),
        (lambda r: r.pop("host"), "host", "is missing"),
        (lambda r: r.update(outcome="maybe"), "outcome", "expected one of ok, skipped, failed"),
        (lambda r: r.update(tp="four"), "tp", "expected an integer"),
        (lambda r: r["config"].pop("name"), "config.name", "is missing"),
        (lambda r: r.update(benchmark={"points": [{"n_ok": "x"}]}), "benchmark.points[0].n_ok", "integer"),
        (
            lambda r: r.update(benchmark={"points": [{"n_ok": 1, "ttft_ms": 5}]}),
            "benchmark.points[0].ttft_ms",
            "expected a JSON object",
        ),
    ],
)
def test_bad_records_name_file_and_field(tmp_path: Path, mutate, field: str, words: str) -> None:
    rec = rf.record(benchmark=rf.bench([rf.point(1, 0, 1.0)]))
    mutate(rec)
    d = tmp_path / "run1" / "gpu1" / "ar-tp1"
    d.mkdir(parents=True)
    path = d / "record.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(RecordError) as err:
        load_record(path)
    assert err.value.field == field
    assert str(path) in str(err.value) and words in str(err.value)


def test_truncated_json_says_what_to_do(tmp_path: Path) -> None:
    d = tmp_path / "run1" / "gpu1" / "ar-tp1"
    d.mkdir(parents=True)
    (d / "record.json").write_text('{"schema": "sglbench.attempt/1", ')
    with pytest.raises(RecordError, match=r"not valid JSON.*re-run"):
        results.load(tmp_path / "run1")


def test_empty_or_missing_dirs_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(results.ResultsError, match="no such directory"):
        results.load(tmp_path / "nope")
    with pytest.raises(results.ResultsError, match=r"no record\.json"):
        results.load(tmp_path)


def test_contract_with_the_load_generator_output(tmp_path: Path) -> None:
    """A real `sglbench bench` run (against the built-in null server on loopback) embedded as the
    record's benchmark loads with every field the summaries use."""
    from sglbench import cli, summarize
    from sglbench.hostlib.nullserver import NullServerConfig, NullServerThread

    out = tmp_path / "bench"
    with NullServerThread(NullServerConfig(spec=True, chunk_tokens=2, default_max_new_tokens=8)) as srv:
        argv = [
            "bench",
            "--url",
            srv.url,
            "--concurrency",
            "1,2",
            "--num-prompts",
            "6",
            "--max-new-tokens",
            "8",
            "--repeats",
            "2",
            "--warmup",
            "0",
            "--no-flush-cache",
            "--out",
            str(out),
        ]
        rc = cli.main(argv)
    summary = json.loads((out / "summary.json").read_text())
    assert rc == (0 if all(p["valid"] for p in summary["points"]) else 1)  # 1: a point flagged invalid
    path = rf.write(tmp_path / "res", rf.record(config="spec", algorithm="DFLASH", benchmark=summary))
    (path.parent / "requests.jsonl").write_bytes((out / "requests.jsonl").read_bytes())
    res = results.load(tmp_path / "res" / "run1")
    pts = res.points
    assert (
        len(pts) == 4 and sorted(set(pts["concurrency"])) == [1, 2] and sorted(set(pts["repeat"])) == [0, 1]
    )
    assert pts["output_throughput_tok_s"].notna().all() and (pts["n_ok"] == 6).all()
    assert pts["ttft_ms_p50"].notna().all() and pts["itl_ms_p99"].notna().all()
    assert pts["accept_length_mean"].notna().all()
    assert len(res.requests) == 24 and res.requests["ok"].all()
    assert res.requests["category"].notna().all() and res.requests["accept_length"].notna().all()
    t = summarize.summary_table(res)
    assert len(t) == 2 and t["tok_s_ci_low"].notna().all()


def test_time_scaled_stand_in_results_are_given_at_real_world_time(tmp_path: Path) -> None:
    """Against the stand-in at SGLBENCH_SIM_TIME_SCALE=0.01 everything ran 100x faster: rates are
    multiplied by the scale and latencies divided by it, and the scale is kept in a column."""
    scaled = rf.bench([rf.point(1, 0, 2000.0, duration_s=0.5, ttft=3.0, itl=0.4)])
    scaled["meta"]["server_info"] = {"sglbench_sim": {"simulated": True, "time_scale": 0.01}}
    rf.write(tmp_path, rf.record(config="scaled", benchmark=scaled))
    rf.write(tmp_path, rf.record(config="unscaled", benchmark=rf.bench([rf.point(1, 0, 2000.0, ttft=3.0)])))
    pts = results.load(tmp_path / "run1").points.set_index("config")
    s = pts.loc["scaled"]
    assert s.sim_time_scale == 0.01
    assert s.output_throughput_tok_s == pytest.approx(20.0)
    assert s.request_throughput == pytest.approx(10 / 0.5 * 0.01)
    assert s.duration_s == pytest.approx(50.0)
    assert s.ttft_ms_p50 == pytest.approx(300.0) and s.itl_ms_p99 == pytest.approx(80.0)
    u = pts.loc["unscaled"]
    assert pd.isna(u.sim_time_scale)
    assert u.output_throughput_tok_s == 2000.0 and u.ttft_ms_p50 == 3.0


# -- damaged files are RecordErrors naming the file, never tracebacks ---------------------------
@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\x00\xff\xfe\x80garbage", "is not UTF-8 JSON text"),
        (b"[" * 100_000 + b"]" * 100_000, "nests JSON too deeply"),
        (b'{"tp": ' + b"9" * 5000 + b"}", "is not a usable JSON record"),
    ],
    ids=["binary", "deep", "huge-literal"],
)
def test_a_binary_or_hostile_record_is_a_record_error(tmp_path: Path, data: bytes, words: str) -> None:
    run = _campaign(tmp_path)
    path = run / "gpu1" / "ar-tp1" / "record.json"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=words) as err:
        results.load(run)
    assert err.value.path == str(path)


def test_out_of_range_integers_are_named(tmp_path: Path) -> None:
    rec = rf.record(benchmark=rf.bench([rf.point(1, 0, 1.0)]))
    rec["tp"] = 10**400
    path = rf.write(tmp_path, rec)
    with pytest.raises(RecordError, match="out of range") as err:
        load_record(path)
    assert err.value.field == "tp"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (b"\x00\xff\x80", "<file>"),
        (b"[1, 2]\n", "line 1"),
        (b'{"point": "c1", "repeat": 0, "chunk_t": 5}\n', "line 1.chunk_t"),
        (b'{"point": "c1", "repeat": "x"}\n', "line 1.repeat"),
        (b'{"point": "c1", "completion_tokens": "many"}\n', "line 1.completion_tokens"),
        (b'{"point": "c1", "chunk_t": [0.1, null], "chunk_tokens": [1, 2]}\n', "line 1.chunk_t"),
    ],
)
def test_damaged_request_rows_name_the_line_and_field(tmp_path: Path, text: bytes, field: str) -> None:
    run = _campaign(tmp_path)
    path = run / "gpu1" / "dflash-tp1" / "requests.jsonl"
    path.write_bytes(text)
    with pytest.raises(RecordError) as err:
        results.load(run)
    assert err.value.path == str(path) and err.value.field == field


def test_a_damaged_parquet_file_is_a_record_error(tmp_path: Path) -> None:
    run = _campaign(tmp_path)
    path = run / "gpu1" / "dflash-tp1" / "requests.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(RecordError, match="cannot be read as Parquet"):
        results.load(run)


def test_two_copies_of_one_run_are_refused(tmp_path: Path) -> None:
    import shutil

    run = _campaign(tmp_path / "res")
    shutil.copytree(run, tmp_path / "res" / "run1.bak")
    with pytest.raises(
        results.ResultsError, match=r"run run1: attempt gpu1/\S+ is in both .*run1 and .*run1\.bak"
    ):
        results.load(tmp_path / "res")
    assert len(results.load(run).attempts) == 4  # one copy alone is fine


def test_a_host_that_dropped_out_leaves_a_cut_attempt_and_is_named(tmp_path: Path) -> None:
    res = results.load(rf.pair_campaign(tmp_path, drop=True))
    assert res.hosts == ["gpu-a", "gpu-b"]
    assert sorted(zip(res.attempts["host"], res.attempts["instance"], strict=True)) == [
        ("gpu-a", "ar-tp1"),
        ("gpu-a", "sd-tp1"),
        ("gpu-b", "ar-tp1"),
    ]
    assert res.cut.to_dict("records") == [
        {
            "run_id": "run1",
            "host": "gpu-b",
            "instance": "sd-tp1",
            "config": "sd",
            "tp": 1,
            "phase": "benchmark",
            "points_committed": 1,
            "reason": "host unreachable",
            "simulated": True,
            "cpu_engine": False,
        }
    ]
    assert not (res.points["host"].eq("gpu-b") & res.points["config"].eq("sd")).any()  # not in the figures
    (gone,) = res.dropped.to_dict("records")
    assert (gone["host"], gone["instance"], gone["recorded"], gone["message"]) == (
        "gpu-b",
        "sd-tp1",
        ["ar-tp1"],
        "ssh: connection reset",
    )


def test_an_attempt_dir_without_record_or_run_json_is_cut_without_a_known_cause(tmp_path: Path) -> None:
    run = _campaign(tmp_path)
    rf.cut_attempt(tmp_path, "run1", "gpu1", "big-model-x-tp8", points=2)
    (run / "gpu1" / "big-model-x-tp8" / "points" / "c1-r1.json").write_text("{damaged")
    res = results.load(run)
    assert res.dropped.empty
    (cut,) = res.cut.to_dict("records")
    assert (cut["config"], cut["tp"], cut["phase"], cut["points_committed"]) == ("big-model-x", 8, None, 1)
    assert cut["reason"].startswith("not recorded: the run was killed")


def test_a_damaged_run_json_adds_no_dropped_host(tmp_path: Path) -> None:
    run = rf.pair_campaign(tmp_path, drop=True)
    (run / "_runner" / "run.json").write_text(json.dumps({"dropped": [{"host": ""}, "x", None]}))
    res = results.load(run)
    assert res.dropped.empty and res.cut["reason"].tolist() == [
        "not recorded: the run was killed, or the attempt is still running"
    ]
    (run / "_runner" / "run.json").write_text("{not json")
    assert results.load(run).dropped.empty


def test_a_run_without_drops_has_empty_cut_and_dropped_frames(tmp_path: Path) -> None:
    res = results.load(_campaign(tmp_path))
    assert res.cut.empty and res.dropped.empty and res.hosts == ["gpu1", "gpu2"]
    assert (
        list(res.cut.columns) == results.CUT_COLUMNS and list(res.dropped.columns) == results.DROPPED_COLUMNS
    )


def test_points_frame_carries_the_telemetry_figures_and_flags(tmp_path: Path) -> None:
    p = rf.with_telemetry(rf.point(2, 0, 50.0), power_w=200.0, throttle=lambda t, g: 0x4)
    rf.write(tmp_path, rf.record(config="ar", benchmark=rf.bench([p, rf.point(2, 1, 50.0)])))
    pts = results.load(tmp_path / "run1").points.sort_values("repeat")
    first, second = pts.iloc[0], pts.iloc[1]
    assert first.j_per_token == pytest.approx(200.0 * 10 / 500)
    assert first.power_mean_w == pytest.approx(200.0) and first.throttled_share == pytest.approx(1.0)
    assert "throttled" in first.telemetry_flags.split(", ") and first.throttle_reasons == "sw_power_cap"
    assert pd.isna(second.j_per_token) and pd.isna(second.telemetry_flags)  # a point without telemetry


def test_time_scaled_stand_in_energy_is_given_at_real_world_time(tmp_path: Path) -> None:
    p = rf.with_telemetry(rf.point(2, 0, 50.0), power_w=200.0)
    rec = rf.record(config="ar", benchmark=rf.bench([p]))
    rec["benchmark"]["meta"]["server_info"] = {"sglbench_sim": {"time_scale": 0.1}}
    rf.write(tmp_path, rec)
    row = results.load(tmp_path / "run1").points.iloc[0]
    assert row.j_per_token == pytest.approx(200.0 * 10 / 500 / 0.1)
    assert row.power_mean_w == pytest.approx(200.0)  # a power is not a duration
