"""sglbench_prompt_bench: main() end to end against the null server on loopback."""

from __future__ import annotations

import json
import sys

import pytest
import sglbench_prompt_bench

from sglbench.hostlib import nullserver, prompts


@pytest.fixture(scope="module")
def server():
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=3, spec=True)) as srv:
        yield srv


def test_runs_points_and_writes_records(run_module, server, tmp_path):
    records = tmp_path / "out" / "requests.jsonl"
    params = [p.to_param() for p in prompts.load_shipped_set("code")[:4]]
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": params,
            "concurrency": [1, 2],
            "num_prompts": 4,
            "max_new_tokens": 9,
            "repeats": 1,
            "warmup": 1,
            "records_path": str(records),
        },
    )
    assert not done.failed, done.result
    summary = done.result["summary"]
    assert summary["schema"] == "sglbench.bench/1" and summary["simulated"] is True
    assert [p["concurrency"] for p in summary["points"]] == [1, 2]
    assert all(p["n_ok"] == 4 and p["accept_length_mean"] == pytest.approx(3.0) for p in summary["points"])
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == done.result["n_records"] == 8
    assert {r["category"] for r in rows} == {"code"}
    assert done.result["changed"] is False


def test_synthetic_prompts_and_plain_strings(run_module, server):
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "synthetic_input_len": 16,
            "concurrency": [2],
            "num_prompts": 3,
            "max_new_tokens": 4,
            "repeats": 2,
            "warmup": 0,
        },
    )
    assert not done.failed, done.result
    assert [p["repeat"] for p in done.result["summary"]["points"]] == [0, 1]
    assert done.result["records_path"] is None
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world"],
            "api": "openai-chat",
            "concurrency": [1],
            "num_prompts": 2,
            "max_new_tokens": 4,
            "repeats": 1,
            "warmup": 0,
        },
    )
    assert not done.failed, done.result
    assert done.result["summary"]["points"][0]["n_ok"] == 2


def test_check_mode_skips(run_module, server):
    done = run_module(sglbench_prompt_bench, {"url": server.url, "prompts": ["x"]}, check_mode=True)
    assert not done.failed and done.result["skipped"] is True


def test_failures_name_the_url_and_the_problem(run_module):
    done = run_module(
        sglbench_prompt_bench, {"url": "http://127.0.0.1:9", "prompts": ["x"], "concurrency": [1]}
    )
    assert done.failed
    assert "http://127.0.0.1:9" in done.result["msg"] and "cannot connect" in done.result["msg"]
    done = run_module(
        sglbench_prompt_bench, {"url": "http://127.0.0.1:9", "prompts": [{"id": 1}], "concurrency": [1]}
    )
    assert done.failed and "no 'prompt'" in done.result["msg"]
    done = run_module(
        sglbench_prompt_bench,
        {"url": "http://127.0.0.1:9", "prompts": ["x"], "concurrency": [1, 2], "request_rate": [1.0]},
    )
    assert done.failed and "single in-flight cap" in done.result["msg"]


def test_one_repeat_per_call_returns_its_rows(run_module, server):
    """The cycle's per-point call: repeats=1 from first_repeat, rows in the result, no host file."""
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world"],
            "concurrency": [1],
            "num_prompts": 2,
            "max_new_tokens": 4,
            "repeats": 1,
            "first_repeat": 1,
            "seed": 5,
            "warmup": 0,
            "return_records": True,
        },
    )
    assert not done.failed, done.result
    point = done.result["summary"]["points"][0]
    assert (point["repeat"], point["seed"]) == (1, 6)
    rows = done.result["records"]
    assert len(rows) == done.result["n_records"] == 2 and {r["repeat"] for r in rows} == {1}
    assert done.result["records_path"] is None


def test_procs_shards_the_point_over_client_processes(run_module, server, capfd):
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world", "again"],
            "concurrency": [2],
            "num_prompts": 5,
            "max_new_tokens": 6,
            "repeats": 1,
            "warmup": 2,
            "procs": 2,
            "return_records": True,
        },
    )
    assert not done.failed, done.result
    point = done.result["summary"]["points"][0]
    assert point["n_ok"] == 5 and point["client"]["procs"] == 2
    assert [p["n_requests"] for p in point["client"]["per_process"]] == [3, 2]
    assert done.result["summary"]["meta"]["procs"] == 2
    assert sorted(r["idx"] for r in done.result["records"]) == list(range(5))
    # stdout is the module's JSON result on the host: the client processes never write to it.
    assert capfd.readouterr().out == ""

    done = run_module(
        sglbench_prompt_bench,
        {"url": server.url, "prompts": ["x"], "concurrency": [1, 4], "num_prompts": 2, "procs": 2},
    )
    assert done.failed
    assert "procs = 2 is more than the concurrency 1 of point c1" in done.result["msg"]


FAKE_SMI = """#!{python}
import sys, time
args = sys.argv[1:]
ms = int(args[args.index("-lms") + 1])
gpus = args[args.index("-i") + 1].split(",")
while True:
    now = time.time()
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + ".%03d" % (int(now * 1000) % 1000)
    for g in gpus:
        print(f"{{stamp}}, {{g}}, 250.0, 90, 30, 50000, 2400, 60, 0x0000000000000000", flush=True)
    time.sleep(ms / 1000)
"""


@pytest.mark.parametrize("procs", [1, 2])
def test_telemetry_per_point_covers_its_window(run_module, server, tmp_path, procs):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable))
    smi.chmod(0o755)
    done = run_module(
        sglbench_prompt_bench,
        {
            "url": server.url,
            "prompts": ["hello", "world", "again"],
            "concurrency": [2, 4],
            "num_prompts": 6,
            "max_new_tokens": 8,
            "repeats": 1,
            "warmup": 2,
            "procs": procs,
            "return_records": True,
            "telemetry": {
                "enabled": True,
                "gpus": [0, 3],
                "gpu_interval_ms": 20,
                "server_interval_ms": 50,
                "metrics": True,  # the null server has no /metrics: an error, not a failure
                "nvidia_smi": str(smi),
            },
        },
    )
    assert not done.failed, done.result
    points, docs = done.result["summary"]["points"], done.result["telemetry"]
    assert len(docs) == len(points) == 2
    for point, doc in zip(points, docs, strict=True):
        rows = [r for r in done.result["records"] if r["point"] == point["point"] and not r["warmup"]]
        window, sampling = doc["window"], doc["sampling"]
        assert window["start"] == pytest.approx(point["t0_unix"] + min(r["sent_s"] for r in rows))
        assert window["end"] == pytest.approx(point["t0_unix"] + max(r["end_s"] for r in rows))
        assert doc["clock"]["host_started"] <= sampling["started"] <= window["start"]
        assert window["end"] <= sampling["stopped"] <= doc["clock"]["host_ended"]
        times = {g: [r[0] for r in doc["gpu"]["rows"] if r[1] == g] for g in (0, 3)}
        assert all(ts and max(ts) >= window["end"] - 0.002 for ts in times.values())
        assert any("GET /metrics answered HTTP 404" in e for e in doc["errors"])


def test_telemetry_off_by_default_and_checked(run_module, server):
    args = {"url": server.url, "prompts": ["x"], "concurrency": [1], "num_prompts": 1, "repeats": 1}
    done = run_module(sglbench_prompt_bench, args)
    assert not done.failed and "telemetry" not in done.result
    done = run_module(sglbench_prompt_bench, {**args, "telemetry": {"enabled": True, "load_endpoint": "v1"}})
    assert done.failed and "load_endpoint" in done.result["msg"]
