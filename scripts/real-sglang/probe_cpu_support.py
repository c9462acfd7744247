"""Try each model kind and speculative algorithm on the real SGLang CPU engine; record what serves.

    python3 scripts/real-sglang/probe_cpu_support.py [--out FILE] [--only NAME ...] [--port 31900]

Needs the env from scripts/real-sglang-env.sh (exit 3 when it is missing). One server at a time:
each case starts scripts/real-sglang/serve.sh with the tiny models, and, if it gets ready, sends
one /generate (16 tokens, ignore_eos) and reads the speculative fields of meta_info and
/server_info, then stops the server with SIGTERM. A case that does not get ready keeps the last
error line of the server's log. Takes ~30-60 s per case on 2 cores. Writes JSON (default
tests/fixtures/real_sglang/<version>/cpu_support.json) and prints a one-line summary per case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SERVE = HERE / "serve.sh"
VERSION = re.search(r"^SGLANG_VERSION=(\S+)", (HERE.parent / "real-sglang-env.sh").read_text(), re.M)[1]
ROOT = Path(os.environ.get("SGLBENCH_REAL_SGLANG_HOME", f"/var/cache/sglbench/real-sglang-{VERSION}"))
M = ROOT / "models"

SPEC3 = [
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
]
CASES: list[tuple[str, str, list[str]]] = [
    ("dense-qwen2", "tiny-qwen2", []),
    ("dense-qwen3", "tiny-qwen3", []),
    # extra_buffer (the default) is refused on the CPU platform; no_buffer needs no overlap schedule.
    (
        "hybrid-qwen3-next",
        "tiny-qwen3-next",
        ["--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"],
    ),
    ("hybrid-swa-gpt-oss", "tiny-gpt-oss", []),
    ("NGRAM", "tiny-qwen2", ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"]),
    (
        "STANDALONE",
        "tiny-qwen2",
        [
            "--speculative-algorithm",
            "STANDALONE",
            "--speculative-draft-model-path",
            str(M / "tiny-qwen2-draft"),
            *SPEC3,
        ],
    ),
    (
        "EAGLE",
        "tiny-qwen2",
        [
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-draft-model-path",
            str(M / "tiny-eagle-qwen2"),
            *SPEC3,
        ],
    ),
    (
        "EAGLE3",
        "tiny-qwen3",
        [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            str(M / "tiny-eagle3-qwen3"),
            *SPEC3,
        ],
    ),
    (
        "DFLASH",
        "tiny-qwen3",
        [
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-draft-model-path",
            str(M / "tiny-dflash-qwen3"),
            "--speculative-num-draft-tokens",
            "4",
        ],
    ),
]

# Lines in a failed start's log that say why (the last match wins).
ERROR_RE = re.compile(
    r"(Error|Exception|error:|Traceback|Killed|exit code|not supported|only supported)", re.I
)
NOISE_RE = re.compile(
    r"(UserWarning|warnings\.warn|Ignore import error|FastAPIDeprecationWarning|"
    r"Fail to set RLIMIT_NOFILE)"
)


def why(log: Path) -> str:
    """The last error-looking line of a log, with the "- ..." lines that continue it."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    hits = [i for i, ln in enumerate(lines) if ERROR_RE.search(ln) and not NOISE_RE.search(ln)]
    if not hits:
        return lines[-1][:500] if lines else "(empty log)"
    i = hits[-1]
    text = lines[i]
    for ln in lines[i + 1 :]:
        if not ln.startswith("- "):
            break
        text += " " + ln
    return text[:500]


def post(url: str, body: dict, timeout: float = 120) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def get(url: str, timeout: float = 30) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def run_case(name: str, model: str, extra: list[str], port: int, timeout: float) -> dict:
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"real-sglang-probe-{name}.log"
    cmd = [
        str(SERVE),
        "--port",
        str(port),
        "--model",
        model,
        "--timeout",
        str(timeout),
        "--log",
        str(log),
        "--",
        *extra,
    ]
    rec: dict = {
        "case": name,
        "model": model,
        "args": [a.replace(str(ROOT), "$SGLBENCH_REAL_SGLANG_HOME") for a in extra],
    }
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY"):
            proc.wait(timeout=60)
            rec |= {"serves": False, "seconds": round(time.monotonic() - t0, 1), "error": why(log)}
            return rec
        fields = dict(kv.split("=", 1) for kv in line.split()[1:])
        url = fields["url"]
        rec |= {"serves": True, "start_seconds": float(fields["seconds"])}
        try:
            out = post(
                f"{url}/generate",
                {
                    "text": "The quick brown fox jumps over the lazy dog.",
                    "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True},
                },
            )
            meta = out["meta_info"]
            rec["generate"] = {
                "completion_tokens": meta.get("completion_tokens"),
                "spec_meta_info": {k: v for k, v in meta.items() if "spec" in k},
            }
        except Exception as e:  # the server started but cannot generate: that is a result too
            rec["serves"] = False
            rec["error"] = f"generate: {type(e).__name__}: {e}; log: {why(log)}"
        try:  # what the server says of its speculative set-up (only when one was asked for)
            info = get(f"{url}/server_info")
            states = info.get("internal_states") or [{}]
            if "--speculative-algorithm" in extra:
                rec["internal_states_spec"] = {
                    k: v for k, v in states[0].items() if k.startswith("speculative_") and v is not None
                }
                rec["avg_spec_accept_length"] = states[0].get("avg_spec_accept_length")
        except Exception as e:
            rec["server_info_error"] = f"{type(e).__name__}: {e}"
        return rec
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, default=REPO / "tests/fixtures/real_sglang" / VERSION / "cpu_support.json"
    )
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    ap.add_argument("--port", type=int, default=31900)
    ap.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    if not (ROOT / "env.sh").exists():
        print(f"probe: no real SGLang env at {ROOT}; run `make real-sglang`", file=sys.stderr)
        return 3
    results = json.loads(args.out.read_text())["cases"] if args.out.exists() else {}
    for name, model, extra in CASES:
        if args.only and name not in args.only:
            continue
        rec = run_case(name, model, extra, args.port, args.timeout)
        results[name] = rec
        state = (
            f"serves (ready in {rec.get('start_seconds')} s)" if rec["serves"] else f"FAILS: {rec['error']}"
        )
        print(f"{name:18} {state}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "sglang": VERSION,
        "how": "scripts/real-sglang/probe_cpu_support.py (serve.sh defaults: "
        "--device cpu --disable-cuda-graph --attention-backend torch_native --load-format dummy "
        "--max-total-tokens 16384, SGLANG_USE_CPU_ENGINE=1, libcuda stand-in)",
        "cases": {n: results[n] for n, _, _ in CASES if n in results},
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
