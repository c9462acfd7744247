"""``sglbench calibrate``: the load generator's own ceiling against the built-in null server.

The null server runs in separate processes on loopback (so its CPU is not charged to the client), streams
chunks with known timing, and the same load code as ``sglbench bench`` drives it. The report gives
requests/s and chunks/s per concurrency and whether the client self-check would flag a real run at that
load. ``benchmarks/client_ceiling.py`` builds on this to compare against a bench_serving-like client.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from sglbench.bench import (
    UsageError,
    _check_common,
    _fmt,
    _prepare_out,
    _progress,
    check_number,
    cli_words,
    parse_int_list,
    write_results,
)
from sglbench.hostlib import loadgen, prompts

MAX_SERVER_PROCS = 256
MAX_NULL_TOKENS = 100_000  # the null server builds each response in memory
MAX_NULL_DELAY_MS = 60_000.0  # null server time to first chunk / between chunks: a minute is already absurd


class NullServerProcesses:
    """Null server in separate processes (so its CPU is not charged to the client) on one port."""

    def __init__(self, args: list[str], procs: int) -> None:
        self.args = args
        self.procs = procs
        self.popen: list[subprocess.Popen[str]] = []
        self.port = 0

    def _spawn(self, port: int) -> int:
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [
            sys.executable,
            "-m",
            "sglbench.hostlib.nullserver",
            "--port",
            str(port),
            "--reuse-port",
            *self.args,
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.popen.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("LISTENING "):
            raise loadgen.LoadgenError(f"null server did not start (got {line!r}); command: {' '.join(cmd)}")
        return int(line.split()[1])

    def __enter__(self) -> NullServerProcesses:
        try:
            self.port = self._spawn(0)
            for _ in range(self.procs - 1):
                self._spawn(self.port)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.popen:
            proc.terminate()
        for proc in self.popen:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def run_calibrate(args: argparse.Namespace) -> int:
    try:
        _check_common(args)
        if args.max_new_tokens is not None and args.max_new_tokens > MAX_NULL_TOKENS:
            raise UsageError(f"--max-new-tokens must be <= {MAX_NULL_TOKENS} against the null server")
        if not 1 <= args.chunk_tokens <= MAX_NULL_TOKENS:
            raise UsageError(f"--chunk-tokens must be from 1 to {MAX_NULL_TOKENS}")
        if not 1 <= args.server_procs <= MAX_SERVER_PROCS:
            raise UsageError(f"--server-procs must be from 1 to {MAX_SERVER_PROCS}, got {args.server_procs}")
        check_number(args.ttft_ms, "--ttft-ms", lo=0, hi=MAX_NULL_DELAY_MS, lo_open=False)
        check_number(args.gap_ms, "--gap-ms", lo=0, hi=MAX_NULL_DELAY_MS, lo_open=False)
        _prepare_out(args.out, overwrite=False)
        # Default levels: one stream per client process, then 64 and 512 streams.
        levels = (
            parse_int_list(args.concurrency, "--concurrency")
            if args.concurrency
            else sorted({args.procs, 64, 512})
        )
        server_args = [
            "--chunk-tokens",
            str(args.chunk_tokens),
            "--ttft-ms",
            str(args.ttft_ms),
            "--gap-ms",
            str(args.gap_ms),
            "--spec",
        ]
        if args.api == "openai-chat":
            prompt_list = [prompts.Prompt("calibrate", "chat", text="calibrate " * 128)]
        else:
            prompt_list = prompts.synthetic_prompts(64, 128, args.seed)
        spec = loadgen.BenchSpec(
            url="http://127.0.0.1:1",  # the null server's, once it listens
            prompts=prompt_list,
            points=[loadgen.LoadPoint(concurrency=c) for c in levels],
            api=args.api,
            sampling=loadgen.SamplingSpec(max_new_tokens=args.max_new_tokens or 128, ignore_eos=True),
            num_prompts=args.num_prompts or (10**9 if args.duration else 2000),
            duration_s=args.duration,
            warmup=args.warmup,
            repeats=1,
            seed=args.seed,
            simulated=True,
            procs=args.procs,
        )
        try:  # every argument is checked before the null server starts
            spec.validate()
        except loadgen.LoadgenError as exc:
            raise UsageError(cli_words(str(exc))) from None
        with NullServerProcesses(server_args, args.server_procs) as srv:
            spec.url = srv.url
            t = time.perf_counter()
            result = loadgen.run_campaign(spec, progress=_progress)
            elapsed = time.perf_counter() - t
    except UsageError as exc:
        print(f"sglbench calibrate: error: {exc}", file=sys.stderr)
        return 2
    except loadgen.LoadgenError as exc:
        print(f"sglbench calibrate: error: {exc}", file=sys.stderr)
        return 1
    result.meta["command"] = "calibrate"
    result.meta["null_server"] = {
        "chunk_tokens": args.chunk_tokens,
        "ttft_ms": args.ttft_ms,
        "gap_ms": args.gap_ms,
        "procs": args.server_procs,
    }
    print(format_calibration(result, elapsed))
    if args.out is not None:
        try:
            files = write_results(result, args.out)
        except OSError as exc:
            print(
                f"sglbench calibrate: error: cannot write the results to {args.out}: {exc}", file=sys.stderr
            )
            return 1
        print("wrote " + ", ".join(str(f) for f in files))
    return 0


def format_calibration(result: loadgen.CampaignResult, elapsed: float) -> str:
    procs = result.meta.get("procs", 1)
    lines = [
        f"client ceiling vs null server ({result.meta['api']}, {result.meta['sampling']['max_new_tokens']} "
        f"tokens/request, chunk={result.meta.get('null_server', {}).get('chunk_tokens', '?')} tokens"
        + (f", {procs} client processes: cpu and cpu wait = the busiest one" if procs > 1 else "")
        + ")",
        f"{'streams':>8} {'req/s':>9} {'chunks/s':>10} {'tok/s':>10} {'cpu':>5} {'late p99 ms':>11} "
        f"{'lag p99 ms':>10} {'cpu wait':>8}  self-check",
    ]
    for pr in result.points:
        s = pr.summary
        c = s["client"] or {}
        cpu = c.get("cpu_fraction")
        wait = c.get("runqueue_wait_fraction")
        lines.append(
            f"{pr.point.concurrency:>8} {_fmt(s['request_throughput']):>9} "
            f"{_fmt(s['chunk_throughput'], '.0f'):>10} "
            f"{_fmt(s['output_throughput_tok_s'], '.0f'):>10} {_fmt(cpu and cpu * 100, '.0f'):>4}% "
            f"{_fmt(c.get('send_lateness_ms', {}).get('p99'), '.2f'):>11} "
            f"{_fmt(c.get('loop_lag_ms', {}).get('p99'), '.2f'):>10} "
            f"{_fmt(wait and wait * 100, '.0f'):>7}%  "
            + ("ok" if s["valid"] else "INVALID: " + "; ".join(s["invalid_reasons"]))
        )
    lines.append(
        f"(total {elapsed:.1f} s; against the null server the client is saturated by design: INVALID rows "
        "show where a real run at that load would be flagged; 'cpu wait' = time the client waited for a CPU)"
    )
    return "\n".join(lines)
