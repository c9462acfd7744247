"""``sglbench bench`` and ``sglbench calibrate`` end to end against the null server on loopback."""

from __future__ import annotations

import argparse
import json

import pytest

from sglbench import bench_cli, calibrate_cli, cli
from sglbench.hostlib import nullserver


def main(argv: list[str]) -> int:
    """Run ``sglbench bench|calibrate`` through their own parsers (isolated from other subcommands)."""
    parser = argparse.ArgumentParser(prog="sglbench")
    sub = parser.add_subparsers(dest="command", required=True)
    bench_cli.add_parser(sub)
    calibrate_cli.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_subcommands_are_registered():
    assert ("bench", "sglbench.bench_cli") in cli.SUBCOMMANDS
    assert ("calibrate", "sglbench.calibrate_cli") in cli.SUBCOMMANDS


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
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == bench_cli.SCHEMA and summary["simulated"] is True
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
    points = bench_cli.build_points(None, None, 6)
    assert [p.concurrency for p in points] == [1, 2, 4, 6]
    rate_points = bench_cli.build_points([8], [1.5, 3.0], None)
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
    assert rc == 0, capsys.readouterr().err
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
    from sglbench import bench_cli

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
    text = bench_cli.format_table(scaled)
    assert "stand-in time scale 0.1" in text and "rates x10" in text
    real = {"simulated": False, "meta": {"api": "native", "url": "u", "server_info": {}}, "points": [point]}
    assert "time scale" not in bench_cli.format_table(real)
