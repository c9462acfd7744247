"""HTTP API of the stand-in: JSON shapes, SSE framing, auth, metrics (sglang.md §4)."""

from __future__ import annotations

import itertools
import json

import pytest
from sim_harness import SGLANG_VERSION, Sim, model, sse_events

from sglbench.hostlib import sglang_logs


def test_health_endpoints_are_200_when_ready(plain_sim: Sim) -> None:
    for path in ("/health", "/health_generate"):
        status, body, _ = plain_sim.request(path)
        assert (status, body) == (200, b"")


def test_server_info_matches_startup_log(plain_sim: Sim) -> None:
    parsed = sglang_logs.parse_startup_log(plain_sim.log())
    for path in ("/server_info", "/get_server_info"):
        status, info = plain_sim.json(path)
        assert status == 200
        assert info["max_total_num_tokens"] == parsed["max_total_num_tokens"]
        assert info["status"] == "ready"
        assert isinstance(info["max_req_input_len"], int)
        assert info["model_path"] == model("qwen3-8b")
        assert info["mem_fraction_static"] > 0
        assert info["max_running_requests"] is None  # the configured value, not the effective one
        state = info["internal_states"][0]
        assert state["effective_max_running_requests_per_dp"] == parsed["max_running_requests"]
        usage = state["memory_usage"]
        # 0.5.23's memory_usage; "graph" is split per capture phase
        assert set(usage) == {
            "weight",
            "kvcache",
            "startup_available",
            "token_capacity",
            "token_capacity_swa",
            "graph",
        }
        assert set(usage["graph"]) == {
            "prefill",
            "decode",
            "target_verify",
            "draft_prefill",
            "draft_decode",
            "draft_extend",
        }
        assert usage["token_capacity"] == parsed["max_total_num_tokens"]
        assert usage["weight"] == pytest.approx(parsed["weights_gib"], abs=0.01)
        assert usage["kvcache"] == pytest.approx(parsed["kv"]["k_gib"] + parsed["kv"]["v_gib"], abs=0.02)
        assert "avg_spec_accept_length" not in state
        assert isinstance(state["last_gen_throughput"], float)
        assert info["version"] == SGLANG_VERSION
        assert info["sglbench_sim"]["simulated"] is True


def test_model_info_and_models(plain_sim: Sim) -> None:
    for path in ("/model_info", "/get_model_info"):
        status, info = plain_sim.json(path)
        assert status == 200
        assert info["model_path"] == model("qwen3-8b")
        assert info["architectures"] == ["Qwen3ForCausalLM"]
        assert info["is_generation"] is True
        assert {
            "tokenizer_path",
            "preferred_sampling_params",
            "weight_version",
            "has_image_understanding",
            "has_audio_understanding",
            "model_type",
        } <= set(info)
    status, models = plain_sim.json("/v1/models")
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["qwen3-8b-sim"]


def test_generate_text_ignore_eos(plain_sim: Sim) -> None:
    status, out = plain_sim.json(
        "/generate",
        {"text": "Hello there, how are you?", "sampling_params": {"max_new_tokens": 17, "ignore_eos": True}},
    )
    assert status == 200
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 17 == len(out["output_ids"])
    assert meta["finish_reason"] == {"type": "length", "length": 17}
    assert meta["prompt_tokens"] > 0 and meta["e2e_latency"] >= 0
    assert {"id", "cached_tokens", "weight_version", "num_retractions", "weight_versions"} <= set(meta)
    assert isinstance(out["text"], str) and len(out["text"].split()) == 17


def test_generate_input_ids_and_batch(plain_sim: Sim) -> None:
    status, out = plain_sim.json(
        "/generate",
        {"input_ids": [11, 12, 13, 14], "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}},
    )
    assert status == 200 and out["meta_info"]["prompt_tokens"] == 4
    status, outs = plain_sim.json(
        "/generate",
        {"text": ["one", "two three"], "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}},
    )
    assert status == 200 and len(outs) == 2
    assert [o["meta_info"]["completion_tokens"] for o in outs] == [2, 2]


def test_generate_natural_stop_reports_eos(plain_sim: Sim) -> None:
    status, out = plain_sim.json(
        "/generate", {"text": "stop soon", "sampling_params": {"max_new_tokens": 20000}}
    )
    assert status == 200
    reason = out["meta_info"]["finish_reason"]
    assert reason["type"] == "stop" and reason["matched"] == 151645  # qwen3-8b eos_token_id


def test_generate_errors(plain_sim: Sim) -> None:
    status, out = plain_sim.json("/generate", {"sampling_params": {}})
    assert status == 400
    assert out["error"]["message"] == "Either text, input_ids or input_embeds should be provided."
    status, out = plain_sim.json(
        "/generate", {"input_ids": [5] * 10, "sampling_params": {"max_new_tokens": 10**7}}
    )
    assert status == 400 and "maximum context length" in out["error"]["message"]


def test_generate_stream_is_cumulative_sse(plain_sim: Sim) -> None:
    status, raw, headers = plain_sim.request(
        "/generate",
        {"text": "stream me", "stream": True, "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}},
    )
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert len(chunks) >= 2
    for before, after in itertools.pairwise(chunks):
        assert after["text"].startswith(before["text"])  # cumulative, like SGLang's default
        assert before["meta_info"]["finish_reason"] is None
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert len(chunks[-1]["output_ids"]) == 12


def test_completions(plain_sim: Sim) -> None:
    status, out = plain_sim.json(
        "/v1/completions", {"model": "qwen3-8b-sim", "prompt": "Say hi", "max_tokens": 5, "ignore_eos": True}
    )
    assert status == 200
    assert out["object"] == "text_completion" and out["id"]
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 5
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + 5


def test_completions_stream_with_usage(plain_sim: Sim) -> None:
    status, raw, _ = plain_sim.request(
        "/v1/completions",
        {
            "prompt": "Count",
            "max_tokens": 6,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 6
    text = "".join(c["choices"][0]["text"] for c in chunks[:-1])
    assert len(text.split()) == 6
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(c["usage"] is None for c in chunks[:-1])


def test_chat_completions_stream_and_plain(plain_sim: Sim) -> None:
    msgs = [{"role": "user", "content": "Hello"}]
    status, out = plain_sim.json(
        "/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "ignore_eos": True}
    )
    assert status == 200 and out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert len(out["choices"][0]["message"]["content"].split()) == 4
    status, raw, _ = plain_sim.request(
        "/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "stream": True, "ignore_eos": True}
    )
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)
    # the finish comes in a chunk of its own with an empty delta (0.5.23)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"][0]["delta"] == {"reasoning_content": None}


def test_flush_cache_and_cached_tokens(plain_sim: Sim) -> None:
    prompt = " ".join(f"word{i}" for i in range(80))
    body = {"text": prompt, "sampling_params": {"max_new_tokens": 1}}
    plain_sim.json("/generate", body)
    _, again = plain_sim.json("/generate", body)
    assert again["meta_info"]["cached_tokens"] > 0
    status, raw, _ = plain_sim.request("/flush_cache", method="POST")
    assert status == 200 and raw.decode().startswith("Cache flushed.")
    _, after = plain_sim.json("/generate", body)
    assert after["meta_info"]["cached_tokens"] == 0


def test_metrics_prometheus_text(plain_sim: Sim) -> None:
    plain_sim.json("/generate", {"text": "metrics", "sampling_params": {"max_new_tokens": 2}})
    status, raw, headers = plain_sim.request("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    text = raw.decode()
    info = plain_sim.json("/server_info")[1]
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{", 1)[0]] = float(value)
    assert values["sglang:max_total_num_tokens"] == info["max_total_num_tokens"]
    assert values["sglang:num_requests_total"] >= 1
    for name in (
        "sglang:num_running_reqs",
        "sglang:token_usage",
        "sglang:gen_throughput",
        "sglang:num_queue_reqs",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:time_to_first_token_seconds_count",
        "sglang:e2e_request_latency_seconds_count",
    ):
        assert name in values


def test_unknown_path_and_method(plain_sim: Sim) -> None:
    assert plain_sim.request("/nope")[0] == 404
    assert plain_sim.request("/generate", method="GET")[0] == 405


def test_deterministic_output(plain_sim: Sim) -> None:
    body = {"text": "determinism check", "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}}
    first = plain_sim.json("/generate", body)[1]
    second = plain_sim.json("/generate", body)[1]
    assert first["output_ids"] == second["output_ids"] and first["text"] == second["text"]
    seeded = plain_sim.json(
        "/generate", {**body, "sampling_params": {**body["sampling_params"], "sampling_seed": 7}}
    )[1]
    assert seeded["output_ids"] != first["output_ids"]


def test_same_seed_same_text_across_restarts(start_sim, plain_sim: Sim) -> None:
    body = {"text": "restart", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
    other = start_sim(["--model-path", model("qwen3-8b")])
    assert other.json("/generate", body)[1]["text"] == plain_sim.json("/generate", body)[1]["text"]
    reseeded = start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_SEED="42")
    assert reseeded.json("/generate", body)[1]["text"] != plain_sim.json("/generate", body)[1]["text"]


def test_metrics_off_without_flag_and_spec_meta(spec_sim: Sim) -> None:
    assert spec_sim.request("/metrics")[0] == 404
    status, out = spec_sim.json(
        "/generate", {"text": "speculate", "sampling_params": {"max_new_tokens": 64, "ignore_eos": True}}
    )
    assert status == 200
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 64
    assert 1 <= meta["spec_verify_ct"] < 64  # several tokens per verify step
    assert meta["spec_accept_length"] == pytest.approx(64 / meta["spec_verify_ct"])
    assert 0 <= meta["spec_accept_rate"] <= 1
    # 0.5.21 and later spell the counters *_correct_drafts / *_proposed_drafts, without the old aliases
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
    assert "spec_accept_histogram" not in meta and "spec_accept_token_num" not in meta
    assert meta["spec_num_correct_drafts"] == sum(
        k * c for k, c in enumerate(meta["spec_correct_drafts_histogram"])
    )
    state = spec_sim.json("/server_info")[1]["internal_states"][0]
    assert 1.0 < state["avg_spec_accept_length"] <= 16
    info = spec_sim.json("/server_info")[1]
    assert info["speculative_algorithm"] == "DFLASH" and info["speculative_num_draft_tokens"] == 16
    assert info["max_running_requests"] == 4
    assert state["effective_max_running_requests_per_dp"] >= 1


def test_spec_decode_log_has_accept_len(spec_sim: Sim) -> None:
    spec_sim.json(
        "/generate", {"text": "log me", "sampling_params": {"max_new_tokens": 80, "ignore_eos": True}}
    )
    decode = sglang_logs.parse_startup_log(spec_sim.log())["decode"]
    assert decode and all(d["accept_len"] is not None for d in decode)


def test_api_key(start_sim) -> None:
    sim = start_sim(["--model-path", model("qwen3-8b"), "--api-key", "sekrit", "--enable-metrics"])
    status, body, _ = sim.request("/v1/models")
    assert status == 401 and json.loads(body) == {"error": "Unauthorized"}
    assert sim.request("/generate", {"text": "x"}, headers={"Authorization": "Bearer wrong"})[0] == 401
    assert sim.request("/v1/models", headers={"Authorization": "Bearer sekrit"})[0] == 200
    assert sim.request("/health")[0] == 200  # health and metrics are exempt
    assert sim.request("/metrics")[0] == 200


def test_openai_client_streams_with_usage(plain_sim: Sim) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=plain_sim.url + "/v1", api_key="unused", max_retries=0, timeout=10)
    stream = client.chat.completions.create(
        model="qwen3-8b-sim",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 8
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8
    stream = client.completions.create(
        model="qwen3-8b-sim",
        prompt="Once",
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert len("".join(c.choices[0].text for c in chunks if c.choices).split()) == 5


def test_stop_strings(plain_sim: Sim) -> None:
    body = {"text": "find a stop", "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}}
    full = plain_sim.json("/generate", body)[1]["text"]
    stop = full.split()[5]  # a word the deterministic output contains
    expected = full[: full.find(" " + stop)]
    out = plain_sim.json(
        "/generate", {**body, "sampling_params": {**body["sampling_params"], "stop": [" " + stop]}}
    )[1]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": " " + stop}
    assert out["text"] == expected
    status, comp = plain_sim.json(
        "/v1/completions", {"prompt": "find a stop", "max_tokens": 60, "ignore_eos": True, "stop": " " + stop}
    )
    assert status == 200 and comp["choices"][0]["finish_reason"] == "stop"
    assert comp["choices"][0]["matched_stop"] == " " + stop and stop not in comp["choices"][0]["text"].split()


def test_expect_100_continue_keepalive_and_rid(plain_sim: Sim) -> None:
    import socket

    body = json.dumps(
        {"text": "x" * 2000, "rid": "my-rid", "sampling_params": {"max_new_tokens": 2}}
    ).encode()
    head = (
        f"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", plain_sim.port), timeout=10) as sock:
        sock.sendall(head)
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 200")
        headers = {}
        while (line := reader.readline().strip()) != b"":
            key, _, value = line.decode().partition(":")
            headers[key.lower()] = value.strip()
        out = json.loads(reader.read(int(headers["content-length"])))
        assert out["meta_info"]["id"] == "my-rid"
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # same connection (keep-alive)
        assert reader.readline().startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("token_mode", ["fixed", "real-draft-token"])
def test_spec_simulate_acc_len(start_sim, token_mode: str) -> None:
    """SGLang's SGLANG_SIMULATE_ACC_LEN on an NGRAM server: every verify step keeps 2 (1 correct draft), the
    histogram grows only as far as the counts seen (0.5.23), token mode fixed makes every verified token
    id 100 (the prefill's token stays the model's), real-draft-token keeps the model's tokens."""
    sim = start_sim(
        [
            "--model-path",
            model("qwen3-8b"),
            "--speculative-algorithm",
            "NGRAM",
            "--speculative-num-draft-tokens",
            "4",
        ],
        SGLANG_SIMULATE_ACC_LEN="2",
        SGLANG_SIMULATE_ACC_TOKEN_MODE=token_mode,
    )
    body = {"text": "forced", "sampling_params": {"max_new_tokens": 33, "ignore_eos": True}}
    out = sim.json("/generate", body)[1]
    meta = out["meta_info"]
    assert meta["spec_verify_ct"] == 16 and meta["spec_correct_drafts_histogram"] == [0, 16]
    assert meta["spec_num_correct_drafts"] == 16 and meta["spec_num_proposed_drafts"] == 48
    assert meta["spec_accept_length"] == pytest.approx(33 / 16)
    fixed = set(out["output_ids"][1:]) == {100}
    assert fixed == (token_mode == "fixed")
    info = sim.json("/server_info")[1]
    assert (info["speculative_eagle_topk"], info["speculative_num_steps"]) == (10, 0)  # NGRAM's resolution
