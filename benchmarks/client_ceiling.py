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
baseline python by default (``--bench-serving-module``). Not its ``--rust-client``. It runs as a
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

Not a test: figures depend on the machine. Example::

    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline aiohttp
    SGLANG_VERSION=0.5.23 bash benchmarks/bench_serving_venv.sh /tmp/bs-venv-0523
    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline bench_serving \\
        --baseline-python /tmp/bs-venv-0523/bin/python
    PYTHONPATH=python python benchmarks/client_ceiling.py --levels 512 --procs 2 --server-procs 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
}
BS_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")  # newest layout first


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process from /proc (Linux), in seconds; 0.0 when unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


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


BS_START_MARK = "Warmup completed"  # stdout, just before its 1 s sleep and the timed run
BS_DONE_MARK = "all requests done"  # stderr: its tqdm bar first shows n/n (at the latest on close())
BS_END_MARK = "Serving Benchmark Result"  # stdout, after the run and its metric computation


def run_bench_serving(
    python: str,
    url: str,
    args: argparse.Namespace,
    concurrency: int,
    n: int,
    server_pids: list[int],
) -> dict[str, Any]:
    """One level of ``python -m <bench_serving module>`` against the null server; figures as run_workers."""
    tokenizer = args.bench_serving_tokenizer or str(Path(python).parent.parent / "sglbench-tokenizer")
    if not Path(tokenizer, "tokenizer.json").is_file():
        raise SystemExit(f"no tokenizer at {tokenizer}; run benchmarks/bench_serving_venv.sh or pass one")
    tmp = Path(tempfile.mkdtemp(prefix="sglbench-bs-"))
    out_file = tmp / "bench_serving.jsonl"
    cmd = [
        python,
        "-m",
        args.bench_serving_module,
        "--backend",
        "sglang",
        "--base-url",
        url,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random-ids",
        "--tokenize-prompt",
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.max_new_tokens),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(n),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--output-file",
        str(out_file),
        "--output-details",
        *args.bench_serving_arg,
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    marks: dict[str, tuple[float, float, float, float]] = {}  # mark -> (time, cpu, cpu wait, server cpu)

    def mark(name: str, pid: int) -> None:
        if name not in marks:
            marks[name] = (
                time.time(),
                proc_cpu_s(pid),
                proc_runqueue_wait_s(pid),
                sum(proc_cpu_s(q) for q in server_pids),
            )

    def watch_stderr(fd: int, pid: int) -> None:
        # tqdm redraws with \r; the first frame showing "n/n [" is the end of the timed run (then only
        # pbar.close() and one GET /server_info come before its metric computation).
        done = f" {n}/{n} [".encode()
        tail = b""
        with open(tmp / "stderr.log", "wb") as err:
            while data := os.read(fd, 65536):
                err.write(data)
                tail = tail[-64:] + data
                if done in tail:
                    mark(BS_DONE_MARK, pid)

    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    assert p.stdout is not None and p.stderr is not None
    watcher = threading.Thread(target=watch_stderr, args=(p.stderr.fileno(), p.pid), daemon=True)
    watcher.start()
    log = []
    for line in p.stdout:
        for name in (BS_START_MARK, BS_END_MARK):
            if name in line:
                mark(name, p.pid)
        log.append(line)
    rc = p.wait()
    watcher.join(10)
    proc_wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    (tmp / "stdout.log").write_text("".join(log))
    if rc != 0 or BS_START_MARK not in marks or BS_END_MARK not in marks or not out_file.is_file():
        raise SystemExit(f"bench_serving failed (exit {rc}); logs in {tmp}; command: {' '.join(cmd)}")
    # Without a progress bar (--disable-tqdm) the window ends at the result header instead, and so
    # also holds its metric computation (about 1 CPU-s per 4,096 requests here).
    end_mark = BS_DONE_MARK if BS_DONE_MARK in marks else BS_END_MARK
    res = json.loads(out_file.read_text().splitlines()[-1])
    chunks_per_req = math.ceil(args.max_new_tokens / args.chunk_tokens)
    # It really parsed our stream: every request done, 128 tokens (from the last chunk's meta_info),
    # one ITL per chunk after the first, the whole cumulative text.
    parsed_ok = (
        res["completed"] == n
        and res["total_output_tokens"] == n * args.max_new_tokens
        and all(x == args.max_new_tokens for x in res["output_lens"])
        and all(len(itl) == chunks_per_req - 1 for itl in res["itls"])
        and all(len(t) == args.max_new_tokens for t in res["generated_texts"])
        and not any(res["errors"])
    )
    (ts, c0, w0, s0), (te, c1, w1, s1) = marks[BS_START_MARK], marks[end_mark]
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
        "metrics_cpu_s": marks[BS_END_MARK][1] - c1,
        "process_wall_s": proc_wall,
        "process_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "bench_serving": {
            k: res.get(k)
            for k in (
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
        },
        "parsed_ok": parsed_ok,
        "logs": str(tmp),
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


def main() -> int:
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
        choices=("none", "aiohttp", "bench_serving"),
        default="none",
        help="aiohttp: our re-implementation of bench_serving's client loop; bench_serving: SGLang's own",
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
    args = ap.parse_args()

    if args.worker == "ours":
        print(
            json.dumps(
                worker_ours(
                    args.url,
                    args.api,
                    args.worker_concurrency,
                    args.worker_requests,
                    args.max_new_tokens,
                    args.start_at,
                    args.input_len,
                )
            )
        )
        return 0
    if args.worker == "baseline":
        print(
            json.dumps(
                worker_baseline(
                    args.url,
                    args.worker_concurrency,
                    args.worker_requests,
                    args.max_new_tokens,
                    args.start_at,
                    args.input_len,
                )
            )
        )
        return 0

    if args.baseline != "none" and args.api != "native":
        raise SystemExit("the baselines run the native /generate loop only; use --api native")
    levels = [int(x) for x in args.levels.split(",")]
    baseline_name = BASELINE_NAMES.get(args.baseline, "")
    if args.baseline == "bench_serving":
        args.bench_serving_module, args.sglang_version = bench_serving_client(
            args.baseline_python, args.bench_serving_module
        )
        baseline_name = baseline_name.format(version=args.sglang_version)
        print(f"baseline: sglang {args.sglang_version}, python -m {args.bench_serving_module}")
    server_args = ["--chunk-tokens", str(args.chunk_tokens)]
    rows = []
    print(
        f"null server: {args.server_procs} proc(s), {args.max_new_tokens} tokens/request in chunks of "
        f"{args.chunk_tokens}, api={args.api}; machine: {os.cpu_count()} CPUs, load avg "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    load_before = os.getloadavg()
    with NullServerProcesses(server_args, args.server_procs) as srv:
        for c in levels:
            n = max(args.min_requests, args.requests_per_stream * c)
            for kind in ("ours", "baseline") if args.baseline != "none" else ("ours",):
                python = args.baseline_python if kind == "baseline" else sys.executable
                procs = args.procs if kind == "ours" else 1
                cpu0 = sum(proc_cpu_s(p.pid) for p in srv.popen)
                load1 = os.getloadavg()[0]
                if kind == "baseline" and args.baseline == "bench_serving":
                    r = run_bench_serving(python, srv.url, args, c, n, [p.pid for p in srv.popen])
                    server_cpu = r["server_cpu_s"] / r["window_s"] / args.server_procs
                else:
                    r = run_workers(kind, python, srv.url, args, c, n, procs)
                    server_cpu = (
                        (sum(proc_cpu_s(p.pid) for p in srv.popen) - cpu0) / r["wall_s"] / args.server_procs
                    )
                row = {
                    "client": "sglbench" if kind == "ours" else baseline_name,
                    "streams": c,
                    "requests": n,
                    **r,
                    "server_cpu_per_proc": server_cpu,
                    "loadavg_1m_before": load1,
                }
                rows.append(row)
                print(
                    f"{row['client']:<40} streams={c:<4} procs={procs} req/s={r['req_s']:8.1f} "
                    f"chunks/s={r['chunks_s']:9.0f} chunks/cpu-s={r['chunks_per_cpu_s'] or 0:9.0f} "
                    f"client_cpu/proc={r['cpu_per_proc']:4.0%} "
                    f"client_cpu_wait/proc={r['cpu_wait_per_proc']:4.0%} server_cpu/proc={server_cpu:4.0%} "
                    f"errors={r['errors']}"
                    + (f" self-check: {', '.join(r['invalid_reasons'])}" if r["invalid_reasons"] else ""),
                    flush=True,
                )
                if "bench_serving" in r:
                    print(
                        f"{'':<40} its own figures: duration={r['wall_s']:.2f}s (excl. start-up; whole "
                        f"process {r['process_wall_s']:.1f}s, {r['process_cpu_s']:.1f} CPU-s; counted "
                        f"{r['cpu_s']:.2f} CPU-s up to {r['window_end']!r}, "
                        f"then metrics {r['metrics_cpu_s']:.2f}), "
                        f"completed={r['requests']}, output tokens={r['tokens']}, "
                        f"stream parsed as sent: {'yes' if r['parsed_ok'] else 'NO'}",
                        flush=True,
                    )
    load_after = os.getloadavg()
    print(
        "load avg (1, 5, 15 min) before: "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after: "
        + " ".join(f"{x:.2f}" for x in load_after)
    )
    if args.baseline != "none":
        print(f"\nratio sglbench / {baseline_name} (chunks):")
        for c in levels:
            ours = next(r for r in rows if r["streams"] == c and r["client"] == "sglbench")
            base = next(r for r in rows if r["streams"] == c and r["client"] != "sglbench")
            print(
                f"  streams={c:<4} {ours['chunks_s'] / base['chunks_s']:.1f}x wall-clock, "
                f"{ours['chunks_per_cpu_s'] / base['chunks_per_cpu_s']:.1f}x per client CPU-second"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {
                        k: v
                        for k, v in vars(args).items()
                        if not k.startswith("worker") and k not in ("url", "start_at", "json")
                    },
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
