"""``sglbench bench`` and ``sglbench calibrate`` end to end against the null server on loopback."""

from __future__ import annotations

import argparse
import json

import pytest

from sglbench import bench as bench_lib
from sglbench import cli
from sglbench.cli import bench as bench_args
from sglbench.cli import calibrate as calibrate_args
from sglbench.hostlib import nullserver


def main(argv: list[str]) -> int:
    """Run ``sglbench bench|calibrate`` through their own parsers (isolated from other subcommands)."""
    parser = argparse.ArgumentParser(prog="sglbench")
    sub = parser.add_subparsers(dest="command", required=True)
    bench_args.add_parser(sub)
    calibrate_args.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


def rc_for(out) -> int:
    """The exit code `sglbench bench` owes for the summary it wrote: 1 when any point is invalid (the client
    self-check can flag a point on a busy test machine), else 0."""
    summary = json.loads((out / "summary.json").read_text())
    return 0 if all(p["valid"] for p in summary["points"]) else 1


def test_subcommands_are_registered():
    assert ("bench", "sglbench.cli.bench") in cli.SUBCOMMANDS
    assert ("calibrate", "sglbench.cli.calibrate") in cli.SUBCOMMANDS


REQUIRED_POINT_KEYS = {
    "concurrency",
    "output_throughput_tok_s",
    "request_throughput",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "accept_length_mean",
    "n_ok",
    "n_err",
    "valid",
    "invalid_reasons",
    "simulated",
}


@pytest.fixture(scope="module")
def server():
    with nullserver.NullServerThread(
        nullserver.NullServerConfig(chunk_tokens=2, spec=True, api_key="k3y")
    ) as srv:
        yield srv


def test_bench_writes_summary_and_records(server, tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text("k3y\n")
    out = tmp_path / "run"
    rc = main(
        [
            "bench",
            "--url",
            server.url,
            "--prompts",
            "math,chat",
            "--concurrency",
            "1,3",
            "--num-prompts",
            "5",
            "--max-new-tokens",
            "6",
            "--repeats",
            "2",
            "--warmup",
            "1",
            "--api-key-file",
            str(key),
            "--slo-ttft-ms",
            "10000",
            "--out",
            str(out),
        ]
    )
    assert rc == rc_for(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == bench_lib.SCHEMA and summary["simulated"] is True
    assert [(p["concurrency"], p["repeat"]) for p in summary["points"]] == [(1, 0), (1, 1), (3, 0), (3, 1)]
    for p in summary["points"]:
        assert set(p) >= REQUIRED_POINT_KEYS
        assert {"p50", "p90", "p99", "mean"} <= set(p["ttft_ms"])
        assert (p["n_ok"], p["n_err"]) == (5, 0)
        assert p["accept_length_mean"] == pytest.approx(2.0)
        assert p["goodput"]["slo"] == {"ttft_ms": 10000.0}
    assert [a["point"] for a in summary["aggregates"]] == ["c1", "c3"]
    assert summary["aggregates"][0]["n_repeats"] == 2
    assert "k3y" not in (out / "summary.json").read_text()
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 5
    assert {r["category"] for r in rows} <= {"math", "chat"}
    assert all(r["completion_tokens"] == 6 and r["chunk_tokens"] == [2, 4, 6] for r in rows)
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    df = pd.read_parquet(out / "requests.parquet")
    assert len(df) == 20 and set(df["point"]) == {"c1", "c3"}
    table = capsys.readouterr().out
    assert "SIMULATED" in table and "wrote" in table


def test_bench_multi_turn_prints_the_turns_and_keeps_session_rows(server, tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text("k3y\n")
    out = tmp_path / "run"
    argv = ["bench", "--url", server.url, "--prompts", "multi-turn:3x2:10:4", "--concurrency", "2"]
    argv += ["--num-prompts", "6", "--max-new-tokens", "4", "--repeats", "1", "--api-key-file", str(key)]
    rc = main([*argv, "--out", str(out)])
    assert rc == rc_for(out)
    summary = json.loads((out / "summary.json").read_text())
    (point,) = summary["points"]
    assert [(t["turn"], t["n_ok"]) for t in point["turns"]] == [(0, 3), (1, 3)]
    table = capsys.readouterr().out
    assert "cached%" in table and len([x for x in table.splitlines() if x.split()[:1] == ["c2"]]) == 3
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    df = pd.read_parquet(out / "requests.parquet")
    measured = df[~df["warmup"]]
    assert sorted(zip(measured["session"], measured["turn"], strict=True)) == [
        (f"mt-s{s}", t) for s in range(3) for t in range(2)
    ]


def test_bench_refuses_to_mix_results_into_an_existing_run(server, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    rc = main(["bench", "--url", server.url, "--concurrency", "1", "--out", str(out)])
    assert rc == 2
    assert "already holds results" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--concurrency", "1,x"], "comma-separated integers"),
        (["--concurrency", "0"], ">= 1"),
        (["--request-rate", "2", "--concurrency", "1,2"], "single value"),
        (["--request-rate", "-1"], "> 0"),
        (["--prompts", "no-such-set"], "neither a shipped set"),
        (["--api-key-file", "/nonexistent/key"], "cannot read"),
        (["--num-prompts", "0"], "--num-prompts"),
        (["--slo-ttft-ms", "0"], "--slo-ttft-ms"),
        (["--api", "openai-chat", "--prompts", "synthetic:8"], "chat/completions"),
    ],
)
def test_bench_usage_errors_exit_2_with_a_named_field(tmp_path, capsys, argv, msg):
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o"), *argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_bench_unreachable_server_exits_1(tmp_path, capsys):
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--out", str(tmp_path / "o")])
    assert rc == 1
    assert "cannot connect to http://127.0.0.1:9" in capsys.readouterr().err


def test_default_ladder_is_capped_by_the_server(server, tmp_path):
    # The null server reports effective_max_running_requests_per_dp = 4096; --max-concurrency wins.
    points = bench_lib.build_points(None, None, 6)
    assert [p.concurrency for p in points] == [1, 2, 4, 6]
    rate_points = bench_lib.build_points([8], [1.5, 3.0], None)
    assert [(p.request_rate, p.concurrency) for p in rate_points] == [(1.5, 8), (3.0, 8)]


def test_calibrate_reports_ceiling_against_null_server_process(tmp_path, capsys):
    out = tmp_path / "cal"
    rc = main(
        [
            "calibrate",
            "--concurrency",
            "1,4",
            "--num-prompts",
            "20",
            "--max-new-tokens",
            "8",
            "--warmup",
            "2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "client ceiling vs null server" in text and "chunks/s" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulated"] is True and summary["meta"]["command"] == "calibrate"
    assert [p["concurrency"] for p in summary["points"]] == [1, 4]
    assert all(p["n_ok"] == 20 and p["total_chunks"] == 20 * 8 for p in summary["points"])


def test_bench_procs_runs_the_point_over_client_processes(server, tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text("k3y\n")
    out = tmp_path / "run"
    argv = ["bench", "--url", server.url, "--api-key-file", str(key), "--concurrency", "2,4"]
    argv += ["--num-prompts", "7", "--max-new-tokens", "4", "--repeats", "1", "--procs", "2"]
    rc = main([*argv, "--out", str(out)])
    assert rc == rc_for(out), capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["procs"] == 2
    for p in summary["points"]:
        assert p["n_ok"] == 7 and p["client"]["procs"] == 2 and len(p["client"]["per_process"]) == 2
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert [r["idx"] for r in rows] == list(range(7)) * 2


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--procs", "0"], "--procs must be from 1 to 64"),
        (["--procs", "65"], "--procs must be from 1 to 64"),
        (["--procs", "3", "--concurrency", "2,4"], "lower --procs to 2 or give --concurrency levels >= 3"),
        (["--procs", "2"], "concurrency 1 of point c1"),  # the default ladder starts at 1
    ],
)
def test_bench_procs_usage_errors(tmp_path, capsys, argv, msg):
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o"), *argv])
    assert rc == 2
    assert msg in capsys.readouterr().err


def test_calibrate_procs_starts_at_one_stream_per_process(tmp_path, capsys):
    rc = main(["calibrate", "--procs", "2", "--num-prompts", "8", "--max-new-tokens", "4", "--warmup", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "2 client processes" in text
    rows = [line.split() for line in text.splitlines()[2:-1]]
    assert [int(r[0]) for r in rows] == [2, 64, 512]


def test_table_says_when_figures_are_at_stand_in_speed() -> None:
    """A time-scaled stand-in's figures are not real-world ones: the printed table says so and by how much."""
    from sglbench import bench as bench_lib

    point = {
        "point": "c1",
        "repeat": 0,
        "n_ok": 1,
        "n_err": 0,
        "output_throughput_tok_s": 100.0,
        "request_throughput": 1.0,
        "ttft_ms": {"p50": 1.0, "p99": 2.0},
        "tpot_ms": {"p50": 0.1},
        "itl_ms": {"p50": 0.1},
        "e2e_ms": {"p50": 10.0},
        "accept_length_mean": None,
        "valid": True,
        "invalid_reasons": [],
    }
    scaled = {
        "simulated": True,
        "meta": {"api": "native", "url": "u", "server_info": {"sglbench_sim": {"time_scale": 0.1}}},
        "points": [point],
    }
    text = bench_lib.format_table(scaled)
    assert "stand-in time scale 0.1" in text and "rates x10" in text
    real = {"simulated": False, "meta": {"api": "native", "url": "u", "server_info": {}}, "points": [point]}
    assert "time scale" not in bench_lib.format_table(real)


def test_table_heads_cpu_engine_figures_with_their_label() -> None:
    """A real SGLang on its CPU engine (/server_info device cpu) is neither simulated nor a GPU figure."""
    from sglbench import bench as bench_lib

    def summary(simulated: bool, device: str | None) -> dict:
        info = {} if device is None else {"device": device}
        return {
            "simulated": simulated,
            "meta": {"api": "native", "url": "u", "server_info": info},
            "points": [],
        }

    assert bench_lib.format_table(summary(False, "cpu")).startswith("CPU ENGINE")
    assert bench_lib.format_table(summary(True, "cpu")).startswith("SIMULATED")
    assert bench_lib.format_table(summary(False, "cuda")).startswith("native @ u")
    assert bench_lib.format_table(summary(False, None)).startswith("native @ u")


# -- failed requests, exit codes, hostile numbers --------------------------------------------------
def test_point_measured_while_the_server_dies_is_invalid_and_bench_exits_1(tmp_path, capsys):
    """The server stops answering mid-point (503 after 6 generation requests, as when its scheduler died):
    the point keeps what it measured but is invalid, says how many requests failed and why, and the command
    exits 1 with one line naming the point."""
    cfg = nullserver.NullServerConfig(fail_after_requests=6)
    out = tmp_path / "run"
    with nullserver.NullServerThread(cfg) as srv:
        argv = ["bench", "--url", srv.url, "--concurrency", "1", "--num-prompts", "10", "--repeats", "1"]
        rc = main([*argv, "--warmup", "0", "--max-new-tokens", "4", "--out", str(out)])
    assert rc == 1
    p = json.loads((out / "summary.json").read_text())["points"][0]
    assert (p["n_ok"], p["n_err"], p["valid"]) == (6, 4, False)
    assert p["error_rate"] == pytest.approx(0.4) and p["max_error_rate"] == 0.0
    reason = next(r for r in p["invalid_reasons"] if "requests failed" in r)
    assert reason.startswith("4 of 10 requests failed (max_error_rate 0") and "503" in reason
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("sglbench bench: 1 of 1 points invalid (first: c1 repeat 0: ")
    assert "4 of 10 requests failed" in err[-1]


def test_max_error_rate_tolerates_the_configured_fraction(tmp_path):
    cfg = nullserver.NullServerConfig(fail_after_requests=9)
    out = tmp_path / "run"
    with nullserver.NullServerThread(cfg) as srv:
        argv = ["bench", "--url", srv.url, "--concurrency", "1", "--num-prompts", "10", "--repeats", "1"]
        rc = main(
            [*argv, "--warmup", "0", "--max-new-tokens", "4", "--max-error-rate", "0.1", "--out", str(out)]
        )
    p = json.loads((out / "summary.json").read_text())["points"][0]
    assert (p["n_ok"], p["n_err"]) == (9, 1)
    assert not any("requests failed" in r for r in p["invalid_reasons"])  # 10% is allowed
    assert rc == rc_for(out)  # 0 unless the client self-check flagged the point on a busy machine


def test_bench_exits_1_when_no_request_succeeded(tmp_path, capsys):
    with nullserver.NullServerThread(nullserver.NullServerConfig(api_key="secret")) as srv:
        argv = ["bench", "--url", srv.url, "--concurrency", "2", "--num-prompts", "4", "--repeats", "1"]
        rc = main([*argv, "--warmup", "0", "--out", str(tmp_path / "o")])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("sglbench bench: no request succeeded (first: c2 repeat 0: ")
    assert "4 of 4 requests failed" in err and "HTTP 401" in err


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--duration", "nan"], "--duration (seconds) must be a number > 0"),
        (["--duration", "inf"], "--duration (seconds) must be a number > 0"),
        (["--request-timeout", "nan"], "--request-timeout (seconds) must be a number > 0"),
        (["--request-timeout", "0"], "--request-timeout (seconds) must be a number > 0"),
        (["--temperature", "nan"], "--temperature must be a number >= 0"),
        (["--slo-ttft-ms", "inf"], "--slo-ttft-ms must be a finite number of ms > 0"),
        (["--request-rate", "nan"], "--request-rate needs numbers > 0"),
        (["--max-error-rate", "nan"], "--max-error-rate (a fraction of requests) must be a number >= 0"),
        (["--max-error-rate", "1.5"], "--max-error-rate (a fraction of requests) must be a number >= 0"),
        (["--concurrency", "1000000"], "concurrency must be from 1 to 100000"),
        (["--warmup", "1000000000"], "--warmup must be from 0 to 100000"),
        (["--request-rate", "1e9", "--duration", "100", "--num-prompts", "1000000000"], "more than 10000000"),
        (["--prompts", "synthetic:100000000000"], "synthetic input length 100000000000 is more than"),
        (["--prompts", "synthetic:100000", "--num-prompts", "500"], "use fewer prompts (--num-prompts)"),
        (["--prompts", "shared-prefix:0x2"], "every number must be >= 1"),
        (
            ["--prompts", "sharegpt:/nonexistent/share.json"],
            "cannot read ShareGPT file /nonexistent/share.json",
        ),
    ],
)
def test_hostile_numbers_are_one_line_usage_errors_before_any_connection(tmp_path, capsys, argv, msg):
    """NaN, infinite and huge inputs used to hang (--duration nan), allocate gigabytes before connecting
    (synthetic:<huge>) or crash after measuring (NaN in summary.json): now exit 2, one line, nothing written.
    The URL is a closed port, so reaching the check at all proves it comes before any connection."""
    out = tmp_path / "o"
    base = ["bench", "--url", "http://127.0.0.1:9", "--num-prompts", "2", "--out", str(out)]
    rc = main([*base, *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and msg in err[0], err
    assert not (out / "summary.json").exists() and not (out / "requests.jsonl").exists()


def test_synthetic_prompts_are_built_only_after_the_server_answered(tmp_path, capsys, monkeypatch):
    """A large (allowed) synthetic set against a server that is not there fails at once on the connection,
    without building 16M token ids first."""
    from sglbench.hostlib import prompts

    built = []
    build = prompts.synthetic_prompts
    monkeypatch.setattr(prompts, "synthetic_prompts", lambda *a: built.append(a) or build(*a))
    argv = ["bench", "--url", "http://127.0.0.1:9", "--prompts", "synthetic:262144", "--out", str(tmp_path)]
    rc = main(argv)
    assert rc == 1 and built == []
    assert "127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["file", "proc"])
def test_unwritable_out_is_refused_before_measuring(tmp_path, capsys, kind):
    out = tmp_path / "f" if kind == "file" else __import__("pathlib").Path("/proc/sglbench-out")
    if kind == "file":
        out.write_text("x")
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"sglbench bench: error: --out {out}")


def test_write_results_is_all_or_nothing_and_strict_json(tmp_path):
    """A non-finite figure never turns into invalid JSON or a half-written result: summary.json says null."""
    from sglbench.hostlib import loadgen

    pr = loadgen.PointResult(
        loadgen.LoadPoint(concurrency=1), 0, 0, 0.0, [], {"point": "c1", "x": float("nan")}
    )
    result = loadgen.CampaignResult({"url": "u", "api": "native", "simulated": True}, [pr])
    files = bench_lib.write_results(result, tmp_path / "o")
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())  # strict: no NaN token inside
    assert doc["points"][0]["x"] is None and files[0].name == "summary.json"


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--gap-ms", "inf"], "--gap-ms must be a number >= 0 and <= 60000"),
        (["--ttft-ms", "nan"], "--ttft-ms must be a number >= 0 and <= 60000"),
        (["--duration", "nan"], "--duration (seconds) must be a number > 0"),
        (["--server-procs", "100000"], "--server-procs must be from 1 to 256"),
        (["--max-new-tokens", "1000000000000"], "--max-new-tokens must be <= 100000"),
        (["--concurrency", "1000000"], "concurrency must be from 1 to 100000"),
    ],
)
def test_calibrate_hostile_numbers_fail_before_the_null_server_starts(capsys, argv, msg):
    rc = main(["calibrate", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and msg in err[0], err


def test_an_all_at_once_point_next_to_a_rate_point_keeps_every_file(server, tmp_path):
    """`--request-rate inf,2` crashed in the Parquet copy ("inf" next to 2.0 in one column) after
    measuring, and summary.json was never written."""
    key = tmp_path / "key"
    key.write_text("k3y\n")
    out = tmp_path / "run"
    argv = ["bench", "--url", server.url, "--api-key-file", str(key), "--request-rate", "inf,2"]
    rc = main([*argv, "--num-prompts", "2", "--repeats", "1", "--warmup", "0", "--out", str(out)])
    assert rc == rc_for(out)
    assert [p["request_rate"] for p in json.loads((out / "summary.json").read_text())["points"]] == [
        "inf",
        2.0,
    ]
    pd = pytest.importorskip("pandas")
    rates = pd.read_parquet(out / "requests.parquet")["request_rate"]
    assert sorted(set(rates)) == [2.0, float("inf")]
