"""SGLang server log lines: the regexes (written from SGLang's format strings) and two readers.

Standard library only; shipped to the GPU host as ``module_utils/sglbench_hostlib/sglang_logs.py``. The
stand-in's tests parse its output with these same regexes, so the stand-in and the readers cannot
drift apart silently.

- :func:`parse_startup_log` pulls the memory/capacity numbers out of a startup log (journal text).
- :func:`classify_failure` names why a start failed: ``zero_requests``, ``not_enough_memory``,
  ``cuda_oom``, ``bad_args``, ``port_in_use``, ``readiness_timeout`` or ``unknown``.
- :func:`start_journal` reads one start's journal entries with both (what the record keeps of it).

Log lines look like ``[2026-05-01 12:00:00 TP0] message``; the `` TPn`` tag (and DPn/PPn/...)
appears only when that parallel size is > 1. All "GB" figures are GiB.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .systemd_unit import JournalEntry, first_entry_time, messages_text, render_journal

PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)(?P<tags>(?: "
    r"(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?"
)
_NUM = r"(\d+(?:\.\d+)?)"

INIT_END = re.compile(r"Init torch distributed ends\. elapsed=(?P<s>[\d.]+) s, mem usage=(?P<mem>[\d.]+) GB")
LOAD_BEGIN = re.compile(r"Load weight begin\. avail mem=(?P<avail>[\d.]+) GB")
LOAD_END = re.compile(
    r"Load weight end\. elapsed=(?P<s>[\d.]+) s, type=(?P<cls>[\w.]+), .*?avail mem=(?P<avail>[\d.]+) GB, "
    r"mem usage=(?P<weights>-?[\d.]+) GB"  # the CPU engine can log -0.00 (host RAM moved meanwhile)
)
KV_DTYPE = re.compile(r"Using KV cache dtype: (?P<dtype>[\w.]+)")
KV_ALLOC = re.compile(
    r"KV Cache is allocated\. (?:dtype: (?P<dtype>[\w.]+), )?#tokens: (?P<tokens>\d+), "
    r"(?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: (?P<kv>[\d.]+) GB)"
)
MAMBA = re.compile(
    r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<slots>\d+), conv_state size: (?P<conv>[\d.]+)GB, "
    r"ssm_state size: (?P<ssm>[\d.]+)GB(?: intermediate_ssm_state_cache size: (?P<issm>[\d.]+)GB "
    r"intermediate_conv_window_cache size: (?P<iconv>[\d.]+)GB)?"
)
MAX_NUM_REQS = re.compile(
    r"Max concurrent requests \(per dp worker\) from the finalized token capacity: max_num_reqs=(?P<n>\d+)\."
)
POOL_END = re.compile(r"Memory pool end\. avail mem=(?P<avail>[\d.]+) GB")
GRAPH_BEGIN = re.compile(
    r"Capture cuda graph begin\. This can take up to several minutes\. avail mem=(?P<avail>[\d.]+) GB"
    r"|Capture (?:[\w ]+ )?(?:CUDA|CPU|NPU|XPU) graph begin\. .*?avail mem=(?P<avail2>[\d.]+) GB"
)
# Before 0.5.23: ``Capture cuda graph end. Time elapsed: ...``; 0.5.23 names the graph (``Capture target
# decode CUDA graph end. bs=[1, 2], elapsed=1.23 s, mem usage=0.50 GB, avail mem=10.00 GB.``; the prefill
# graph has no ``bs=``; from cuda_graph_setup.py, not seen on the CPU engine, which captures none).
GRAPH_END = re.compile(
    r"Capture cuda graph end\. Time elapsed: (?P<s>[\d.]+) s\. mem usage=(?P<mem>[\d.]+) GB\. "
    r"avail mem=(?P<avail>[\d.]+) GB\."
    r"|Capture (?:[\w ]+ )?(?:CUDA|CPU|NPU|XPU) graph end\. (?:bs=\[[^\]]*\], )?elapsed=(?P<s2>[\d.]+) s, "
    r"mem usage=(?P<mem2>[\d.]+) GB, "
    r"avail mem=(?P<avail2>[\d.]+) GB\."
)
# The scheduler's summary line; the CPU engine says ``available_cpu_mem=`` (free host RAM) where a GPU
# says ``available_gpu_mem=`` (SGLang 0.5.23 scheduler.py: ``'available_cpu_mem' if device == 'cpu'``).
SUMMARY = re.compile(
    r"max_total_num_tokens=(?P<tok>\d+), chunked_prefill_size=(?P<cps>-?\d+), "
    r"max_prefill_tokens=(?P<mpt>\d+), "
    r"max_running_requests=(?P<mrr>\d+), context_len=(?P<ctx>\d+), "
    r"available_(?P<device>gpu|cpu)_mem=(?P<avail>[\d.]+) GB"
)
UVICORN = re.compile(r"Uvicorn running on (?P<url>https?://(?P<host>[^:\s]+):(?P<port>\d+))")
READY_TEXT = "The server is fired up and ready to roll!"
READY = re.compile(re.escape(READY_TEXT))
DECODE = re.compile(
    r"Decode batch.*?#running-req: (?P<run>\d+)(?:.*?accept len: (?P<acc>[\d.]+), accept rate: "
    r"(?P<rate>[\d.]+),)?"
    r".*?gen throughput \(token/s\): (?P<tps>[\d.]+)"
)
DFLASH_INIT = re.compile(r"Initialized DFLASH draft runner\..*?block_size=(?P<block>\d+)")

ZERO_REQ = re.compile(r"max_running_request is zero|state cache is too small to serve|capture_bs=\[0\]")
NOT_ENOUGH = re.compile(
    r"Not enough memory\. Please try to increase --mem-fraction-static|Loaded weights leave no GPU memory"
    r"|Not enough GPU memory for hybrid|Memory pool size is too small"
)
CUDA_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")
PORT_IN_USE = re.compile(r"address already in use|\[Errno 98\]|Address already in use")
BAD_ARGS = re.compile(
    r"error: unrecognized arguments|error: argument |: error: |invalid choice|No module named"
    r"|ModuleNotFoundError|ImportError|does not appear to have a file named config\.json"
    r"|is not a valid JSON file|the following arguments are required"
)
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception)|AssertionError|SafetensorError)\b.*")

FAILURE_CAUSES = (
    "zero_requests",
    "not_enough_memory",
    "cuda_oom",
    "bad_args",
    "port_in_use",
    "readiness_timeout",
    "unknown",
)


def split_line(line: str) -> tuple[str, int | None]:
    """``(message, tp_rank)``; the rank is None when the line has no TP tag (TP1 or main process)."""
    match = PREFIX.match(line)
    if not match:
        return line, None
    tp = re.search(r"TP(\d+)", match.group("tags") or "")
    return line[match.end() :], int(tp.group(1)) if tp else None


def _f(value: str | None) -> float | None:
    return float(value) if value is not None else None


def _empty_facts() -> dict[str, Any]:
    return {
        "tp_size": 1,
        "load_begin_avail_gib": None,
        "weights_gib": None,
        "draft_weights_gib": None,
        "model_class": None,
        "draft_model_class": None,
        "kv_dtype": None,
        "kv": None,
        "draft_kv": None,
        "mamba": None,
        "max_num_reqs": None,
        "pool_end_avail_gib": None,
        "cuda_graph": [],
        "summary": None,
        "max_total_num_tokens": None,
        "max_running_requests": None,
        "context_len": None,
        "available_gpu_mem_gib": None,
        "available_cpu_mem_gib": None,
        "uvicorn": None,
        "ready": False,
        "decode": [],
        "dflash_block_size": None,
    }


def _memory_line(
    out: dict[str, Any], loads: list[re.Match[str]], kvs: list[dict[str, Any]], msg: str
) -> bool:
    """Weights, KV and Mamba pools, CUDA graphs: the facts of one line into ``out``; False if none."""
    if m := LOAD_BEGIN.search(msg):
        if out["load_begin_avail_gib"] is None:
            out["load_begin_avail_gib"] = float(m.group("avail"))
    elif m := LOAD_END.search(msg):
        loads.append(m)
    elif m := KV_ALLOC.search(msg):
        kvs.append(
            {
                "tokens": int(m.group("tokens")),
                "dtype": m.group("dtype"),
                "k_gib": _f(m.group("k")),
                "v_gib": _f(m.group("v")),
                "kv_gib": _f(m.group("kv")),
            }
        )
    elif m := KV_DTYPE.search(msg):
        out["kv_dtype"] = out["kv_dtype"] or m.group("dtype")
    elif m := MAMBA.search(msg):
        out["mamba"] = {
            "slots": int(m.group("slots")),
            "conv_gib": float(m.group("conv")),
            "ssm_gib": float(m.group("ssm")),
            "intermediate_ssm_gib": _f(m.group("issm")),
            "intermediate_conv_gib": _f(m.group("iconv")),
        }
    elif m := MAX_NUM_REQS.search(msg):
        out["max_num_reqs"] = int(m.group("n"))
    elif m := POOL_END.search(msg):
        if out["pool_end_avail_gib"] is None:
            out["pool_end_avail_gib"] = float(m.group("avail"))
    elif m := GRAPH_END.search(msg):
        out["cuda_graph"].append(
            {
                "elapsed_s": float(m.group("s") or m.group("s2")),
                "mem_gib": float(m.group("mem") or m.group("mem2")),
                "avail_gib": float(m.group("avail") or m.group("avail2")),
            }
        )
    else:
        return False
    return True


def _serving_line(out: dict[str, Any], msg: str) -> None:
    """Summary, HTTP server, readiness, decode batches, DFLASH: the facts of one line into ``out``."""
    if m := SUMMARY.search(msg):
        out["summary"] = {
            "max_total_num_tokens": int(m.group("tok")),
            "chunked_prefill_size": int(m.group("cps")),
            "max_prefill_tokens": int(m.group("mpt")),
            "max_running_requests": int(m.group("mrr")),
            "context_len": int(m.group("ctx")),
            # the GPU's free memory; None on the CPU engine, whose figure is host RAM
            "available_gpu_mem_gib": float(m.group("avail")) if m.group("device") == "gpu" else None,
            "available_cpu_mem_gib": float(m.group("avail")) if m.group("device") == "cpu" else None,
            "device": m.group("device"),
        }
    elif m := UVICORN.search(msg):
        out["uvicorn"] = {"url": m.group("url"), "host": m.group("host"), "port": int(m.group("port"))}
    elif READY.search(msg):
        out["ready"] = True
    elif m := DECODE.search(msg):
        out["decode"].append(
            {
                "running": int(m.group("run")),
                "accept_len": _f(m.group("acc")),
                "accept_rate": _f(m.group("rate")),
                "gen_throughput": float(m.group("tps")),
            }
        )
    elif m := DFLASH_INIT.search(msg):
        out["dflash_block_size"] = int(m.group("block"))


SUMMARY_KEYS = (
    "max_total_num_tokens",
    "max_running_requests",
    "context_len",
    "available_gpu_mem_gib",
    "available_cpu_mem_gib",
)


def _settle(out: dict[str, Any], loads: list[re.Match[str]], kvs: list[dict[str, Any]]) -> None:
    """Target/draft from the order of the weight and KV lines; the headline numbers from the summary."""
    if loads:
        out["weights_gib"] = float(loads[0].group("weights"))
        out["model_class"] = loads[0].group("cls")
    if len(loads) > 1:
        out["draft_weights_gib"] = float(loads[1].group("weights"))
        out["draft_model_class"] = loads[1].group("cls")
    if kvs:
        out["kv"] = kvs[0]
    if len(kvs) > 1:
        out["draft_kv"] = kvs[1]
    if out["summary"]:
        for key in SUMMARY_KEYS:
            out[key] = out["summary"][key]
    elif kvs:
        out["max_total_num_tokens"] = kvs[0]["tokens"]


def parse_startup_log(text: str) -> dict[str, Any]:
    """Memory/capacity facts from an SGLang startup log (only TP rank 0 or untagged lines count).

    With speculative decoding the first ``Load weight end`` / ``KV Cache is allocated`` lines are
    the target's and the second ones the draft's. Missing facts are None.
    """
    out = _empty_facts()
    loads: list[re.Match[str]] = []
    kvs: list[dict[str, Any]] = []
    max_rank = 0
    for raw in text.splitlines():
        msg, rank = split_line(raw)
        if rank is not None:
            max_rank = max(max_rank, rank)
            if rank != 0:
                continue
        if not _memory_line(out, loads, kvs, msg):
            _serving_line(out, msg)
    out["tp_size"] = max_rank + 1
    _settle(out, loads, kvs)
    return out


def classify_failure(text: str) -> dict[str, Any]:
    """Why did this start fail? ``{"cause": one of FAILURE_CAUSES, "lines": [evidence lines]}``.

    Checked in this order: zero request slots, not enough memory for the pools, CUDA OOM, port in
    use, bad arguments (unknown flag, import error, unreadable model config). With none of those,
    a log that never reached "fired up and ready" is a ``readiness_timeout``; otherwise ``unknown``.
    """
    lines = text.splitlines()
    for cause, pattern in (
        ("zero_requests", ZERO_REQ),
        ("not_enough_memory", NOT_ENOUGH),
        ("cuda_oom", CUDA_OOM),
        ("port_in_use", PORT_IN_USE),
        ("bad_args", BAD_ARGS),
    ):
        hits = [line.strip() for line in lines if pattern.search(line)]
        if hits:
            exceptions = [line.strip() for line in lines if _EXCEPTION_LINE.match(line.strip())]
            evidence = list(dict.fromkeys(hits + exceptions))[:6]
            return {"cause": cause, "lines": evidence}
    if not any(READY.search(line) for line in lines):
        tail = [line.strip() for line in lines if line.strip()][-3:]
        return {"cause": "readiness_timeout", "lines": tail}
    exceptions = [line.strip() for line in lines if _EXCEPTION_LINE.match(line.strip())]
    return {"cause": "unknown", "lines": exceptions[-3:]}


FAILED_WAITS = ("unit_ended", "timeout")


def classify_start(text: str, wait_outcome: str | None, unit_result: str) -> dict[str, Any]:
    """The verdict on one start from its journal text: ``{"cause", "lines"}``, cause None when it did
    not fail (the readiness wait ended well and systemd's result is success or empty). A timed-out
    wait whose log shows nothing better is a ``readiness_timeout``."""
    if wait_outcome not in FAILED_WAITS and unit_result in ("", "success"):
        return {"cause": None, "lines": []}
    found = classify_failure(text)
    cause = found.get("cause")
    if cause in (None, "unknown") and wait_outcome == "timeout":
        cause = "readiness_timeout"
    return {"cause": cause, "lines": list(found.get("lines") or [])}


def start_journal(
    entries: Sequence[JournalEntry], wait_outcome: str | None, unit_result: str
) -> dict[str, Any]:
    """One start's journal as the record keeps it: the rendered text, the entry count, the startup facts,
    the verdict (:func:`classify_start`) and when the server logged that it was ready (Unix time)."""
    text = messages_text(entries)
    verdict = classify_start(text, wait_outcome, unit_result)
    ready_us = first_entry_time(entries, READY_TEXT)
    return {
        "journal": render_journal(entries),
        "entries": len(entries),
        "cause": verdict["cause"],
        "cause_lines": verdict["lines"],
        "startup": parse_startup_log(text),
        "ready_logged_at": None if ready_us is None else ready_us / 1e6,
    }
