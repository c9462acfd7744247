"""Contract, HTTP API and start-up log: one server per side (the serve.sh command line), tests in order,
the last one stops it with SIGTERM (contract_lib.py: how the sides are compared)."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from contract_lib import (
    CONTEXT,
    VERSION,
    Server,
    check,
    first,
    key_tree,
    log_shape,
    mask_numbers,
    metrics_families,
    sse,
    start,
)

import real_sglang
from sglbench.hostlib import server_api, sglang_logs

PROMPT = "The quick brown fox jumps over the lazy dog."
LONG_TEXT = "fox jumps " * 1500  # longer than the context in any tokenizer
LONG_IDS = [5] * (CONTEXT + 52)
ABORTED = "sglang:num_aborted_requests_total"  # appears with the first abort


@pytest.fixture(scope="module", params=[pytest.param("real", marks=pytest.mark.real), "stand-in"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(f"contract-api-{request.param}")
    srv = start(request.param, tmp / "server.log", [], tmp / "state")
    try:
        yield srv
    finally:
        srv.stop()


def keys(obj: dict) -> list[str]:
    return sorted(obj)


def test_http_misc(server: Server) -> None:
    health = server.get("/health")
    health_generate = server.get("/health_generate")
    flush = server.post("/flush_cache", {})
    nope = server.get("/no_such_endpoint")
    wrong_method = server.get("/generate")
    both = server.post(
        "/generate", {"text": PROMPT, "input_ids": [7, 8, 9], "sampling_params": {"max_new_tokens": 2}}
    )
    observed = {
        "health": [health.status_code, health.text],
        "health_generate": [health_generate.status_code, health_generate.text],
        "flush_cache": [flush.status_code, flush.text],
        "not_found": [nope.status_code, nope.headers.get("content-type"), nope.text],
        "wrong_method": [wrong_method.status_code, wrong_method.text],
        # SGLang takes the ids when a request has both
        "text_and_input_ids": [both.status_code, both.json()["meta_info"]["prompt_tokens"]],
    }
    check(server.side, "http.misc", observed)


def test_server_info(server: Server) -> None:
    info = server.get("/server_info").json()
    assert server.get("/get_server_info").status_code == 200
    state = info["internal_states"][0]
    check(server.side, "server_info.keys", {"keys": keys(info)})
    memory = state["memory_usage"]
    check(
        server.side,
        "server_info.internal_states",
        {"keys": keys(state), "memory_usage": key_tree(memory)},
    )
    norm = server_api.normalise_server_info(info)
    comparable = (
        "version",
        "status",
        "max_total_num_tokens",
        "max_req_input_len",
        "max_running_requests_configured",
        "effective_max_running_requests",
        "context_length",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "page_size",
        "kv_cache_dtype",
        "disable_cuda_graph",
        "mem_fraction_static",
        "tp_size",
        "dp_size",
        "pp_size",
    )
    observed = {
        "types": key_tree(norm),
        "values": {k: norm[k] for k in comparable},
        "memory_usage_gib": {k: v is not None for k, v in norm["memory_usage_gib"].items()},
    }
    check(server.side, "server_info.normalised", observed)


def test_model_info(server: Server) -> None:
    info = server.get("/model_info").json()
    assert server.get("/get_model_info").status_code == 200
    models = server.get("/v1/models").json()
    observed = {
        "model_info": keys(info),
        "embedding": key_tree(info.get("embedding")),
        "v1_models": keys(models),
        "v1_models_data": keys(models["data"][0]),
        "max_model_len": models["data"][0]["max_model_len"],
        "architectures": info["architectures"],
    }
    check(server.side, "model_info", observed)


def test_generate(server: Server) -> None:
    r = server.post(
        "/generate",
        {"text": PROMPT, "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}},
    )
    assert r.status_code == 200, r.text[:500]
    out = r.json()
    meta = out["meta_info"]
    assert meta["completion_tokens"] == len(out["output_ids"]) == 8
    observed = {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "top_keys": keys(out),
        "meta_info_keys": keys(meta),
        "finish_reason": meta["finish_reason"],
        "weight_versions": meta["weight_versions"],
    }
    check(server.side, "generate", observed)


def test_generate_stream(server: Server) -> None:
    r = server.post(
        "/generate",
        {
            "text": "Streams come in chunks.",
            "stream": True,
            "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True},
        },
        stream=True,
    )
    raw, events = sse(r)
    chunks = [json.loads(e) for e in events[:-1]]
    texts = [c["text"] for c in chunks]
    ids = [c["output_ids"] for c in chunks]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    observed = {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "last_event": events[-1],
        "ends_with": raw[raw.rindex(b"}") + 1 :].decode(),
        "chunk_keys": sorted({k for c in chunks for k in c}),
        "non_final_meta_info_keys": sorted({k for c in chunks[:-1] for k in c["meta_info"]}),
        "final_meta_info_keys": keys(chunks[-1]["meta_info"]),
        "non_final_finish_reasons": sorted(
            {json.dumps(c["meta_info"]["finish_reason"]) for c in chunks[:-1]}
        ),
        "final_finish_reason": chunks[-1]["meta_info"]["finish_reason"],
        "cumulative_text": all(b.startswith(a) for a, b in itertools.pairwise(texts)),
        "cumulative_ids": all(b[: len(a)] == a for a, b in itertools.pairwise(ids)),
        "counts_are_output_lengths": counts == [len(i) for i in ids],
        "more_than_one_chunk": len(chunks) > 1,
    }
    check(server.side, "generate.stream", observed)


def openai_keys(out: dict) -> dict:
    choice = out["choices"][0]
    return {
        "top_keys": keys(out),
        "choice_keys": keys(choice),
        "message_keys": keys(choice["message"]) if "message" in choice else None,
        "usage": key_tree(out["usage"]),
        "metadata": key_tree(out.get("metadata")),
        "object": out["object"],
        "finish_reason": choice["finish_reason"],
    }


def test_chat(server: Server) -> None:
    r = server.post(
        "/v1/chat/completions",
        {
            "model": "x",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 3,
            "ignore_eos": True,
        },
    )
    assert r.status_code == 200, r.text[:500]
    out = r.json()
    assert out["usage"]["completion_tokens"] == 3
    check(server.side, "chat", openai_keys(out))


def test_completions(server: Server) -> None:
    r = server.post("/v1/completions", {"model": "x", "prompt": PROMPT, "max_tokens": 3, "ignore_eos": True})
    assert r.status_code == 200, r.text[:500]
    out = r.json()
    assert out["usage"]["completion_tokens"] == 3
    check(server.side, "completions", openai_keys(out))


def stream_shape(server: Server, path: str, body: dict) -> dict:
    r = server.post(path, {**body, "stream": True, "max_tokens": 4, "ignore_eos": True}, stream=True)
    assert r.status_code == 200, r.text[:500]
    _raw, events = sse(r)
    chunks = [json.loads(e) for e in events[:-1]]
    with_choices = [c for c in chunks if c["choices"]]
    finals = [c for c in with_choices if c["choices"][0]["finish_reason"]]
    usage = [c for c in chunks if not c["choices"]]
    deltas = [c["choices"][0].get("delta") for c in with_choices]
    return {
        "content_type": r.headers.get("content-type"),
        "last_event": events[-1],
        "objects": sorted({c["object"] for c in chunks}),
        "chunk_keys": sorted({k for c in with_choices for k in c}),
        "choice_keys": sorted({k for c in with_choices for k in c["choices"][0]}),
        "first_delta": deltas[0] if deltas[0] is not None else None,
        "delta_keys": sorted({json.dumps(sorted(d)) for d in deltas if d is not None}),
        "finish_chunks": [
            {"finish_reason": c["choices"][0]["finish_reason"], "delta": c["choices"][0].get("delta")}
            for c in finals
        ],
        "usage_in_choice_chunks": sorted({json.dumps(c.get("usage", "absent")) for c in with_choices}),
        "usage_chunk_keys": [keys(c) for c in usage],
        "usage_keys": [key_tree(c["usage"]) for c in usage],
        "usage_is_last": bool(usage) and chunks[-1] is usage[-1],
    }


def test_chat_stream(server: Server) -> None:
    body = {"model": "x", "messages": [{"role": "user", "content": PROMPT}]}
    observed = {
        "include_usage": stream_shape(
            server, "/v1/chat/completions", {**body, "stream_options": {"include_usage": True}}
        ),
        "plain": stream_shape(server, "/v1/chat/completions", body),
    }
    check(server.side, "chat.stream", observed)


def test_completions_stream(server: Server) -> None:
    body = {"model": "x", "prompt": PROMPT}
    observed = {
        "include_usage": stream_shape(
            server, "/v1/completions", {**body, "stream_options": {"include_usage": True}}
        ),
        "plain": stream_shape(server, "/v1/completions", body),
    }
    check(server.side, "completions.stream", observed)


def answer(r: requests.Response, *, mask: bool = False) -> dict:
    body = r.text
    return {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "body": mask_numbers(body) if mask else body,
    }


def test_errors_context(server: Server) -> None:
    """The tokenizer manager's checks: input >= context, input + max_new_tokens > context."""
    chat = {"model": "x", "max_tokens": 4, "messages": [{"role": "user", "content": LONG_TEXT}]}
    observed = {
        "generate_input_ids": answer(
            server.post("/generate", {"input_ids": LONG_IDS, "sampling_params": {"max_new_tokens": 4}})
        ),
        "generate_text": answer(
            server.post("/generate", {"text": LONG_TEXT, "sampling_params": {"max_new_tokens": 4}}), mask=True
        ),
        "generate_input_plus_max_new_tokens": answer(
            server.post(
                "/generate", {"input_ids": [5] * (CONTEXT - 8), "sampling_params": {"max_new_tokens": 100}}
            )
        ),
        "chat": answer(server.post("/v1/chat/completions", chat), mask=True),
        "chat_streamed": answer(server.post("/v1/chat/completions", {**chat, "stream": True}), mask=True),
        "completions": answer(
            server.post("/v1/completions", {"model": "x", "max_tokens": 4, "prompt": LONG_IDS})
        ),
        "completions_streamed": answer(
            server.post(
                "/v1/completions", {"model": "x", "max_tokens": 4, "prompt": LONG_IDS, "stream": True}
            )
        ),
    }
    r = server.post(
        "/generate",
        {"input_ids": LONG_IDS, "stream": True, "sampling_params": {"max_new_tokens": 4}},
        stream=True,
    )
    _raw, events = sse(r)
    observed["generate_streamed"] = {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "events": events,
    }
    check(server.side, "errors.context", observed)
    assert (
        server.post("/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 2}}).status_code
        == 200
    )


def test_errors_max_req_input_len(server: Server) -> None:
    """Inputs the tokenizer lets through but the scheduler refuses: >= max_req_input_len
    (= min(context, KV pool) - 6; 2042 here)."""
    limit = server.get("/server_info").json()["max_req_input_len"]
    over = {"input_ids": [5] * (limit + 2), "sampling_params": {"max_new_tokens": 1}}
    at_limit_minus_one = {"input_ids": [6] * (limit - 1), "sampling_params": {"max_new_tokens": 1}}
    ok = server.post("/generate", at_limit_minus_one)
    r = server.post("/generate", {**over, "stream": True}, stream=True)
    _raw, events = sse(r)
    event = json.loads(events[0])
    cmpl = {"model": "x", "max_tokens": 1, "prompt": over["input_ids"]}
    observed = {
        "max_req_input_len": limit,
        "just_under": [ok.status_code, ok.json()["meta_info"]["completion_tokens"] if ok.ok else None],
        "generate": answer(server.post("/generate", over)),
        "generate_streamed": {
            "status": r.status_code,
            "events": {
                "count": len(events),
                "last": events[-1],
                "keys": keys(event),
                "meta_info_keys": keys(event["meta_info"]),
                "finish_reason": event["meta_info"]["finish_reason"],
                "prompt_tokens": event["meta_info"]["prompt_tokens"],
                "completion_tokens": event["meta_info"]["completion_tokens"],
                "output_ids": len(event["output_ids"]),  # one token, whatever it decodes to
            },
        },
        "completions": answer(server.post("/v1/completions", cmpl)),
        "completions_streamed": answer(server.post("/v1/completions", {**cmpl, "stream": True})),
    }
    check(server.side, "errors.max_req_input_len", observed)


def test_loads(server: Server) -> None:
    old = server.get("/get_load")
    new = server.get("/v1/loads")
    body = new.json()
    observed = {
        "get_load": [old.status_code, old.text],
        "v1_loads_status": new.status_code,
        "v1_loads": key_tree(body),
        "version": body.get("version"),
    }
    check(server.side, "loads", observed)


def test_metrics(server: Server) -> None:
    # one aborted request (the client goes away mid-stream): sglang:num_aborted_requests_total
    s = server.post(
        "/generate",
        {"text": "abort me", "stream": True, "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True}},
        stream=True,
    )
    next(s.iter_lines())
    s.close()
    # The server counts the abort once it notices the client gone: polled (a busy machine notices later),
    # the bound only ends the wait; a family still missing then is reported by the check below.
    deadline = time.monotonic() + 120
    while True:
        r = server.get("/metrics")
        assert r.status_code == 200
        fams = metrics_families(r.text)
        if ABORTED in fams or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(name.startswith("sglang:") for name in fams)

    def real_has_at_least(recorded: dict, seen: dict) -> bool:
        # a family appears once it has a sample: the recorded ones must be there, others may come
        return all(seen.get(k) == v for k, v in recorded.items())

    check(server.side, "metrics", fams, real_subset=real_has_at_least)


LOG_LINES = {  # the 0.5.23 lines the project reads (sglang_logs) or the stand-in prints to match
    "init_begin": r"Init parallel begin\.",
    "init_end": r"Init parallel ends\.",
    "memory_baseline": r"Memory baseline taken\.",
    **real_sglang.LOG_LINES,
    # lines of older releases that 0.5.23 does not print
    "init_torch_distributed": r"Init torch distributed",
    "using_kv_cache_dtype": r"Using KV cache dtype",
    "max_concurrent_requests": r"Max concurrent requests \(per dp worker\)",
    "capture_cuda_graph": r"Capture .*graph",
}


def presence(value: object) -> object:
    if isinstance(value, dict):
        return {k: presence(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return bool(value)
    return None if value is None else type(value).__name__


def test_startup_log(server: Server) -> None:
    # a Decode batch line comes every --decode-log-interval (40) steps
    r = server.post(
        "/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 48, "ignore_eos": True}}
    )
    assert r.status_code == 200
    server.wait_log("Decode batch")
    text = server.log_text()
    lines = text.splitlines()
    shapes = {name: log_shape(first(lines, pattern)) for name, pattern in LOG_LINES.items()}
    check(server.side, "startup.log", shapes)
    check(server.side, "startup.parsed", presence(sglang_logs.parse_startup_log(text)))


@real_sglang.stops_shared_server
def test_sigterm_stops_the_process_tree(server: Server) -> None:
    stopped = server.sigterm()  # the real side's shared server: once, also for tests/real/test_real_server.py
    names = sorted(n for n in stopped.names if n.startswith("sglang::"))
    said = sorted(
        {
            re.sub(r"\d{3,}", "N", re.sub(r"^\[[^]]*\] ", "", ln))
            for ln in server.log_text().splitlines()
            if re.search(
                r"SIGTERM received|Gracefully exiting|kill_process_tree|Shutting down|Finished server|"
                r"application shutdown|Application shutdown",
                ln,
            )
        }
    )
    observed = {
        "subprocesses": names,
        "launcher_exit_code": stopped.exit_code,
        "group_gone": stopped.gone,
        "log_says": said,
    }
    check(server.side, "shutdown.sigterm", observed)


@pytest.mark.real
def test_stand_in_model_is_the_real_tiny_model() -> None:
    """The stand-in serves tests/fixtures/models/tiny-qwen2, a copy of the real env's config.json."""
    from contract_lib import MODEL, ROOT, STAND_IN_MODEL, need_real_env

    need_real_env()
    real = json.loads((ROOT / "models" / MODEL / "config.json").read_text())
    assert json.loads((STAND_IN_MODEL / "config.json").read_text()) == real
    assert real["max_position_embeddings"] == CONTEXT
    assert Path(ROOT / "manifest.json").exists() and VERSION in (ROOT / "manifest.json").read_text()
