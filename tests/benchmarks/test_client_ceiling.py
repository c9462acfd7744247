"""The pure helpers of ``benchmarks/client_ceiling.py``: /proc parsing, the per-thread CPU window, the
bench_serving command line (Python and Rust client) and the check that its output shows every stream
parsed as sent. The benchmark itself is not run here (its figures depend on the machine)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "client_ceiling.py"


@pytest.fixture(scope="module")
def cc() -> Any:
    spec = importlib.util.spec_from_file_location("client_ceiling", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("client_ceiling", module)
    spec.loader.exec_module(module)
    return module


def _stat(comm: str, utime: int, stime: int) -> str:
    # pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
    return f"4242 ({comm}) R 1 4242 4242 0 -1 4194304 10 0 0 0 {utime} {stime} 0 0 20 0 3 0 100\n"


def test_stat_cpu_s_reads_utime_plus_stime_past_a_name_with_spaces_and_parens(cc: Any) -> None:
    assert cc.stat_cpu_s(_stat("tokio-runtime-w", 150, 50), clk_tck=100) == pytest.approx(2.0)
    assert cc.stat_cpu_s(_stat("a) b (c", 7, 3), clk_tck=10) == pytest.approx(1.0)


def test_proc_cpu_s_of_this_process_and_of_no_process(cc: Any) -> None:
    import os

    assert cc.proc_cpu_s(os.getpid()) > 0.0
    assert cc.proc_cpu_s(2**22 + 12345) == 0.0  # above pid_max: never a live process


def test_thread_cpu_s_lists_every_live_thread_of_this_process(cc: Any) -> None:
    import os
    import threading

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="cc-probe")
    worker.start()
    try:
        threads = cc.thread_cpu_s(os.getpid())
    finally:
        stop.set()
        worker.join()
    assert os.getpid() in threads  # the main thread's tid is the pid
    assert worker.native_id in threads
    assert threads[os.getpid()][0] == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert all(cpu >= 0.0 for _, cpu in threads.values())


def test_thread_window_counts_new_threads_from_zero_busiest_first(cc: Any) -> None:
    before = {1: ("python3", 5.0), 2: ("tokio-runtime-w", 1.0), 3: ("gone", 9.0)}
    after = {1: ("python3", 5.5), 2: ("tokio-runtime-w", 3.0), 4: ("tokio-runtime-w", 0.75)}
    window = cc.thread_window(before, after)
    assert [name for name, _ in window] == ["tokio-runtime-w", "tokio-runtime-w", "python3"]
    assert [round(cpu, 3) for _, cpu in window] == [2.0, 0.75, 0.5]


def _result(n: int = 3, tokens: int = 4, chunks: int = 4) -> dict[str, Any]:
    return {
        "completed": n,
        "total_output_tokens": n * tokens,
        "output_lens": [tokens] * n,
        "itls": [[0.001] * (chunks - 1) for _ in range(n)],
        "generated_texts": ["x" * tokens] * n,
        "errors": [""] * n,
    }


def test_parsed_as_sent_accepts_a_complete_result(cc: Any) -> None:
    assert cc.parsed_as_sent(_result(), 3, 4, 4)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("completed", 2),
        ("total_output_tokens", 11),
        ("output_lens", [4, 4, 3]),
        ("itls", [[0.001] * 3, [0.001] * 3, [0.001] * 2]),  # one chunk not seen
        ("generated_texts", ["xxxx", "xxxx", "xxx"]),
        ("generated_texts", ["xxxx", "xxxx", None]),
        ("errors", ["", "boom", ""]),
        ("output_lens", [4, 4]),  # a request missing from the details
        ("itls", None),  # run without --output-details
    ],
)
def test_parsed_as_sent_rejects_any_shortfall(cc: Any, key: str, value: Any) -> None:
    res = _result()
    res[key] = value
    assert not cc.parsed_as_sent(res, 3, 4, 4)


def _args(**over: Any) -> argparse.Namespace:
    base = {
        "bench_serving_module": "sglang.benchmark.serving",
        "input_len": 128,
        "max_new_tokens": 128,
        "rust_worker_threads": None,
        "bench_serving_arg": [],
    }
    return argparse.Namespace(**{**base, **over})


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_bench_serving_cmd_python_client(cc: Any) -> None:
    cmd = cc.bench_serving_cmd("/v/bin/python", _args(), False, ("http://h:1", "/tok", 64, 512, Path("/o")))
    assert cmd[:3] == ["/v/bin/python", "-m", "sglang.benchmark.serving"]
    assert "--rust-client" not in cmd
    assert _flag(cmd, "--max-concurrency") == "64"
    assert _flag(cmd, "--num-prompts") == "512"
    assert _flag(cmd, "--base-url") == "http://h:1"
    assert _flag(cmd, "--tokenizer") == "/tok"
    assert _flag(cmd, "--output-file") == "/o"
    assert _flag(cmd, "--dataset-name") == "random-ids"
    assert _flag(cmd, "--random-output-len") == "128"
    assert _flag(cmd, "--request-rate") == "inf"
    assert {"--tokenize-prompt", "--output-details"} <= set(cmd)


def test_bench_serving_cmd_rust_client_same_workload_plus_its_flags(cc: Any) -> None:
    level = ("http://h:1", "/tok", 8, 400, Path("/o"))
    py = cc.bench_serving_cmd("/p", _args(), False, level)
    rust = cc.bench_serving_cmd("/p", _args(), True, level)
    assert rust == [*py, "--rust-client"]
    extra = _args(rust_worker_threads=1, bench_serving_arg=["--disable-tqdm"])
    threads = cc.bench_serving_cmd("/p", extra, True, level)
    assert threads == [*py, "--rust-client", "--rust-worker-threads", "1", "--disable-tqdm"]
    assert cc.bench_serving_cmd("/p", extra, False, level) == [*py, "--disable-tqdm"]


def test_parse_baselines(cc: Any) -> None:
    assert cc.parse_baselines("none") == []
    assert cc.parse_baselines("bench_serving") == ["bench_serving"]
    assert cc.parse_baselines("bench_serving_rust, bench_serving") == ["bench_serving_rust", "bench_serving"]
    for bad in ("", "rust", "bench_serving,bench_serving", "aiohttp,nope"):
        with pytest.raises(argparse.ArgumentTypeError):
            cc.parse_baselines(bad)


def test_interpolate_between_the_samples_around_t_none_outside(cc: Any) -> None:
    samples = [(10.0, 1.0, 0.0, 5.0), (10.5, 2.0, 0.5, 5.0), (11.0, 2.2, 0.5, 6.0)]
    assert cc.interpolate(samples, 10.25) == pytest.approx((10.25, 1.5, 0.25, 5.0))
    assert cc.interpolate(samples, 11.0) == pytest.approx((11.0, 2.2, 0.5, 6.0))
    assert cc.interpolate(samples, 10.0) == pytest.approx(samples[0])
    assert cc.interpolate(samples, 9.99) is None
    assert cc.interpolate(samples, 11.01) is None
    assert cc.interpolate(samples[:1], 10.0) is None
