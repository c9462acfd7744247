"""`sglbench bench`: the arguments (and the load arguments `sglbench calibrate` shares); the benchmark
is run by `python/sglbench/bench.py`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sglbench.bench import run_bench
from sglbench.hostlib import loadgen, metrics, prompts

THRESHOLDS_HELP = (
    "Client self-check: a point is marked invalid (summary.json: valid=false, invalid_reasons) when the "
    f"p99 send lateness exceeds {metrics.MAX_SEND_LATENESS_P99_MS} ms, the p99 event-loop lag exceeds "
    f"{metrics.MAX_LOOP_LAG_P99_MS} ms, the client process used more than "
    f"{metrics.MAX_CLIENT_CPU_FRACTION:.0%} of one core, it waited more than "
    f"{metrics.MAX_RUNQUEUE_WAIT_FRACTION:.0%} of the time for a CPU (Linux schedstat: other processes "
    f"starved it), or (rate mode) fewer than {metrics.MIN_ACHIEVED_RATE_FRACTION:.0%} of the target "
    "request rate were sent. With --procs P > 1 the CPU and CPU-wait checks apply to each client process. "
    "A point is also invalid when no request succeeded or when more than --max-error-rate of its requests "
    "failed (default 0: any failed request). `sglbench bench` exits 1 when a point is invalid."
)

PROCS_HELP = (
    "client processes per point (default 1, at most {max}). One process is one event loop on one core and "
    "parses about 100k streamed chunks/s (benchmarks/client_ceiling.md); when points are flagged for client "
    "CPU, use more. P > 1 forks P processes per point: each opens its own connections and runs its share of "
    "the warmup, then all start at one common instant. Closed loop: the concurrency is split over them "
    "(every level must be >= P) and process k sends requests k, k+P, ... of the same prompt sequence; "
    "--request-rate: the one Poisson schedule is dealt out the same way and a --concurrency cap is split. "
    "The summary's client.per_process gives each process's CPU."
)


def add_load_args(p: argparse.ArgumentParser, *, calibrate: bool) -> None:
    p.add_argument(
        "--api",
        choices=loadgen.api_mod.APIS,
        default="native",
        help="native = POST /generate (default: server token counts + spec acceptance per request); "
        "openai = /v1/completions; openai-chat = /v1/chat/completions",
    )
    p.add_argument(
        "--concurrency",
        help="comma-separated closed-loop concurrency levels, e.g. 1,4,16"
        + (
            " (default 1,64,512; with --procs P: P,64,512)"
            if calibrate
            else "; default 1,2,4,… up to --max-concurrency"
        )
        + "; with --request-rate: a single in-flight cap",
    )
    p.add_argument(
        "--num-prompts",
        type=int,
        default=None,
        help=f"requests per point and repeat (default {2000 if calibrate else 200}; no cap with --duration)",
    )
    p.add_argument("--duration", type=float, default=None, help="stop sending new requests after S seconds")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help=f"output tokens requested per request (default {128 if calibrate else 256})",
    )
    p.add_argument(
        "--warmup", type=int, default=None, help="warmup requests per point (default: concurrency, ≤64)"
    )
    p.add_argument("--seed", type=int, default=0, help="base seed; repeat r uses seed+r (default 0)")
    p.add_argument("--procs", type=int, default=1, help=PROCS_HELP.format(max=loadgen.MAX_PROCS))
    p.add_argument("--out", type=Path, default=None, help="directory for summary.json and requests.jsonl")


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "bench",
        help="run the prompt benchmark against a running SGLang server",
        description="Drive an SGLang server with streamed requests and write per-request records and a "
        "per-point summary. " + THRESHOLDS_HELP,
    )
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    add_load_args(p, calibrate=False)
    p.add_argument("--model", help="model name for the OpenAI routes (default: first id of /v1/models)")
    p.add_argument(
        "--prompts",
        default=prompts.DEFAULT_PROMPT_SET,
        help=f"shipped set ({', '.join((*prompts.SHIPPED_SETS, prompts.MIXED_SET))}; comma-join several), "
        "synthetic:INPUT_LEN (random token ids, native/openai only), sharegpt:PATH (first turns of a "
        "ShareGPT file), shared-prefix:NxM[:SYS_WORDS:Q_WORDS] (N system prompts x M questions, seeded by "
        "--seed), multi-turn:SxT[:SYS_WORDS:USER_WORDS] (S sessions of T turns, each sent with its history, "
        "seeded by --seed), sharegpt-turns:PATH (every user turn of a ShareGPT file, one session per "
        "conversation), trace:PATH (a Mooncake trace; each --request-rate replays it at that mean rate), "
        "long-context:TOKENS[xCOUNT], specbench:PATH (Spec-Bench/SPEED-Bench questions by category), or a "
        "JSONL file",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        help="cap of the default ladder (default: server's effective "
        "max running requests from /server_info, else 64)",
    )
    p.add_argument("--request-rate", help="Poisson request rate(s) in req/s, comma-separated (open loop)")
    p.add_argument(
        "--repeats", type=int, default=3, help="repeats per point with seeds seed..seed+R-1 (default 3)"
    )
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-new-tokens tokens")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0 = greedy)")
    p.add_argument("--api-key-file", help="file holding the server API key (sent as Authorization: Bearer)")
    p.add_argument("--slo-ttft-ms", type=float, help="goodput SLO on TTFT (ms)")
    p.add_argument("--slo-tpot-ms", type=float, help="goodput SLO on TPOT (ms)")
    p.add_argument("--slo-e2e-ms", type=float, help="goodput SLO on end-to-end latency (ms)")
    p.add_argument("--no-flush-cache", action="store_true", help="do not POST /flush_cache between points")
    p.add_argument(
        "--simulated",
        action="store_true",
        default=None,
        help="label results as simulated (default: ask the server; the stand-in says so itself)",
    )
    p.add_argument(
        "--request-timeout", type=float, default=600.0, help="per-request timeout in s (default 600)"
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=metrics.DEFAULT_MAX_ERROR_RATE,
        metavar="FRACTION",
        help="largest fraction of failed requests a valid point may have (default 0: any failed request "
        "makes the point invalid, e.g. a server that died mid-point); 0.01 tolerates 1%%",
    )
    p.add_argument("--overwrite", action="store_true", help="replace results already in --out")
    p.set_defaults(func=run_bench)
