"""The null server's wire contract with SGLang's own bench_serving (sglang 0.5.10.post1).

``benchmarks/client_ceiling.py --baseline bench_serving`` runs the real bench_serving against the null
server. These tests pin what that client uses: ``GET /v1/models`` (readiness and model name),
``GET /server_info`` (``internal_states[0]``), ``POST /flush_cache`` and the ``/generate`` stream as
its ``--backend sglang`` request function reads it (lines, ``data: `` prefix, ``json.loads``,
cumulative ``text``, ``meta_info.completion_tokens``, ``[DONE]``).
"""

from __future__ import annotations

import http.client
import json

from sglbench.hostlib import nullserver


def _request(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_nullserver_bench_serving_discovery_endpoints():
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        status, body = _request(srv.port, "GET", "/v1/models")
        assert status == 200
        assert json.loads(body)["data"][0]["id"] == "sglbench-null"

        status, body = _request(srv.port, "GET", "/server_info")
        assert status == 200
        info = json.loads(body)
        assert "decode" not in info
        assert isinstance(info["internal_states"], list) and info["internal_states"]
        assert info["internal_states"][0].get("avg_spec_accept_length") is None

        status, _ = _request(srv.port, "POST", "/flush_cache")
        assert status == 200
        assert srv.state is not None and srv.state.flushes == 1


def test_nullserver_generate_stream_as_bench_serving_parses_it():
    payload = {
        "input_ids": list(range(1000, 1128)),
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 128, "ignore_eos": True},
        "stream": True,
        "lora_path": None,
        "return_logprob": False,
        "return_routed_experts": False,
        "logprob_start_len": -1,
    }
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=1)) as srv:
        status, body = _request(srv.port, "POST", "/generate", payload)
    assert status == 200
    # async_request_sglang_generate: iterate lines, strip, drop blanks, remove "data: ", json.loads
    # unless [DONE], count a chunk when "text" is non-empty, read meta_info.completion_tokens.
    chunks = 0
    last_len = 0
    generated = ""
    done = False
    for raw in body.split(b"\n"):
        line = raw.strip()
        if not line:
            continue
        chunk = line.decode("utf-8").removeprefix("data: ")
        if chunk == "[DONE]":
            done = True
            continue
        data = json.loads(chunk)
        if data.get("text"):
            out_len = data["meta_info"]["completion_tokens"]
            assert out_len > last_len
            last_len = out_len
            generated = data["text"]
            chunks += 1
    assert done
    assert chunks == 128 and last_len == 128 and len(generated) == 128
