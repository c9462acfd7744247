"""Builds ``record.json`` files shaped like the Ansible side writes them (sglbench.attempt/1 with a
sglbench.bench/1 summary in ``benchmark``), so controller-side tests run on constructed data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def dist(p50: float, p99: float | None = None, mean: float | None = None) -> dict[str, Any]:
    p99 = p50 * 2 if p99 is None else p99
    return {"p50": p50, "p90": (p50 + p99) / 2, "p95": p99, "p99": p99, "mean": mean or p50, "n": 10}


def point(
    concurrency: int,
    repeat: int,
    tok_s: float,
    *,
    duration_s: float = 10.0,
    ttft: float = 50.0,
    itl: float = 10.0,
    accept: float | None = None,
    valid: bool = True,
    n_ok: int = 10,
) -> dict[str, Any]:
    return {
        "point": f"c{concurrency}",
        "concurrency": concurrency,
        "request_rate": None,
        "repeat": repeat,
        "seed": repeat,
        "n_requests": n_ok,
        "n_ok": n_ok,
        "n_err": 0,
        "duration_s": duration_s,
        "total_output_tokens": int(tok_s * duration_s),
        "output_throughput_tok_s": tok_s,
        "request_throughput": n_ok / duration_s,
        "ttft_ms": dist(ttft),
        "tpot_ms": dist(itl),
        "itl_ms": dist(itl),
        "e2e_ms": dist(ttft + 100 * itl),
        "accept_length_mean": accept,
        "valid": valid,
        "invalid_reasons": [] if valid else ["client CPU 95% of one core > 90%"],
        "simulated": True,
    }


def bench(points: list[dict[str, Any]], prompts: str = "chat", simulated: bool = True) -> dict[str, Any]:
    return {
        "schema": "sglbench.bench/1",
        "simulated": simulated,
        "meta": {"prompts": prompts, "api": "native", "simulated": simulated},
        "points": points,
        "aggregates": [],
    }


def plan(kv: int = 100_000, mrr: int = 8, fits: bool = True, **extra: Any) -> dict[str, Any]:
    d = {
        "max_total_num_tokens": kv,
        "max_running_requests": mrr,
        "fits": fits,
        "failure": None if fits else {"kind": "zero_requests", "message": "max_running_request is zero"},
        "gpu_mem_gib": 96.0,
        "weights_gib": 50.0,
        "draft_weights_gib": 2.0,
        "kv_cache_gib": 20.0,
        "mamba_conv_gib": 1.0,
        "mamba_ssm_gib": 4.0,
        "spec_intermediate_ssm_gib": 3.0,
        "spec_intermediate_conv_gib": 0.5,
        "cuda_graph_gib": 2.0,
        "mem_fraction_static": 0.85,
        "recommendations": []
        if fits
        else [
            {
                "flags": {"max_running_requests": 4},
                "max_total_num_tokens": kv,
                "max_running_requests": 4,
                "why": "4 Mamba slots fit",
                "rank": 0,
            }
        ],
    }
    d.update(extra)
    return d


def record(
    *,
    run_id: str = "run1",
    host: str = "gpu1",
    config: str = "ar",
    algorithm: str = "none",
    tp: int = 1,
    outcome: str = "ok",
    benchmark: Any = None,
    failure: dict[str, Any] | None = None,
    plan_: dict[str, Any] | None = None,
    kv_observed: int | None = 100_000,
    mrr_observed: int | None = 8,
    simulated: bool = True,
    model_path: str = "/models/m",
) -> dict[str, Any]:
    return {
        "schema": "sglbench.attempt/1",
        "simulated": simulated,
        "run_id": run_id,
        "host": host,
        "instance": f"{config}-tp{tp}",
        "tp": tp,
        "config": {
            "name": config,
            "algorithm": algorithm,
            "model_path": model_path,
            "draft_model_path": None if algorithm == "none" else "/models/draft",
            "port": 30000,
            "gpus": list(range(tp)),
            "args": {},
            "extra_args": [],
            "env": {},
        },
        "unit": {"name": f"sglang-{config}-tp{tp}.service", "file": "unit.service", "invocation_id": None},
        "argv": ["python3", "-m", "sglang.launch_server"],
        "outcome": outcome,
        "failure": failure,
        "timings": {"started_at": 1000.0, "ended_at": 1060.0, "total_s": 60.0, "time_to_ready_s": 12.5},
        "plan": plan_,
        "observed": {
            "server_info": None
            if kv_observed is None
            else {"max_total_num_tokens": kv_observed, "effective_max_running_requests": mrr_observed},
            "startup": None,
            "http_statuses": None,
        },
        "benchmark": benchmark,
        "journal": {"file": None, "entries": None},
    }


def write(root: Path, rec: dict[str, Any], requests: list[dict[str, Any]] | None = None) -> Path:
    d = root / rec["run_id"] / rec["host"] / rec["instance"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "record.json").write_text(json.dumps(rec, indent=1))
    if requests is not None:
        (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    return d / "record.json"


def request(
    concurrency: int,
    repeat: int,
    idx: int,
    tokens: int,
    *,
    category: str = "chat",
    verify: int | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "point": f"c{concurrency}",
        "concurrency": concurrency,
        "request_rate": None,
        "repeat": repeat,
        "seed": repeat,
        "t0_unix": 0.0,
        "simulated": True,
        "idx": idx,
        "prompt_id": f"p{idx}",
        "category": category,
        "warmup": False,
        "scheduled_s": 0.0,
        "ready_s": 0.0,
        "sent_s": 0.1,
        "first_byte_s": 0.15,
        "end_s": None if error else 1.1,
        "chunk_t": [0.2, 0.6, 1.1],
        "chunk_tokens": [1, tokens // 2, tokens],
        "chunk_token_source": "server",
        "prompt_tokens": 20,
        "completion_tokens": tokens,
        "token_source": "server",
        "cached_tokens": 0,
        "spec_verify_ct": verify,
        "spec_accept_length": None,
        "finish_reason": "length",
        "http_status": 200,
        "error": error,
        "bytes_received": 100,
        "n_events": 3,
    }
