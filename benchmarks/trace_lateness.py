#!/usr/bin/env python3
"""Send lateness of a trace replay against the null server on loopback: does the client keep the schedule?

Replays a Mooncake-format trace (``trace:<path>``; by default a seeded one this script writes: Poisson
arrivals, 256-4096 input tokens built from 512-token blocks of which every request shares its first one
to four with others, 8-64 output tokens) at each rate for about ``--seconds`` s, against
``sglbench.hostlib.nullserver`` in a process of its own (first token after ``--ttft-ms``, then one token
every ``--gap-ms``, so requests overlap as they do on a server). Prints per point: requests, the speed-up
over the trace's own clock, send lateness (actual send − scheduled send) p50/p99/max, the event-loop lag
p99, the achieved rate and the client self-check's verdict (a point whose lateness p99 exceeds
``metrics.MAX_SEND_LATENESS_P99_MS`` is invalid). Results in ``benchmarks/trace_lateness.md``.

Not a test: figures depend on the machine. Example::

    PYTHONPATH=python python3 benchmarks/trace_lateness.py --rates 20,35,50 --seconds 5 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from sglbench.hostlib import loadgen, metrics, prompts


def write_trace(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    t = 0.0
    with path.open("w") as f:
        for i in range(n):
            shared = [rng.randrange(8) * 4 + k for k in range(rng.randint(1, 4))]  # common prefixes
            input_len = rng.randint(256, 4096)
            own = [100_000 + i * 8 + k for k in range(max(0, -(-input_len // 512) - len(shared)))]
            row = {
                "timestamp": round(t),
                "input_length": input_len,
                "output_length": rng.randint(8, 64),
                "hash_ids": shared + own,
            }
            f.write(json.dumps(row) + "\n")
            t += rng.expovariate(1 / 100.0)  # the trace's own clock: 10 req/s


def start_null_server(ttft_ms: float, gap_ms: float) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    cmd = [sys.executable, "-m", "sglbench.hostlib.nullserver", "--port", "0"]
    cmd += ["--ttft-ms", str(ttft_ms), "--gap-ms", str(gap_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["LISTENING"]:
        proc.kill()
        raise SystemExit(f"the null server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", type=Path, help="a Mooncake-format JSONL trace (default: a seeded one)")
    p.add_argument("--rates", default="20,35,50", help="request rates, req/s, comma-separated")
    p.add_argument("--seconds", type=float, default=5.0, help="replayed seconds per point (default 5)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--gap-ms", type=float, default=5.0)
    a = p.parse_args()
    rates = [float(r) for r in a.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        trace = a.trace or Path(tmp) / "trace.jsonl"
        if a.trace is None:
            write_trace(trace, int(max(rates) * a.seconds) + 1, seed=0)
        set_ = prompts.resolve_prompt_source(f"trace:{trace}")
        server, url = start_null_server(a.ttft_ms, a.gap_ms)
        try:
            points = [loadgen.LoadPoint(request_rate=r) for r in rates]
            print(
                f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs; threshold p99 "
                f"{metrics.MAX_SEND_LATENESS_P99_MS} ms"
            )
            print(
                "| rate req/s | requests | speed-up | lateness p50 ms | p99 ms | max ms | loop lag p99 ms "
                "| achieved req/s | valid |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for point in points:
                spec = loadgen.BenchSpec(
                    url=url,
                    prompts=set_,
                    points=[point],
                    num_prompts=int(point.request_rate * a.seconds),
                    repeats=a.repeats,
                )
                for pr in loadgen.run_campaign(spec).points:
                    s, c = pr.summary, pr.summary["client"]
                    late = c["send_lateness_ms"]
                    print(
                        f"| {point.request_rate:g} | {s['n_ok']} | {s['trace_replay']['speedup']:.2f} | "
                        f"{late['p50']:.2f} | {late['p99']:.2f} | {late['max']:.2f} | "
                        f"{c['loop_lag_ms']['p99']:.2f} | {c['achieved_rate']:.2f} | "
                        f"{'yes' if s['valid'] else 'no: ' + '; '.join(s['invalid_reasons'])} |"
                    )
        finally:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
