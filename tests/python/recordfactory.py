"""Builds ``record.json`` files shaped like the Ansible side writes them (sglbench.attempt/1 with a
sglbench.bench/1 summary in ``benchmark``), so controller-side tests run on constructed data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sglbench.hostlib.telemetry import GPU_COLUMNS


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


def bench(
    points: list[dict[str, Any]],
    prompts: str = "chat",
    simulated: bool = True,
    slo: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A benchmark summary; ``slo`` is the benchmark's declared SLO block (``meta.slo``)."""
    meta: dict[str, Any] = {"prompts": prompts, "api": "native", "simulated": simulated}
    if slo is not None:
        meta["slo"] = slo
    return {
        "schema": "sglbench.bench/1",
        "simulated": simulated,
        "meta": meta,
        "points": points,
        "aggregates": [],
    }


def curve(
    root: Path,
    config: str,
    tok_s: dict[int, float],
    *,
    algorithm: str = "none",
    tp: int = 1,
    repeats: int = 3,
    spread: float = 0.02,
    itl: dict[int, float] | None = None,
    ttft: dict[int, float] | None = None,
    mrr: int = 64,
    kv: int = 1_000_000,
    slo: dict[str, float] | None = None,
    run_id: str = "run1",
    host: str = "gpu1",
) -> Path:
    """One config's closed-loop curve: at each concurrency, ``repeats`` repeats of ``tok_s`` x (1 +
    ``spread`` x (r - middle)); ITL/TPOT default to concurrency x 1000 / tok/s (each request's share)."""
    pts = []
    for c, v in tok_s.items():
        for r in range(repeats):
            value = v * (1 + spread * (r - (repeats - 1) / 2))
            step = itl[c] if itl else 1000.0 * c / v
            pts.append(
                point(
                    c,
                    r,
                    value,
                    itl=step,
                    ttft=ttft[c] if ttft else 50.0,
                    accept=None if algorithm == "none" else 3.0,
                )
            )
    rec = record(
        run_id=run_id,
        host=host,
        config=config,
        algorithm=algorithm,
        tp=tp,
        benchmark=bench(pts, slo=slo),
        kv_observed=kv,
        mrr_observed=mrr,
    )
    return write(root, rec)


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
    timings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One record; ``timings`` adds to (or replaces keys of) the default timings block."""
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
        "timings": {
            "started_at": 1_795_940_000.0,
            "ended_at": 1_795_940_060.0,
            "total_s": 60.0,
            "time_to_ready_s": 12.5 if outcome == "ok" else None,
            **(timings or {}),
        },
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


def demo_plan(tp: int, spec: bool, mrr: int, *, fits: bool = True) -> dict[str, Any]:
    """A capacity plan whose parts add up the way Plan.to_dict() does (96 GiB GPU, 27B hybrid model)."""
    total, ctx = 95.59, 1.35 + (0.5 if tp > 1 else 0.0)
    weights, draft = 50.95 / tp, (3.22 / tp if spec else 0.0)
    mamba = 1.29 if spec else 2.6
    spec_res = 4.59 if spec else 0.0
    static = total * 0.75 if spec else total * 0.85
    kv = max(0.5, static - weights - draft - mamba - spec_res)
    kv_tokens = int(kv * 2**30 / (86016 if spec else 65536) * tp)
    return plan(
        kv=kv_tokens,
        mrr=mrr,
        fits=fits,
        gpu_mem_gib=total,
        weights_gib=weights,
        draft_weights_gib=draft,
        k_size_gib=kv / 2,
        v_size_gib=kv / 2,
        kv_cache_gib=kv,
        mamba_conv_gib=0.03,
        mamba_ssm_gib=mamba - 0.03,
        spec_intermediate_ssm_gib=spec_res,
        spec_intermediate_conv_gib=0.0,
        cuda_graph_gib=1.0,
        available_gpu_mem_gib=total - ctx - static - 1.0,
    )


def demo_campaign(
    root: Path,
    run_id: str = "demo",
    seed: int = 7,
    with_requests: bool = True,
    tps: tuple[int, ...] = (1, 4, 8),
    concurrencies: tuple[int, ...] = (1, 2, 4, 8),
) -> Path:
    """A realistic constructed campaign (3 TP sizes, AR + DFlash + DDTree, a planned skip and a failure,
    per-request rows with prompt categories) for report and summary tests."""
    import random

    rnd = random.Random(seed)
    cats = {"math": 1.25, "code": 1.15, "chat": 0.9, "summarize": 0.8}
    configs = [
        ("qwen27b-ar", "none", 1.0, 0.0),
        ("qwen27b-dflash", "DFLASH", 2.0, 3.4),
        ("qwen27b-ddtree-b16", "DDTREE", 2.3, 4.1),
    ]
    t0 = 1_795_940_000.0
    for tp in tps:
        for name, alg, mult, acc in configs:
            spec = acc > 0
            mrr = 4 if spec else 64
            pl = demo_plan(tp, spec, mrr)
            if tp == 8 and name == "qwen27b-ddtree-b16":
                failure = {
                    "phase": "health",
                    "cause": "cuda_oom",
                    "message": "sglang-qwen27b-ddtree-b16-tp8.service ended while starting",
                    "lines": [
                        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has "
                        "a total capacity of 95.59 GiB of which 1.12 GiB is free."
                    ],
                }
                write(
                    root,
                    record(
                        run_id=run_id,
                        config=name,
                        algorithm=alg,
                        tp=tp,
                        outcome="failed",
                        failure=failure,
                        plan_=pl,
                        kv_observed=None,
                    ),
                )
                continue
            pts, reqs = [], []
            for c in concurrencies:
                for r in range(3):
                    tput = 38.0 * (c**0.8) * (tp**0.55) * mult * (1 - 0.06 * spec * c / 8)
                    tput *= 1 + rnd.uniform(-0.04, 0.04)
                    dur = 20.0
                    n = 8 * c
                    toks = [rnd.choice((96, 160, 256, 256, 256)) for _ in range(n)]
                    dur = sum(toks) / tput
                    pts.append(
                        point(
                            c,
                            r,
                            tput,
                            duration_s=dur,
                            ttft=60 + 12 * c / tp + rnd.uniform(0, 8),
                            itl=1000.0 * c / tput,
                            accept=acc or None,
                            n_ok=n,
                        )
                    )
                    if with_requests:
                        for i, k in enumerate(toks):
                            cat = list(cats)[i % 4]
                            verify = max(1, round(k / (acc * cats[cat]))) if spec else None
                            rq = request(c, r, i, k, category=cat, verify=verify)
                            rq["sent_s"] = rnd.uniform(0, dur * 0.7)
                            ttft = (0.05 + 0.01 * c / tp) * rnd.lognormvariate(0, 0.3)
                            e2e = ttft + k / (tput / c) * rnd.lognormvariate(0, 0.15)
                            rq["chunk_t"] = [
                                rq["sent_s"] + ttft,
                                rq["sent_s"] + (ttft + e2e) / 2,
                                rq["sent_s"] + e2e,
                            ]
                            rq["end_s"] = rq["sent_s"] + e2e
                            reqs.append(rq)
            rec = record(
                run_id=run_id,
                config=name,
                algorithm=alg,
                tp=tp,
                benchmark=bench(pts, prompts="mixed"),
                plan_=pl,
                kv_observed=int(pl["max_total_num_tokens"] * rnd.uniform(0.97, 1.01)),
                mrr_observed=mrr,
            )
            rec["timings"].update(
                started_at=t0, ended_at=t0 + 300, time_to_ready_s=round(rnd.uniform(40, 90), 1)
            )
            t0 += 300
            write(root, rec, requests=reqs if with_requests else None)
    skipped = demo_plan(1, True, 0, fits=False)
    skipped["recommendations"] = [
        {
            "flags": {"max_running_requests": 4},
            "max_total_num_tokens": 132_764,
            "max_running_requests": 4,
            "why": "Mamba state for 4 requests fits",
            "rank": 0,
        }
    ]
    write(
        root,
        record(
            run_id=run_id,
            config="qwen27b-dflash-mrr8",
            algorithm="DFLASH",
            tp=1,
            outcome="skipped",
            kv_observed=None,
            plan_=skipped,
            failure={
                "phase": "plan",
                "cause": "planned_failure",
                "message": "predicted: max_running_requests would be 0 with 8 requested "
                "(Mamba state for 8 requests does not fit)",
                "lines": [],
            },
        ),
    )
    return root / run_id


def cut_attempt(root: Path, run_id: str, host: str, instance: str, *, points: int = 1) -> Path:
    """An attempt directory as a host that dropped out mid-attempt leaves it: ``points`` point files
    committed ok (``points/c1-r<N>.json``), no record."""
    from sglbench.hostlib.result_schema import PointFile

    d = root / run_id / host / instance
    (d / "points").mkdir(parents=True, exist_ok=True)
    for r in range(points):
        doc = PointFile(
            key=f"c1-r{r}",
            hash="h" * 64,
            point={"point": "c1", "concurrency": 1, "repeat": r},
            outcome="ok",
            committed_at=1_795_940_030.0 + r,
            requests_file=f"points/c1-r{r}.requests.jsonl",
            summary=point(1, r, 10.0),
        )
        (d / "points" / f"c1-r{r}.json").write_text(json.dumps(doc.to_dict()))
    return d


def run_meta(root: Path, run_id: str, **fields: Any) -> Path:
    """``<run>/_runner/run.json`` as ``sglbench run`` writes it (only the fields given, plus the id)."""
    path = root / run_id / "_runner" / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id, "status": "incomplete", **fields}))
    return path


def pair_campaign(root: Path, *, drop: bool = False, run_id: str = "run1") -> Path:
    """One run on two hosts serving the same two configs (``ar``, the baseline, and ``sd``, DFLASH) at
    concurrency 1 and 4, two repeats; ``gpu-b`` is 1.5x as fast. With ``drop``, ``gpu-b`` dropped out
    (unreachable) in the benchmark phase of ``sd-tp1``: one point committed, no record, and ``run.json``
    says so as ``sglbench run`` writes it."""
    from sglbench.events import DroppedHost

    for host, scale in (("gpu-a", 1.0), ("gpu-b", 1.5)):
        for config, algorithm, base in (("ar", "none", 10.0), ("sd", "DFLASH", 20.0)):
            if drop and host == "gpu-b" and config == "sd":
                cut_attempt(root, run_id, host, "sd-tp1")
                continue
            pts = [
                point(c, r, (base + r) * scale * c, accept=None if config == "ar" else 3.0)
                for c in (1, 4)
                for r in range(2)
            ]
            write(
                root,
                record(run_id=run_id, host=host, config=config, algorithm=algorithm, benchmark=bench(pts)),
            )
    if drop:
        gone = DroppedHost("gpu-b", "ssh: connection reset", "benchmark", "sd-tp1", "sd", 1, ("ar-tp1",))
        run_meta(root, run_id, hosts={"gpu-a": "gpu-a", "gpu-b": "gpu-b"}, dropped=[gone.to_dict()])
    return root / run_id


def raw_telemetry(
    *,
    start: float = 1_000.0,
    seconds: float = 10.0,
    gpus: tuple[int, ...] = (0,),
    power_w: Any = 300.0,
    gpu_interval_ms: int = 200,
    server_interval_ms: int = 1000,
    running: Any = 4.0,
    queued: Any = 0.0,
    kv_usage: Any = 0.5,
    gen_throughput: Any = None,
    throttle: Any = 0,
    drop: Any = None,
    lead_s: float = 1.0,
    errors: list[str] | None = None,
) -> dict[str, Any]:
    """A raw telemetry document of the host contract (``docs/records.md``, "Telemetry"): the window
    ``start .. start + seconds`` (host clock), sampling from ``lead_s`` before to ``lead_s`` after it.

    ``power_w``, ``running``, ``queued``, ``kv_usage``, ``gen_throughput`` and ``throttle`` are a constant
    or a function ``(t, gpu)`` / ``(t,)`` of the sample time; ``drop(t, gpu)`` true leaves a GPU sample out.
    """

    def val(f: Any, *args: Any) -> Any:
        return f(*args) if callable(f) else f

    t0, t1 = start - lead_s, start + seconds + lead_s
    gpu_rows = []
    n = round((t1 - t0) / (gpu_interval_ms / 1000.0))
    for i in range(n + 1):
        t = t0 + i * gpu_interval_ms / 1000.0
        for g in gpus:
            if drop is not None and drop(t, g):
                continue
            p = val(power_w, t, g)
            gpu_rows.append([t, g, p, 80.0, 40.0, 70_000.0, 1980.0, 60.0, val(throttle, t, g)])
    server_rows = []
    m = round((t1 - t0) / (server_interval_ms / 1000.0))
    for i in range(m + 1):
        t = t0 + i * server_interval_ms / 1000.0
        server_rows.append([t, "metrics", "num_running_reqs", val(running, t)])
        server_rows.append([t, "metrics", "num_queue_reqs", val(queued, t)])
        server_rows.append([t, "metrics", "token_usage", val(kv_usage, t)])
        server_rows.append([t, "load", "num_waiting_reqs", val(queued, t)])
        if gen_throughput is not None:
            server_rows.append([t, "metrics", "gen_throughput", val(gen_throughput, t)])
    return {
        "schema": 1,
        "clock": {"host_started": t0 - 0.5, "host_ended": t1 + 0.5},
        "window": {"start": start, "end": start + seconds},
        "sampling": {
            "gpus": list(gpus),
            "gpu_interval_ms": gpu_interval_ms,
            "server_interval_ms": server_interval_ms,
            "started": t0,
            "stopped": t1,
            "metrics": True,
            "load_endpoint": "/v1/loads",
        },
        "gpu": {
            "columns": list(GPU_COLUMNS),
            "rows": gpu_rows,
        },
        "server": {"columns": ["t", "source", "name", "value"], "rows": server_rows},
        "errors": list(errors or []),
    }


def with_telemetry(
    p: dict[str, Any], *, power_w: float = 300.0, gpu_hour_usd: float | None = 2.0, **raw: Any
) -> dict[str, Any]:
    """Point ``p`` with telemetry figures as the commit derives them: ``power_w`` per GPU over a window
    of the point's ``duration_s`` (``raw``: more ``raw_telemetry`` arguments, e.g. ``throttle``)."""
    from sglbench.telemetry import clock, derive

    doc = raw_telemetry(seconds=float(p["duration_s"]), power_w=power_w, **raw)
    host = doc["clock"]
    off = clock.estimate(
        host["host_started"] - 0.1, host["host_ended"] + 0.1, host["host_started"], host["host_ended"]
    )
    tel = derive.derive(doc, clock=off, output_tokens=p["total_output_tokens"], gpu_hour_usd=gpu_hour_usd)
    return {**p, "telemetry": tel}


def telemetry_campaign(root: Path, run_id: str = "tel", *, parquet: bool = True) -> Path:
    """Two configs at TP 1 (ar at 300 W, dflash at 360 W), concurrency 1 and 4, two repeats, every point
    with telemetry and its raw series on disk (Parquet tables for ar with ``parquet``, the raw JSON file
    for dflash); ar's c4 repeat 1 is thermally throttled in its second half."""
    from sglbench import columnar

    for config, alg, watts, tok_s in (("ar", "none", 300.0, 100.0), ("dflash", "DFLASH", 360.0, 180.0)):
        points, raws = [], {}
        for c in (1, 4):
            for r in range(2):
                p = point(c, r, tok_s * c * (1 + 0.02 * r), accept=None if alg == "none" else 3.0)
                hot = config == "ar" and c == 4 and r == 1
                raw = raw_telemetry(
                    seconds=float(p["duration_s"]),
                    power_w=lambda t, g, w=watts + 10 * c: w,
                    running=float(c),
                    queued=lambda t, c=c: max(0.0, c - 1.0 - (t - 1000.0) / 5.0),
                    kv_usage=0.1 * c,
                    throttle=(lambda t, g: 0x40 if t > 1005.0 else 0) if hot else 0,
                )
                points.append({**p, "telemetry": _derived(raw, p)})
                raws[f"c{c}-r{r}"] = raw
        path = write(root, record(run_id=run_id, config=config, algorithm=alg, benchmark=bench(points)))
        pdir = path.parent / "points"
        pdir.mkdir(exist_ok=True)
        for key, raw in raws.items():
            src = pdir / f"{key}.telemetry.json"
            src.write_text(json.dumps(raw))
            if parquet and config == "ar":
                columnar.write_telemetry(src, pdir, key)
                src.unlink()
    return root / run_id


def _derived(raw: dict[str, Any], p: dict[str, Any], gpu_hour_usd: float | None = 2.0) -> dict[str, Any]:
    """The figures the commit derives, with the controller's clock 0.1 s either side of the host's."""
    from sglbench.telemetry import clock, derive

    host = raw["clock"]
    sent, received = host["host_started"] - 0.1, host["host_ended"] + 0.1
    off = clock.estimate(sent, received, host["host_started"], host["host_ended"])
    return derive.derive(raw, clock=off, output_tokens=p["total_output_tokens"], gpu_hour_usd=gpu_hour_usd)


def speculative_campaign(root: Path, run_id: str = "spec", *, diverge: bool = True) -> Path:
    """A TP1 run of an autoregressive baseline and two speculative configs at temperature 0, every request
    with its output token ids and (speculative configs) its acceptance histogram, prompts of three
    categories: the report's acceptance-by-position table and its losslessness section both have rows.
    With ``diverge`` the DDTree config returns one other token in one request (its gate fails)."""
    import random

    rnd = random.Random(11)
    cats = {"math": 0.75, "code": 0.65, "chat": 0.5}  # per-draft acceptance of each category
    n_prompts, tokens = 12, 48
    outputs = [[1000 + 7 * i + k for k in range(tokens)] for i in range(n_prompts)]
    configs = [("ar", "none", 1.0, 0), ("dflash", "DFLASH", 2.1, 8), ("ddtree-b16", "DDTREE", 2.4, 16)]
    for name, alg, mult, width in configs:
        pts, reqs = [], []
        for c in (1, 4):
            for r in range(2):
                tput = 40.0 * c**0.8 * mult * (1 + rnd.uniform(-0.03, 0.03))
                n = 3 * c
                lengths = []
                for i in range(n):
                    pid = (i + 5 * r) % n_prompts
                    cat = list(cats)[pid % 3]
                    hist = None
                    if width:  # verify steps until the output is complete, each k drafts + the bonus token
                        hist, emitted = [0] * width, 0
                        while emitted < tokens:
                            k = 0
                            while k < width - 1 and rnd.random() < cats[cat]:
                                k += 1
                            hist[k] += 1
                            emitted += k + 1
                        lengths.append(tokens / sum(hist))
                    rq = request(c, r, i, tokens, category=cat, verify=sum(hist) if hist else None)
                    rq["prompt_id"] = f"{cat}-{pid:03d}"
                    rq["prompt_set"] = "math,code,chat"
                    rq["spec_accept_histogram"] = hist
                    ids = list(outputs[pid])
                    if diverge and name == "ddtree-b16" and pid == 5 and c == 1:
                        ids[17] += 1
                    rq["output_ids"] = ids
                    reqs.append(rq)
                accept = sum(lengths) / len(lengths) if lengths else None
                pts.append(point(c, r, tput, duration_s=n * tokens / tput, accept=accept, n_ok=n))
        b = bench(pts, prompts="math,code,chat")
        b["meta"]["sampling"] = {"max_new_tokens": tokens, "temperature": 0.0}
        write(root, record(run_id=run_id, config=name, algorithm=alg, benchmark=b), requests=reqs)
    return root / run_id
