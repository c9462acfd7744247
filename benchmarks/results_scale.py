#!/usr/bin/env python3
"""Cost of reading results at scale: load, ``sglbench summarize`` and ``sglbench report`` over synthetic
runs of 10k / 100k / 1M / 10M request rows.

Each size gets one synthetic run (``--work``/<rows>/<run_id>/<host>/<config>-tp<N>/): six attempts (an
autoregressive baseline and two speculative configs at TP 1 and 2), a concurrency ladder 1..64 with three
repeats per point, a ``record.json`` per attempt shaped like the ``sglbench_record`` action writes it
(``sglbench.attempt/1`` with its ``sglbench.bench/1`` summary) and a ``requests.parquet`` per attempt
with the load generator's row fields (four chunks per request; completion lengths mostly at
``max_tokens`` 128, the rest spread over 16..127) written through :mod:`sglbench.columnar`, as
the controller writes it. ``--jsonl`` sizes also get a copy of the run with only ``requests.jsonl``
(runs from before the columnar rows), read by migration on read.

Every measurement runs in a fresh process started from a fresh wrapper, which reports the wall time of
its one child and that child's peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss``), so interpreter start
and imports are included as a user sees them:

- ``load``: ``results.load(run)`` plus the request columns the bootstrap reads (``request_tokens``);
- ``summarize``: ``sglbench summarize RUN --format md -o FILE`` (default 2000 bootstrap replicates);
- ``report``: ``sglbench report RUN -o FILE.html`` (six plots, the per-request latency box plots).

Not a test: figures depend on the machine. Example::

    PYTHONPATH=python python benchmarks/results_scale.py --sizes 10k,100k,1M,10M --jsonl 10k,100k,1M
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from sglbench import columnar  # noqa: E402

CONFIGS = (("ar", "none"), ("dflash", "DFLASH"), ("eagle", "EAGLE"))
TPS = (1, 2)
LADDER = (1, 2, 4, 8, 16, 32, 64)
REPEATS = 3
MAX_TOKENS = 128
CHUNKS = 4
RUN_ID = "scale"
HOST = "gpu1"
WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "wall = time.perf_counter() - t\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(json.dumps({'rc': rc, 'wall_s': wall, 'maxrss_kib': rss}))\n"
)
LOAD_CODE = (
    "import sys\n"
    "from sglbench import results\n"
    "res = results.load(sys.argv[1])\n"
    "tokens = res.request_tokens()\n"
    "assert sum(len(v) for v in tokens.values()) > 0\n"
)


def parse_size(text: str) -> int:
    text = text.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


# -- synthetic run ---------------------------------------------------------------------------------------
def _dist(p50: float) -> dict[str, float]:
    return {"p50": p50, "p90": p50 * 1.6, "p99": p50 * 2.2, "mean": p50 * 1.1}


def _point(conc: int, repeat: int, n_ok: int, tokens: int, rng: np.random.Generator, speed: float) -> dict:
    duration = max(0.5, n_ok * MAX_TOKENS / (conc * 90.0 * speed))
    return {
        "point": f"c{conc}",
        "concurrency": conc,
        "request_rate": None,
        "repeat": repeat,
        "seed": repeat,
        "n_requests": n_ok,
        "n_ok": n_ok,
        "n_err": 0,
        "duration_s": duration,
        "total_output_tokens": tokens,
        "output_throughput_tok_s": tokens / duration * float(rng.normal(1.0, 0.02)),
        "request_throughput": n_ok / duration,
        "ttft_ms": _dist(40.0 + 3 * conc),
        "tpot_ms": _dist(11.0 / speed),
        "itl_ms": _dist(11.0 / speed),
        "e2e_ms": _dist(40.0 + 3 * conc + MAX_TOKENS * 11.0 / speed),
        "accept_length_mean": None if speed == 1.0 else 2.0 * speed,
        "valid": True,
        "invalid_reasons": [],
        "simulated": True,
    }


def _rows(conc: int, repeat: int, n: int, rng: np.random.Generator, speed: float) -> pa.Table:
    """``n`` request rows of one point and repeat, as the load generator writes them (numpy-built)."""
    done = np.where(rng.random(n) < 0.8, MAX_TOKENS, rng.integers(16, MAX_TOKENS, n))
    sent = np.sort(rng.random(n) * 30.0)
    ttft = rng.gamma(4.0, 0.012 + 0.002 * conc, n)
    e2e = ttft + done * rng.normal(0.011 / speed, 0.001, n).clip(0.002)
    frac = np.linspace(0.0, 1.0, CHUNKS)
    chunk_t = (sent + ttft)[:, None] + (e2e - ttft)[:, None] * frac[None, :]
    chunk_tokens = np.maximum(1, np.rint(done[:, None] * np.linspace(1.0 / CHUNKS, 1.0, CHUNKS)[None, :]))
    offsets = pa.array(np.arange(0, (n + 1) * CHUNKS, CHUNKS, dtype=np.int32))
    cats = np.array(["chat", "code", "math", "writing"])[rng.integers(0, 4, n)]
    verify = None if speed == 1.0 else np.maximum(1, np.rint(done / (2.0 * speed))).astype(np.int64)
    cols: dict[str, Any] = {
        "point": pa.array([f"c{conc}"] * n),
        "concurrency": np.full(n, conc),
        "request_rate": pa.nulls(n, pa.float64()),
        "repeat": np.full(n, repeat),
        "seed": np.full(n, repeat),
        "t0_unix": np.full(n, 1_795_940_000.0),
        "simulated": np.ones(n, dtype=bool),
        "idx": np.arange(n),
        "prompt_id": pa.array([f"p{i % 4096}" for i in range(n)]),
        "category": pa.array(cats),
        "warmup": np.zeros(n, dtype=bool),
        "scheduled_s": sent,
        "ready_s": sent,
        "sent_s": sent,
        "first_byte_s": sent + ttft * 0.9,
        "end_s": sent + e2e,
        "chunk_t": pa.ListArray.from_arrays(offsets, pa.array(chunk_t.ravel())),
        "chunk_tokens": pa.ListArray.from_arrays(offsets, pa.array(chunk_tokens.ravel().astype(np.int64))),
        "prompt_tokens": rng.integers(64, 2048, n),
        "completion_tokens": done,
        "cached_tokens": np.zeros(n, dtype=np.int64),
        "spec_verify_ct": pa.nulls(n, pa.int64()) if verify is None else verify,
        "finish_reason": pa.array(np.where(done == MAX_TOKENS, "length", "stop")),
        "http_status": np.full(n, 200),
        "error": pa.nulls(n, pa.string()),
        "bytes_received": done * 90,
        "n_events": np.full(n, CHUNKS),
    }
    return pa.table(cols)


def _record(config: str, algorithm: str, tp: int, points: list[dict]) -> dict:
    return {
        "schema": "sglbench.attempt/1",
        "simulated": True,
        "run_id": RUN_ID,
        "host": HOST,
        "instance": f"{config}-tp{tp}",
        "tp": tp,
        "config": {
            "name": config,
            "algorithm": algorithm,
            "model_path": "/models/m",
            "draft_model_path": None if algorithm == "none" else "/models/draft",
            "port": 30000,
            "gpus": list(range(tp)),
            "args": {},
            "extra_args": [],
            "env": {},
        },
        "argv": ["python3", "-m", "sglang.launch_server"],
        "outcome": "ok",
        "failure": None,
        "timings": {
            "started_at": 1_795_940_000.0,
            "ended_at": 1_795_940_600.0,
            "total_s": 600.0,
            "time_to_ready_s": 40.0,
        },
        "plan": {"max_total_num_tokens": 400_000, "max_running_requests": 64, "fits": True},
        "observed": {"server_info": {"max_total_num_tokens": 401_000, "effective_max_running_requests": 64}},
        "benchmark": {
            "schema": "sglbench.bench/1",
            "simulated": True,
            "meta": {"prompts": "mixed", "api": "native", "simulated": True},
            "points": points,
            "aggregates": [],
        },
    }


def generate(root: Path, n_rows: int, *, jsonl: bool = False, seed: int = 7) -> Path:
    """The synthetic run of ``n_rows`` measured requests under ``root``; its run directory."""
    run = root / RUN_ID
    if run.exists():
        shutil.rmtree(run)
    attempts = [(c, a, tp) for tp in TPS for c, a in CONFIGS]
    per_repeat = max(1, n_rows // (len(attempts) * len(LADDER) * REPEATS))
    extra = n_rows - per_repeat * len(attempts) * len(LADDER) * REPEATS
    rng = np.random.default_rng(seed)
    for i, (config, algorithm, tp) in enumerate(attempts):
        speed = 1.0 if algorithm == "none" else 1.6 + 0.3 * i / len(attempts)
        d = run / HOST / f"{config}-tp{tp}"
        d.mkdir(parents=True)
        points, tables = [], []
        for conc in LADDER:
            for r in range(REPEATS):
                n = per_repeat + (extra if (i, conc, r) == (0, LADDER[0], 0) else 0)
                t = _rows(conc, r, n, rng, speed)
                tables.append(t)
                tokens = int(np.asarray(t.column("completion_tokens")).sum())
                points.append(_point(conc, r, n, tokens, rng, speed * tp**0.5))
        (d / "record.json").write_text(json.dumps(_record(config, algorithm, tp, points), indent=1))
        table = pa.concat_tables(tables)
        if jsonl:
            columnar.export_jsonl(columnar.TableRows(d / "requests.jsonl", table), d / "requests.jsonl")
        else:
            columnar.write_table(table, d / "requests.parquet")
    return run


# -- measurement -----------------------------------------------------------------------------------------
def measure(argv: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv], env=env, capture_output=True, text=True, check=True
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["rc"] not in (0, 1):  # 1: summarize/report flag something in the data, still a full run
        raise SystemExit(f"{argv}: exit {out['rc']}\n{proc.stderr}")
    return out


def steps(run: Path, out: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "load": [py, "-c", LOAD_CODE, str(run)],
        "summarize": [py, "-m", "sglbench", "summarize", str(run), "--format", "md", "-o", str(out / "s.md")],
        "report": [py, "-m", "sglbench", "report", str(run), "-o", str(out / "report.html")],
    }


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k,1M,10M", help="request rows per run, comma-separated")
    ap.add_argument("--jsonl", default="", help="sizes also measured from a requests.jsonl-only copy")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglbench-results-scale"))
    ap.add_argument("--keep", action="store_true", help="keep the generated runs")
    args = ap.parse_args()
    cases = [(parse_size(s), "parquet") for s in args.sizes.split(",") if s]
    cases += [(parse_size(s), "jsonl") for s in args.jsonl.split(",") if s]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {loadavg()}")
    results = []
    for n, kind in cases:
        root = args.work / f"{label(n)}-{kind}"
        t = time.perf_counter()
        run = generate(root, n, jsonl=kind == "jsonl")
        gen_s = time.perf_counter() - t
        size = sum(p.stat().st_size for p in run.rglob("requests.*"))
        row: dict[str, Any] = {"rows": n, "kind": kind, "files_mb": size / 2**20, "gen_s": gen_s}
        out = root / "out"
        out.mkdir(exist_ok=True)
        for step, argv in steps(run, out).items():
            m = measure(argv)
            row[f"{step}_s"], row[f"{step}_mib"] = m["wall_s"], m["maxrss_kib"] / 1024
        row["loadavg"] = loadavg()
        results.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(root)
    print()
    print(table(results))
    print(f"\n# done {time.strftime('%H:%M:%S UTC', time.gmtime())}, load average {loadavg()}")
    return 0


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| rows | files | request files MB | load s | load MiB | summarize s | summarize MiB | report s | "
        "report MiB | summarize growth (time / RSS) per 10x | load avg after |"
    )
    lines = [head, "|" + "---|" * 11]
    prev: dict[str, dict[str, Any]] = {}
    for r in results:
        p = prev.get(r["kind"])
        growth = "-"
        if p is not None and r["rows"] == 10 * p["rows"]:
            growth = (
                f"{r['summarize_s'] / p['summarize_s']:.1f}x / {r['summarize_mib'] / p['summarize_mib']:.1f}x"
            )
        lines.append(
            f"| {label(r['rows'])} | {r['kind']} | {r['files_mb']:.1f} | {r['load_s']:.2f} | "
            f"{r['load_mib']:.0f} | {r['summarize_s']:.2f} | {r['summarize_mib']:.0f} | "
            f"{r['report_s']:.2f} | {r['report_mib']:.0f} | {growth} | {r['loadavg']} |"
        )
        prev[r["kind"]] = r
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
