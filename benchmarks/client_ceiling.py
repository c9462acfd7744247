#!/usr/bin/env python3
"""Ceiling of the sglbench load generator against the null server, and of a bench_serving-style client.

Prints, per number of concurrent streams (default 1, 64, 512): requests/s and streamed chunks/s that
one client process (or ``--procs N`` processes) sustained against ``sglbench.hostlib.nullserver``
running in separate processes on loopback, the client's CPU use, and the null server's CPU use (so a
server-bound figure is visible as such).

Baseline (``--baseline aiohttp``, needs ``aiohttp`` importable): a minimal RE-IMPLEMENTATION, written
for this project, of the client-loop design of SGLang's ``bench_serving`` as described in our peer
survey (NOT its code, which is not installed here): one asyncio thread; every request wrapped in an
``asyncio.Semaphore(max_concurrency)`` and all request tasks created up front; a **new aiohttp
ClientSession per request** (10 MiB read buffer); the response iterated line by line
(``async for line in response.content``); each ``data:`` line stripped and ``json.loads``-ed; TTFT and
per-token ITL computed from ``meta_info.completion_tokens`` deltas as the stream arrives. Both clients
get the same request count, prompts, lengths and null-server settings.

Baseline ``--baseline bench_serving``: SGLang's OWN Python client from a side venv
(``benchmarks/bench_serving_venv.sh`` makes it: sglang 0.5.23 by default, or 0.5.10.post1, without its
GPU dependencies, a local tokenizer, a minimal import shim documented there): ``python -m
sglang.benchmark.serving`` where the installed sglang has it (0.5.23; ``sglang.bench_serving`` is only
a deprecated alias there), else ``python -m sglang.bench_serving`` (0.5.10.post1); found in the
baseline python by default (``--bench-serving-module``). It runs as a
subprocess per level, right after our client at the same level, against the same null server:
``--backend sglang --dataset-name random-ids --tokenize-prompt`` (token-id prompts, as ours), fixed
input/output lengths (``--random-range-ratio 1.0``), ignore_eos and streaming (its defaults),
``--request-rate inf``, ``--max-concurrency <streams>``, ``--num-prompts`` as ours, ``--output-file``
JSON with ``--output-details`` (used to check that every request got every chunk parsed). Its figures are its
own: ``duration`` is timed by bench_serving from the first request to the last response and so
excludes its import, tokenizer and dataset set-up and its warm-up request. Its CPU seconds are read
from ``/proc/<pid>/stat`` when it prints "Warmup completed" (then it sleeps 1 s idle and starts) and
when its progress bar first shows all requests done (its metric computation after the run, about
1 CPU-s per 4,096 requests, is left out and reported apart); the whole process's CPU
(``RUSAGE_CHILDREN``, start-up included) is reported beside it.

Baseline ``--baseline bench_serving_rust``: the same command and venv (sglang 0.5.23) with
``--rust-client``, SGLang's compiled client: ``sglang.benchmark.serving`` parses the arguments and hands
them to the extension ``sglang.srt.rust_extensions._bench`` bundled in the wheel, which runs the whole
benchmark (dataset, warm-up, timed run, metrics, the same result JSON) on a Tokio runtime with
``--rust-worker-threads`` workers (default: the available parallelism). Same validation of its output.
Its CPU is the process's from ``/proc/<pid>/stat``, which sums every thread (the Python main thread
blocked in the extension and each Tokio worker, the exited ones too), over the same window; the busiest
threads of the window are printed beside it (``/proc/<pid>/task/<tid>/stat``).

``--baseline`` takes one name or a comma-separated list (e.g. ``bench_serving_rust,bench_serving``): at
each level the clients run one after another, ours first, against the same null server.

Not a test: figures depend on the machine. Example::

    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline aiohttp
    SGLANG_VERSION=0.5.23 bash benchmarks/bench_serving_venv.sh /tmp/bs-venv-0523
    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline bench_serving \\
        --baseline-python /tmp/bs-venv-0523/bin/python
    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline bench_serving_rust \\
        --baseline-python /tmp/bs-venv-0523/bin/python
    PYTHONPATH=python python benchmarks/client_ceiling.py --levels 512 --procs 2 --server-procs 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from sglbench.calibrate import NullServerProcesses  # noqa: E402
from sglbench.hostlib import loadgen, prompts  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
BASELINE_NAMES = {
    "aiohttp": "bench_serving-style (re-impl, aiohttp)",
    "bench_serving": "bench_serving (sglang {version})",
    "bench_serving_rust": "bench_serving --rust-client (sglang {version})",
}
BS_BASELINES = ("bench_serving", "bench_serving_rust")
BS_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")  # newest layout first


def stat_cpu_s(stat: str, clk_tck: int = CLK_TCK) -> float:
    """utime + stime in seconds from the text of ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``.

    The process file sums every thread of the process, the ones that already exited included.
    """
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clk_tck


def proc_cpu_s(pid: int) -> float:
    """CPU seconds of a process, all its threads (Linux /proc); 0.0 when unavailable."""
    try:
        return stat_cpu_s(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return 0.0


# -- workers (run in their own process) -----------------------------------------------------------------
def worker_ours(
    url: str, api: str, concurrency: int, n: int, max_new: int, start_at: float, input_len: int = 128
) -> dict[str, Any]:
    spec = loadgen.BenchSpec(
        url=url,
        api=api,
        prompts=prompts.synthetic_prompts(64, input_len, 0),
        points=[loadgen.LoadPoint(concurrency=concurrency)],
        sampling=loadgen.SamplingSpec(max_new_tokens=max_new, ignore_eos=True),
        num_prompts=n,
        repeats=1,
        flush_cache=False,
        simulated=True,
    )

    async def go() -> loadgen.PointResult:
        runner = loadgen.LoadRunner(spec)
        try:
            await runner.preflight()
            await asyncio.sleep(max(0.0, start_at - time.time()))
            return await runner.run_point(spec.points[0], 0, None)
        finally:
            await runner.client.close()

    res = asyncio.run(go())
    s = res.summary
    return {
        "requests": s["n_ok"],
        "errors": s["n_err"],
        "chunks": s["total_chunks"],
        "tokens": s["total_output_tokens"],
        "wall_s": s["duration_s"],
        "start": res.t0_wall,
        "cpu_s": s["client"]["cpu_s"],
        "cpu_wait_s": (s["client"]["runqueue_wait_fraction"] or 0.0) * s["client"]["wall_s"],
        "valid": s["valid"],
        "invalid_reasons": s["invalid_reasons"],
    }


def worker_baseline(
    url: str, concurrency: int, n: int, max_new: int, start_at: float, input_len: int = 128
) -> dict[str, Any]:
    """bench_serving-STYLE client loop (re-implementation of the described design; see module doc)."""
    import aiohttp

    prompt_ids = [list(p.input_ids or ()) for p in prompts.synthetic_prompts(64, input_len, 0)]
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    stats = {"requests": 0, "errors": 0, "chunks": 0, "tokens": 0}

    async def request_func(payload: dict[str, Any]) -> None:
        # A new session (and so a new connection) per request, as in the described design.
        async with aiohttp.ClientSession(timeout=timeout, read_bufsize=10 * 1024**2) as session:
            st = time.perf_counter()
            most_recent = st
            ttft = 0.0
            itl: list[float] = []
            last_ct = 0
            try:
                async with session.post(f"{url}/generate", json=payload) as response:
                    if response.status != 200:
                        stats["errors"] += 1
                        return
                    async for chunk_bytes in response.content:
                        chunk_bytes = chunk_bytes.strip()
                        if not chunk_bytes:
                            continue
                        chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                        if chunk == "[DONE]":
                            continue
                        data = json.loads(chunk)
                        if data.get("text"):
                            now = time.perf_counter()
                            ct = data["meta_info"]["completion_tokens"]
                            if ttft == 0.0:
                                ttft = now - st
                            else:
                                k = ct - last_ct
                                if k > 0:
                                    itl.extend([(now - most_recent) / k] * k)
                            most_recent = now
                            last_ct = ct
                            stats["chunks"] += 1
                stats["requests"] += 1
                stats["tokens"] += last_ct
            except aiohttp.ClientError:
                stats["errors"] += 1

    async def limited(sem: asyncio.Semaphore, payload: dict[str, Any]) -> None:
        async with sem:
            await request_func(payload)

    async def go() -> tuple[float, float]:
        sem = asyncio.Semaphore(concurrency)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        t0 = time.perf_counter()
        start = time.time()
        tasks = [
            asyncio.create_task(
                limited(
                    sem,
                    {
                        "input_ids": prompt_ids[i % len(prompt_ids)],
                        "sampling_params": {
                            "temperature": 0.0,
                            "max_new_tokens": max_new,
                            "ignore_eos": True,
                        },
                        "stream": True,
                    },
                )
            )
            for i in range(n)
        ]
        await asyncio.gather(*tasks)
        return time.perf_counter() - t0, start

    cpu0 = time.process_time()
    wait0 = loadgen.runqueue_wait_s() or 0.0
    wall, start = asyncio.run(go())
    return {
        **stats,
        "wall_s": wall,
        "start": start,
        "cpu_s": time.process_time() - cpu0,
        "cpu_wait_s": (loadgen.runqueue_wait_s() or 0.0) - wait0,
        "valid": None,
        "invalid_reasons": [],
    }


def proc_runqueue_wait_s(pid: int) -> float:
    """Seconds all threads of a process spent runnable but waiting for a CPU (schedstat); 0.0 if unknown."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    return total / 1e9


# -- SGLang's own bench_serving as the baseline ---------------------------------------------------------
def bench_serving_client(python: str, module: str) -> tuple[str, str]:
    """(client module, installed sglang version) in the baseline python, without importing sglang.

    ``module`` "auto": ``sglang.benchmark.serving`` if the installed package has that file (0.5.23),
    else ``sglang.bench_serving`` (0.5.10.post1).
    """
    probe = (
        "import importlib.metadata, importlib.util, os, sys\n"
        "spec = importlib.util.find_spec('sglang')\n"
        "root = list(spec.submodule_search_locations)[0]\n"
        "print(importlib.metadata.version('sglang'))\n"
        "for m in sys.argv[1:]:\n"
        "    if os.path.isfile(os.path.join(root, *m.split('.')[1:]) + '.py'):\n"
        "        print(m)\n"
        "        break\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", probe, *BS_MODULES], capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SystemExit(f"no sglang in {python} ({exc}); run benchmarks/bench_serving_venv.sh") from exc
    if len(out) < 2:
        raise SystemExit(f"sglang {out[0] if out else '?'} in {python} has none of {', '.join(BS_MODULES)}")
    return (out[1] if module == "auto" else module), out[0]


RUST_EXTENSION = "sglang.srt.rust_extensions._bench"  # what --rust-client loads (bundled in the wheel)


def rust_client_extension(python: str) -> str:
    """Path of the Rust client's compiled extension in the baseline python, found without importing sglang.

    The sglang wheel bundles it (built for that wheel's CPython only); the client loads it with
    ``load_rust_extension``, which, outside a source checkout, imports this bundled module.
    """
    probe = (
        "import importlib.util, os, sys, sysconfig\n"
        "spec = importlib.util.find_spec('sglang')\n"
        "root = list(spec.submodule_search_locations)[0]\n"
        "path = os.path.join(root, *sys.argv[1].split('.')[1:]) + sysconfig.get_config_var('EXT_SUFFIX')\n"
        "print(path if os.path.isfile(path) else '')\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", probe, RUST_EXTENSION], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SystemExit(f"no sglang in {python} ({exc}); run benchmarks/bench_serving_venv.sh") from exc
    if not out:
        raise SystemExit(
            f"the sglang in {python} bundles no {RUST_EXTENSION} for its Python (sglang 0.5.23 does)"
        )
    return out


BS_START_MARK = "Warmup completed"  # stdout, both clients: just before the timed run
BS_DONE_MARK = "all requests done"  # stderr: its progress bar first shows n/n (at the latest on close())
BS_END_MARK = "Serving Benchmark Result"  # stdout, after the run and its metric computation
BS_RUN_MARK = (
    "Running "  # stdout, Rust client only: "Running N requests on K worker threads ...", at its start
)
BS_RUN_END = "its run start + duration"  # the Rust client's window end, interpolated from the CPU samples
SAMPLE_EVERY_S = 0.01  # CPU sampling period from the start mark to the result header


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """Each live thread of a process: tid -> (thread name, CPU seconds since it started)."""
    threads: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            threads[int(tid)] = (stat[stat.index("(") + 1 : stat.rindex(")")], stat_cpu_s(stat))
    return threads


def thread_window(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> list[tuple[str, float]]:
    """CPU seconds each thread alive at ``after`` used since ``before``, busiest first.

    A thread that started in between counts from zero; one that exited in between is missing here (its
    time stays in the process total, which ``proc_cpu_s`` reads).
    """
    used = [(name, cpu - before.get(tid, ("", 0.0))[1]) for tid, (name, cpu) in after.items()]
    return sorted(used, key=lambda item: -item[1])


def parsed_as_sent(res: dict[str, Any], n: int, max_new_tokens: int, chunks_per_request: int) -> bool:
    """Whether a bench_serving result line (with ``--output-details``) shows the whole stream parsed.

    Every request completed without error, ``max_new_tokens`` output tokens each (from the last chunk's
    ``meta_info``) and in total, one inter-token latency per chunk after the first, the whole cumulative
    text (the null server streams one character per token).
    """
    details = ("output_lens", "itls", "generated_texts", "errors")
    if any(len(res.get(k) or ()) != n for k in details):
        return False
    return (
        res.get("completed") == n
        and res.get("total_output_tokens") == n * max_new_tokens
        and all(x == max_new_tokens for x in res["output_lens"])
        and all(len(itl) == chunks_per_request - 1 for itl in res["itls"])
        and all(len(t or "") == max_new_tokens for t in res["generated_texts"])
        and not any(res["errors"])
    )


def bench_serving_cmd(
    python: str,
    args: argparse.Namespace,
    rust: bool,
    level: tuple[str, str, int, int, Path],
) -> list[str]:
    """The bench_serving command line of one level, ``level`` = (url, tokenizer, streams, requests, out).

    ``rust``: the same command with ``--rust-client`` (and its worker threads when given).
    """
    url, tokenizer, concurrency, n, out = level
    cmd = [python, "-m", args.bench_serving_module, "--backend", "sglang", "--base-url", url]
    cmd += ["--tokenizer", tokenizer, "--dataset-name", "random-ids", "--tokenize-prompt"]
    cmd += ["--random-input-len", str(args.input_len), "--random-output-len", str(args.max_new_tokens)]
    cmd += ["--random-range-ratio", "1.0", "--num-prompts", str(n), "--max-concurrency", str(concurrency)]
    cmd += ["--request-rate", "inf", "--output-file", str(out), "--output-details"]
    if rust:
        cmd.append("--rust-client")
        if args.rust_worker_threads is not None:
            cmd += ["--rust-worker-threads", str(args.rust_worker_threads)]
    return [*cmd, *args.bench_serving_arg]


Sample = tuple[float, float, float, float]  # (time, client CPU s, client CPU wait s, null-server CPU s)


def interpolate(samples: list[Sample], t: float) -> Sample | None:
    """The sample at time ``t``, linear between the two around it; None outside the sampled span."""
    for before, after in itertools.pairwise(samples):
        if before[0] <= t <= after[0]:
            f = (t - before[0]) / (after[0] - before[0]) if after[0] > before[0] else 0.0
            return (t, *(b + f * (a - b) for b, a in zip(before[1:], after[1:], strict=True)))
    return None


class _Marks:
    """Wall time, CPU (all threads), CPU wait, per-thread CPU and null-server CPU at named output lines,
    and the same sampled every SAMPLE_EVERY_S from the start mark to the result header."""

    def __init__(self, pid: int, server_pids: list[int]) -> None:
        self.pid = pid
        self.server_pids = server_pids
        self.at: dict[str, Sample] = {}
        self.threads: dict[str, dict[int, tuple[str, float]]] = {}
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def read(self) -> Sample:
        return (
            time.time(),
            proc_cpu_s(self.pid),
            proc_runqueue_wait_s(self.pid),
            sum(proc_cpu_s(q) for q in self.server_pids),
        )

    def mark(self, name: str) -> None:
        if name in self.at:
            return
        if name == BS_END_MARK:
            self.stop()  # so the header's reading is the last sample
        self.at[name] = self.read()
        self.threads[name] = thread_cpu_s(self.pid)
        if name in (BS_START_MARK, BS_END_MARK):
            self.samples.append(self.at[name])
        if name == BS_START_MARK:
            self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.samples.append(self.read())

    def stop(self) -> None:
        self._stop.set()
        if self._sampler.is_alive():
            self._sampler.join()


def _watch_stderr(fd: int, marks: _Marks, n: int, log: Path) -> None:
    # Its progress bar redraws with \r; the first frame showing "n/n" ends the timed run (then only the
    # bar's close and one GET /server_info come before its metric computation).
    done = f" {n}/{n} [".encode()
    tail = b""
    with open(log, "wb") as err:
        while data := os.read(fd, 65536):
            err.write(data)
            tail = tail[-64:] + data
            if done in tail:
                marks.mark(BS_DONE_MARK)


def _run_marked(
    cmd: list[str], tmp: Path, n: int, server_pids: list[int]
) -> tuple[int, _Marks, float, float]:
    """Run bench_serving, marking its output lines; (exit code, marks, process wall s, process CPU s)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    assert p.stdout is not None and p.stderr is not None
    marks = _Marks(p.pid, server_pids)
    watcher = threading.Thread(
        target=_watch_stderr, args=(p.stderr.fileno(), marks, n, tmp / "stderr.log"), daemon=True
    )
    watcher.start()
    log = []
    for line in p.stdout:
        for name in (BS_START_MARK, BS_RUN_MARK, BS_END_MARK):
            if line.startswith(name) if name == BS_RUN_MARK else name in line:
                marks.mark(name)
        log.append(line)
    rc = p.wait()
    marks.stop()
    watcher.join(10)
    wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    (tmp / "stdout.log").write_text("".join(log))
    return rc, marks, wall, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


BS_KEYS = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "request_throughput",
    "output_throughput",
    "max_concurrency",
    "mean_ttft_ms",
    "mean_itl_ms",
)


def window_end(marks: _Marks, duration: float) -> tuple[str, Sample]:
    """Where the counted window ends (see run_bench_serving): its name and the sample there."""
    if BS_RUN_MARK in marks.at:
        end = interpolate(marks.samples, marks.at[BS_RUN_MARK][0] + duration)
        if end is not None:
            return BS_RUN_END, end
    if BS_DONE_MARK in marks.at:
        return BS_DONE_MARK, marks.at[BS_DONE_MARK]
    return BS_END_MARK, marks.at[BS_END_MARK]


def run_bench_serving(
    kind: str,
    url: str,
    args: argparse.Namespace,
    concurrency: int,
    n: int,
    server_pids: list[int],
) -> dict[str, Any]:
    """One level of ``python -m <bench_serving module>`` against the null server; figures as run_workers.

    CPU is the process's (``/proc/<pid>/stat``: every thread, so the Rust client's Tokio workers too)
    from "Warmup completed" (then both sleep 1 s, idle) to the end of the timed run: the Python client's
    first progress frame showing n/n; the Rust client's "Running N requests" line plus its own
    ``duration``, read from the CPU samples (it draws no bar off a terminal). With neither, the result
    header, so its metric computation is then counted too. The busiest threads up to the header are
    reported beside it.
    """
    python = args.baseline_python
    tokenizer = args.bench_serving_tokenizer or str(Path(python).parent.parent / "sglbench-tokenizer")
    if not Path(tokenizer, "tokenizer.json").is_file():
        raise SystemExit(f"no tokenizer at {tokenizer}; run benchmarks/bench_serving_venv.sh or pass one")
    tmp = Path(tempfile.mkdtemp(prefix="sglbench-bs-"))
    out_file = tmp / "bench_serving.jsonl"
    cmd = bench_serving_cmd(
        python, args, kind == "bench_serving_rust", (url, tokenizer, concurrency, n, out_file)
    )
    rc, marks, proc_wall, proc_cpu = _run_marked(cmd, tmp, n, server_pids)
    if rc != 0 or BS_START_MARK not in marks.at or BS_END_MARK not in marks.at or not out_file.is_file():
        raise SystemExit(f"bench_serving failed (exit {rc}); logs in {tmp}; command: {' '.join(cmd)}")
    res = json.loads(out_file.read_text().splitlines()[-1])
    end_mark, end = window_end(marks, res["duration"])
    chunks_per_req = math.ceil(args.max_new_tokens / args.chunk_tokens)
    parsed_ok = parsed_as_sent(res, n, args.max_new_tokens, chunks_per_req)
    (ts, c0, w0, s0), (te, c1, w1, s1) = marks.at[BS_START_MARK], end
    threads = thread_window(marks.threads[BS_START_MARK], marks.threads[BS_END_MARK])
    wall = res["duration"]
    requests = res["completed"]
    chunks = requests * chunks_per_req
    cpu = c1 - c0
    return {
        "requests": requests,
        "errors": n - requests,
        "chunks": chunks,
        "tokens": res["total_output_tokens"],
        "cpu_s": cpu,
        "cpu_wait_s": w1 - w0,
        "wall_s": wall,
        "req_s": res["request_throughput"],
        "chunks_s": chunks / wall,
        "tok_s": res["output_throughput"],
        "cpu_per_proc": cpu / wall,
        "chunks_per_cpu_s": chunks / cpu if cpu > 0 else None,
        "cpu_wait_per_proc": (w1 - w0) / wall,
        "procs": 1,
        "valid": [parsed_ok],
        "invalid_reasons": [] if parsed_ok else ["bench_serving output does not match the workload"],
        "server_cpu_s": s1 - s0,
        "window_s": te - ts,
        "window_end": end_mark,
        "metrics_cpu_s": marks.at[BS_END_MARK][1] - c1,
        "threads": len(marks.threads[BS_END_MARK]),
        "samples": len(marks.samples),
        "busiest_threads": [(name, round(used, 3)) for name, used in threads[:4]],
        "process_wall_s": proc_wall,
        "process_cpu_s": proc_cpu,
        "bench_serving": {k: res.get(k) for k in BS_KEYS},
        "parsed_ok": parsed_ok,
        "logs": str(tmp),
        "command": cmd,
        "module": args.bench_serving_module,
        "sglang_version": args.sglang_version,
    }


# -- driver ---------------------------------------------------------------------------------------------
def run_workers(
    kind: str, python: str, url: str, args: argparse.Namespace, concurrency: int, n: int, procs: int
) -> dict[str, Any]:
    start_at = time.time() + 1.5 + 0.2 * procs
    cmds = []
    for i in range(procs):
        c = concurrency // procs + (1 if i < concurrency % procs else 0)
        share = n // procs + (1 if i < n % procs else 0)
        cmds.append(
            [
                python,
                __file__,
                "--worker",
                kind,
                "--url",
                url,
                "--api",
                args.api,
                "--worker-concurrency",
                str(max(1, c)),
                "--worker-requests",
                str(share),
                "--max-new-tokens",
                str(args.max_new_tokens),
                "--input-len",
                str(args.input_len),
                "--start-at",
                repr(start_at),
            ]
        )
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) for cmd in cmds]
    outs = []
    for p in ps:
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"{kind} worker failed (exit {p.returncode}); command: {' '.join(cmds[0])}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    begin = min(o["start"] for o in outs)
    end = max(o["start"] + o["wall_s"] for o in outs)
    wall = end - begin
    tot = {
        k: sum(o[k] for o in outs) for k in ("requests", "errors", "chunks", "tokens", "cpu_s", "cpu_wait_s")
    }
    return {
        **tot,
        "wall_s": wall,
        "req_s": tot["requests"] / wall,
        "chunks_s": tot["chunks"] / wall,
        "tok_s": tot["tokens"] / wall,
        "cpu_per_proc": tot["cpu_s"] / wall / procs,
        # Load-independent efficiency: chunks parsed per second of client CPU (sum over processes).
        "chunks_per_cpu_s": tot["chunks"] / tot["cpu_s"] if tot["cpu_s"] > 0 else None,
        "cpu_wait_per_proc": tot["cpu_wait_s"] / wall / procs,
        "procs": procs,
        "valid": [o["valid"] for o in outs],
        "invalid_reasons": sorted({" ".join(r.split()[:2]) for o in outs for r in o["invalid_reasons"]}),
    }


def parse_baselines(text: str) -> list[str]:
    """``--baseline``: one name or a comma-separated list, "none" for no baseline, each name once."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in ("none", *BASELINE_NAMES)]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: want none or a comma-separated list of distinct {', '.join(BASELINE_NAMES)}"
        )
    return [] if names == ["none"] else [x for x in names if x != "none"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,64,512", help="concurrent streams to test (default 1,64,512)")
    ap.add_argument("--requests-per-stream", type=int, default=8, help="requests = max(400, this × streams)")
    ap.add_argument("--min-requests", type=int, default=400, help="the 400 above (smaller for smoke runs)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--chunk-tokens", type=int, default=1, help="tokens per streamed chunk (null server)")
    ap.add_argument("--api", default="native", choices=loadgen.api_mod.APIS)
    ap.add_argument("--procs", type=int, default=1, help="sglbench client processes")
    ap.add_argument("--server-procs", type=int, default=1, help="null server processes (SO_REUSEPORT)")
    ap.add_argument(
        "--baseline",
        type=parse_baselines,
        default=[],
        help="none (default), or one or more (comma-separated, run in that order after ours at each level) "
        "of: aiohttp, our re-implementation of bench_serving's client loop; bench_serving, SGLang's own "
        "Python client; bench_serving_rust, the same command with --rust-client (its compiled client)",
    )
    ap.add_argument(
        "--rust-worker-threads",
        type=int,
        help="bench_serving_rust: its --rust-worker-threads (default: its own, the available parallelism)",
    )
    ap.add_argument(
        "--baseline-python",
        default=sys.executable,
        help="python for the baseline: with aiohttp, or the bench_serving_venv.sh venv's python",
    )
    ap.add_argument(
        "--bench-serving-tokenizer",
        help="local tokenizer dir for bench_serving (default: <--baseline-python's venv>/sglbench-tokenizer)",
    )
    ap.add_argument(
        "--bench-serving-module",
        default="auto",
        help="client module to run with -m (default auto: sglang.benchmark.serving if installed, "
        "as in sglang 0.5.23, else sglang.bench_serving, as in 0.5.10.post1)",
    )
    ap.add_argument(
        "--bench-serving-arg",
        action="append",
        default=[],
        help="extra bench_serving argument, as is (repeatable; e.g. --bench-serving-arg=--disable-tqdm)",
    )
    ap.add_argument("--input-len", type=int, default=128, help="prompt length in token ids (both clients)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    # worker mode (internal)
    ap.add_argument("--worker", choices=("ours", "baseline"), help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--worker-concurrency", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker-requests", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    return ap


def worker_main(args: argparse.Namespace) -> None:
    """One worker process of run_workers: its figures as one JSON line on stdout."""
    point = (
        args.worker_concurrency,
        args.worker_requests,
        args.max_new_tokens,
        args.start_at,
        args.input_len,
    )
    if args.worker == "ours":
        print(json.dumps(worker_ours(args.url, args.api, *point)))
    else:
        print(json.dumps(worker_baseline(args.url, *point)))


def baseline_names(args: argparse.Namespace) -> dict[str, str]:
    """Client label per requested baseline; finds and prints the bench_serving client when one is asked."""
    names = {b: BASELINE_NAMES[b] for b in args.baseline}
    if any(b in BS_BASELINES for b in args.baseline):
        args.bench_serving_module, args.sglang_version = bench_serving_client(
            args.baseline_python, args.bench_serving_module
        )
        names = {b: name.format(version=args.sglang_version) for b, name in names.items()}
        print(f"bench_serving: sglang {args.sglang_version}, python -m {args.bench_serving_module}")
    if "bench_serving_rust" in args.baseline:
        print(f"  with --rust-client: extension {rust_client_extension(args.baseline_python)}")
    return names


def measure(
    kind: str, args: argparse.Namespace, srv: NullServerProcesses, c: int, n: int
) -> tuple[dict[str, Any], float]:
    """One client at one level: (its figures, null-server CPU per server process over its window)."""
    if kind in BS_BASELINES:
        r = run_bench_serving(kind, srv.url, args, c, n, [p.pid for p in srv.popen])
        # Its window also holds the idle 1 s after the warm-up: per second of its timed run instead.
        return r, r["server_cpu_s"] / r["wall_s"] / args.server_procs
    cpu0 = sum(proc_cpu_s(p.pid) for p in srv.popen)
    if kind == "ours":
        r = run_workers("ours", sys.executable, srv.url, args, c, n, args.procs)
    else:
        r = run_workers("baseline", args.baseline_python, srv.url, args, c, n, 1)
    return r, (sum(proc_cpu_s(p.pid) for p in srv.popen) - cpu0) / r["wall_s"] / args.server_procs


def print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['client']:<46} streams={row['streams']:<4} procs={row['procs']} req/s={row['req_s']:8.1f} "
        f"chunks/s={row['chunks_s']:9.0f} chunks/cpu-s={row['chunks_per_cpu_s'] or 0:9.0f} "
        f"client_cpu/proc={row['cpu_per_proc']:4.0%} "
        f"client_cpu_wait/proc={row['cpu_wait_per_proc']:4.0%} "
        f"server_cpu/proc={row['server_cpu_per_proc']:4.0%} errors={row['errors']}"
        + (f" self-check: {', '.join(row['invalid_reasons'])}" if row["invalid_reasons"] else ""),
        flush=True,
    )
    if "bench_serving" in row:
        busiest = ", ".join(f"{t} {c:.2f}" for t, c in row["busiest_threads"])
        print(
            f"{'':<46} its own figures: duration={row['wall_s']:.2f}s (excl. start-up; whole "
            f"process {row['process_wall_s']:.1f}s, {row['process_cpu_s']:.1f} CPU-s; counted "
            f"{row['cpu_s']:.2f} CPU-s up to {row['window_end']!r}, all threads ({row['threads']} alive; "
            f"busiest {busiest}); then metrics {row['metrics_cpu_s']:.2f}), "
            f"completed={row['requests']}, output tokens={row['tokens']}, "
            f"stream parsed as sent: {'yes' if row['parsed_ok'] else 'NO'}",
            flush=True,
        )


def print_ratios(rows: list[dict[str, Any]], levels: list[int], names: dict[str, str]) -> None:
    for name in names.values():
        print(f"\nratio sglbench / {name} (chunks):")
        for c in levels:
            ours = next(r for r in rows if r["streams"] == c and r["client"] == "sglbench")
            base = next(r for r in rows if r["streams"] == c and r["client"] == name)
            print(
                f"  streams={c:<4} {ours['chunks_s'] / base['chunks_s']:.1f}x wall-clock, "
                f"{ours['chunks_per_cpu_s'] / base['chunks_per_cpu_s']:.1f}x per client CPU-second"
            )


def main() -> int:
    args = build_parser().parse_args()
    if args.worker:
        worker_main(args)
        return 0
    if args.baseline and args.api != "native":
        raise SystemExit("the baselines run the native /generate loop only; use --api native")
    levels = [int(x) for x in args.levels.split(",")]
    names = baseline_names(args)
    rows = []
    print(
        f"null server: {args.server_procs} proc(s), {args.max_new_tokens} tokens/request in chunks of "
        f"{args.chunk_tokens}, api={args.api}; machine: {os.cpu_count()} CPUs, load avg "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    load_before = os.getloadavg()
    with NullServerProcesses(["--chunk-tokens", str(args.chunk_tokens)], args.server_procs) as srv:
        for c in levels:
            n = max(args.min_requests, args.requests_per_stream * c)
            for kind in ("ours", *args.baseline):
                load1 = os.getloadavg()[0]
                r, server_cpu = measure(kind, args, srv, c, n)
                row = {
                    "client": names.get(kind, "sglbench"),
                    "streams": c,
                    "requests": n,
                    **r,
                    "server_cpu_per_proc": server_cpu,
                    "loadavg_1m_before": load1,
                }
                rows.append(row)
                print_row(row)
    load_after = os.getloadavg()
    print(
        "load avg (1, 5, 15 min) before: "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after: "
        + " ".join(f"{x:.2f}" for x in load_after)
    )
    print_ratios(rows, levels, names)
    if args.json:
        kept = {k: v for k, v in vars(args).items() if not k.startswith("worker")}
        for k in ("url", "start_at", "json"):
            kept.pop(k, None)
        args.json.write_text(
            json.dumps(
                {
                    "args": kept,
                    "rows": rows,
                    "cpus": os.cpu_count(),
                    "loadavg_before": load_before,
                    "loadavg_after": load_after,
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
