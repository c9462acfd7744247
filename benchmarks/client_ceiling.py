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

Not a test: figures depend on the machine. Example::

    PYTHONPATH=python python benchmarks/client_ceiling.py --baseline aiohttp
    PYTHONPATH=python python benchmarks/client_ceiling.py --levels 512 --procs 2 --server-procs 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from sglbench.calibrate_cli import NullServerProcesses  # noqa: E402
from sglbench.hostlib import loadgen, prompts  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process from /proc (Linux), in seconds; 0.0 when unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- workers (run in their own process) -----------------------------------------------------------------
def worker_ours(
    url: str, api: str, concurrency: int, n: int, max_new: int, start_at: float
) -> dict[str, Any]:
    spec = loadgen.BenchSpec(
        url=url,
        api=api,
        prompts=prompts.synthetic_prompts(64, 128, 0),
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


def worker_baseline(url: str, concurrency: int, n: int, max_new: int, start_at: float) -> dict[str, Any]:
    """bench_serving-STYLE client loop (re-implementation of the described design; see module doc)."""
    import aiohttp

    prompt_ids = [list(p.input_ids or ()) for p in prompts.synthetic_prompts(64, 128, 0)]
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
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--chunk-tokens", type=int, default=1, help="tokens per streamed chunk (null server)")
    ap.add_argument("--api", default="native", choices=loadgen.api_mod.APIS)
    ap.add_argument("--procs", type=int, default=1, help="sglbench client processes")
    ap.add_argument("--server-procs", type=int, default=1, help="null server processes (SO_REUSEPORT)")
    ap.add_argument("--baseline", choices=("none", "aiohttp"), default="none")
    ap.add_argument("--baseline-python", default=sys.executable, help="python with aiohttp for the baseline")
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
                )
            )
        )
        return 0

    if args.baseline == "aiohttp" and args.api != "native":
        raise SystemExit(
            "the bench_serving-style baseline implements the native /generate loop only; use --api native"
        )
    levels = [int(x) for x in args.levels.split(",")]
    server_args = ["--chunk-tokens", str(args.chunk_tokens)]
    rows = []
    print(
        f"null server: {args.server_procs} proc(s), {args.max_new_tokens} tokens/request in chunks of "
        f"{args.chunk_tokens}, api={args.api}; machine: {os.cpu_count()} CPUs, load avg "
        f"{os.getloadavg()[0]:.2f}"
    )
    with NullServerProcesses(server_args, args.server_procs) as srv:
        for c in levels:
            n = max(400, args.requests_per_stream * c)
            for kind in ("ours", "baseline") if args.baseline != "none" else ("ours",):
                python = args.baseline_python if kind == "baseline" else sys.executable
                procs = args.procs if kind == "ours" else 1
                cpu0 = sum(proc_cpu_s(p.pid) for p in srv.popen)
                r = run_workers(kind, python, srv.url, args, c, n, procs)
                server_cpu = (
                    (sum(proc_cpu_s(p.pid) for p in srv.popen) - cpu0) / r["wall_s"] / args.server_procs
                )
                row = {
                    "client": "sglbench" if kind == "ours" else "bench_serving-style (re-impl, aiohttp)",
                    "streams": c,
                    "requests": n,
                    **r,
                    "server_cpu_per_proc": server_cpu,
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
    if args.baseline != "none":
        print("\nratio sglbench / bench_serving-style (chunks):")
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
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
