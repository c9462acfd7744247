"""hostlib/server_api.py: URLs, secret stripping, /server_info normalisation, endpoint fallback (loopback)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from sglbench.hostlib import server_api

PAYLOAD: dict[str, Any] = {
    "model_path": "/models/qwen3.6-27b",
    "tp_size": 1,
    "mem_fraction_static": 0.75,
    "max_running_requests": 8,
    "context_length": 32768,
    "speculative_algorithm": "DFLASH",
    "speculative_num_draft_tokens": 16,
    "api_key": "sk-secret",
    "admin_api_key": "admin-secret",
    "status": "ready",
    "max_total_num_tokens": 11893,
    "max_req_input_len": 32762,
    "version": "0.5.10",
    "internal_states": [
        {
            "memory_usage": {"weight": 51.05, "kvcache": 0.73, "token_capacity": 11893, "graph": 0.5},
            "effective_max_running_requests_per_dp": 4,
            "avg_spec_accept_length": 6.2,
            "last_gen_throughput": 80.5,
            "hf_token": "hf_secret",
        }
    ],
}


def test_base_url() -> None:
    assert server_api.base_url("127.0.0.1", 30000) == "http://127.0.0.1:30000"
    assert server_api.base_url("0.0.0.0", 1) == "http://127.0.0.1:1"
    assert server_api.base_url("::1", 2) == "http://[::1]:2"
    assert server_api.endpoint_url("http://h:1/", "/server_info") == "http://h:1/server_info"


def test_strip_secrets_is_recursive_and_keeps_token_counts() -> None:
    out = server_api.strip_secrets(PAYLOAD)
    assert out["api_key"] == server_api.REDACTED
    assert out["admin_api_key"] == server_api.REDACTED
    assert out["internal_states"][0]["hf_token"] == server_api.REDACTED
    assert out["max_total_num_tokens"] == 11893
    assert "sk-secret" not in json.dumps(out)
    assert server_api.strip_secrets({"api_key": None})["api_key"] is None


def test_normalise_uses_internal_state_for_capacity() -> None:
    info = server_api.normalise_server_info(PAYLOAD)
    assert info["max_total_num_tokens"] == 11893
    assert info["effective_max_running_requests"] == 4
    assert info["max_running_requests_configured"] == 8
    assert info["memory_usage_gib"] == {
        "weight": 51.05,
        "kvcache": 0.73,
        "graph": 0.5,
        "token_capacity": 11893,
    }
    assert info["speculative"]["algorithm"] == "DFLASH"
    assert info["speculative"]["avg_accept_length"] == 6.2
    assert "secret" not in json.dumps(info)


def test_normalise_without_internal_states() -> None:
    info = server_api.normalise_server_info({"max_total_num_tokens": "100", "tp_size": 2})
    assert info["max_total_num_tokens"] == 100
    assert info["effective_max_running_requests"] is None
    assert info["tp_size"] == 2


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, Any]]] = {}

    def do_GET(self) -> None:
        status, body = self.routes.get(self.path, (404, {"detail": "Not Found"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"routes": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def test_fetch_falls_back_to_get_server_info(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/get_server_info"] = (200, PAYLOAD)
    endpoint, payload = server_api.fetch_server_info(url, 2.0)
    assert endpoint == "/get_server_info"
    assert payload["max_total_num_tokens"] == 11893


def test_fetch_prefers_server_info(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/server_info"] = (200, {"version": "new"})
    handler.routes["/get_server_info"] = (200, {"version": "old"})
    assert server_api.fetch_server_info(url, 2.0) == ("/server_info", {"version": "new"})


def test_fetch_explains_an_api_key_refusal(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/server_info"] = (401, {"error": "unauthorized"})
    with pytest.raises(server_api.ServerApiError, match="api-key"):
        server_api.fetch_server_info(url, 2.0)


def test_nothing_listening() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert server_api.http_status(f"http://127.0.0.1:{port}/health_generate", 1.0) is None
    with pytest.raises(server_api.ServerApiError, match=f"127.0.0.1:{port}"):
        server_api.fetch_server_info(f"http://127.0.0.1:{port}", 1.0)


def test_http_status_reports_503(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/health_generate"] = (503, {})
    assert server_api.http_status(url + "/health_generate", 2.0) == 503


def test_normalise_reads_the_0523_graph_memory_split_per_phase() -> None:
    """0.5.23's memory_usage.graph is a dict per capture phase; the record keeps its sum."""
    graph = {"prefill": 0.25, "decode": 1.0, "target_verify": 0.0, "draft_prefill": 0.0}
    payload = {"internal_states": [{"memory_usage": {"weight": 1.0, "token_capacity": 10, "graph": graph}}]}
    assert server_api.normalise_server_info(payload)["memory_usage_gib"]["graph"] == 1.25
    payload["internal_states"][0]["memory_usage"]["graph"] = 0.5  # older releases: one number
    assert server_api.normalise_server_info(payload)["memory_usage_gib"]["graph"] == 0.5
