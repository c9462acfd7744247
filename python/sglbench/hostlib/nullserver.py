"""Null SGLang server: streams ``/generate`` and OpenAI SSE chunks with known, configurable timing.

Stdlib only (ships as ``ansible.module_utils.sglbench_hostlib.nullserver``). It has no model: every request
gets exactly ``max_new_tokens`` tokens (each token is ``token_text``), in chunks of ``chunk_tokens``
tokens, the first chunk ``ttft_s`` after the request arrived and the next ones ``gap_s`` apart. When
``spec`` is on, the final ``meta_info`` reports ``spec_verify_ct`` = number of chunks and
``spec_accept_length`` = tokens / chunks, like a speculative server whose every verify step accepted
``chunk_tokens`` tokens.

Uses: unit/e2e tests of the load generator, ``sglbench calibrate`` (client ceiling on loopback), and
``benchmarks/client_ceiling.py``. With ``ttft_s == gap_s == 0`` a whole response is one precomputed
write, so the server costs far less CPU per chunk than any client parsing it.

Run standalone: ``python -m sglbench.hostlib.nullserver --port 0 --chunk-tokens 4`` prints
``LISTENING <port>`` and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any

from . import sglang_facts as facts

NULL_SERVER_MARKER = "sglbench_null_server"


@dataclass
class NullServerConfig:
    chunk_tokens: int = 1
    ttft_s: float = 0.0
    gap_s: float = 0.0
    token_text: str = "x"
    spec: bool = False
    api_key: str | None = None
    default_max_new_tokens: int = 16
    framing: str = "chunked"  # "chunked" (Transfer-Encoding) | "close" (close-delimited body)
    usage_every_chunk: bool = True  # OpenAI: honour continuous_usage_stats
    # Fault (tests): after this many generation requests every further one is answered 503, like a server
    # whose scheduler died mid-benchmark (0 = never).
    fail_after_requests: int = 0


class NullServerState:
    def __init__(self, config: NullServerConfig) -> None:
        self.config = config
        self.requests = 0
        self.flushes = 0
        self.tokens_since_flush = 0
        self.steps_since_flush = 0
        self.auth_failures = 0
        self.connections = 0
        self._cache: dict[tuple[Any, ...], list[bytes]] = {}

    def server_info(self) -> dict[str, Any]:
        avg = self.tokens_since_flush / self.steps_since_flush if self.steps_since_flush else None
        state: dict[str, Any] = {
            "effective_max_running_requests_per_dp": 4096,
            "memory_usage": {"token_capacity": 1 << 22, "weight": 0.0, "kvcache": 0.0, "graph": 0.0},
            "last_gen_throughput": 0.0,
        }
        if self.config.spec and avg is not None:
            state["avg_spec_accept_length"] = avg
        return {
            NULL_SERVER_MARKER: True,
            "simulated": True,
            "version": "sglbench-null",
            "model_path": "sglbench-null",
            "max_total_num_tokens": 1 << 22,
            "max_running_requests": None,
            "dp_size": 1,
            "tp_size": 1,
            "speculative_algorithm": "NULL" if self.config.spec else None,
            "internal_states": [state],
            "null_server": {
                "requests": self.requests,
                "flushes": self.flushes,
                "connections": self.connections,
            },
        }

    # -- response bodies --------------------------------------------------------------------------------
    def events(self, route: str, body: dict[str, Any]) -> tuple[list[bytes], int]:
        """SSE event bytes (each ``data: ...\\n\\n``) for one request, and its number of verify steps."""
        cfg = self.config
        shape = _RequestShape.of(route, body, cfg)
        n_in, n_out = shape.n_in, shape.n_out
        k = max(1, cfg.chunk_tokens)
        steps = math.ceil(n_out / k) if n_out > 0 else 0
        key: tuple[Any, ...]
        if route == "native":
            key = (route, n_in, n_out)
        else:
            key = (route, n_in, n_out, shape.continuous, shape.include_usage)
        cached = self._cache.get(key)
        if cached is not None:
            return cached, steps
        if route == "native":
            out = _native_events(cfg, shape, steps, k)
        else:
            out = _openai_events(cfg, route, shape, steps, k)
        out.append(b"data: [DONE]\n\n")
        if len(self._cache) < 256:
            self._cache[key] = out
        return out, steps


@dataclass(frozen=True)
class _RequestShape:
    """What of a request body decides its answer: prompt and output length, and (OpenAI) usage options."""

    n_in: int
    n_out: int
    continuous: bool = False  # usage on every chunk (stream_options.continuous_usage_stats)
    include_usage: bool = False  # a closing usage chunk (stream_options.include_usage)

    @classmethod
    def of(cls, route: str, body: dict[str, Any], cfg: NullServerConfig) -> _RequestShape:
        if route == "native":
            sp = body.get("sampling_params") or {}
            n_out = int(sp.get("max_new_tokens", cfg.default_max_new_tokens))
            if "input_ids" in body and isinstance(body["input_ids"], list):
                return cls(len(body["input_ids"]), n_out)
            return cls(max(1, len(str(body.get("text", "")).split())), n_out)
        n_out = int(body.get("max_tokens") or body.get("max_completion_tokens") or cfg.default_max_new_tokens)
        if route == "chat":
            n_in = max(1, sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or []))
        else:
            prompt = body.get("prompt", "")
            n_in = len(prompt) if isinstance(prompt, list) else max(1, len(str(prompt).split()))
        opts = body.get("stream_options") or {}
        continuous = bool(opts.get("continuous_usage_stats")) and cfg.usage_every_chunk
        return cls(n_in, n_out, continuous, bool(opts.get("include_usage")))


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _native_events(cfg: NullServerConfig, shape: _RequestShape, steps: int, k: int) -> list[bytes]:
    """/generate: each event carries the whole text so far; the last one the finish reason (and the
    speculative counters when ``spec`` is on)."""
    n_in, n_out = shape.n_in, shape.n_out
    out: list[bytes] = []
    for s in range(steps):
        n = min(n_out, (s + 1) * k)
        last = n == n_out
        meta: dict[str, Any] = {
            "id": "null",
            "finish_reason": {"type": "length", "length": n_out} if last else None,
            "prompt_tokens": n_in,
            "completion_tokens": n,
            "cached_tokens": 0,
        }
        if last and cfg.spec:
            meta.update(
                spec_verify_ct=steps,
                spec_accept_length=n_out / steps,
                spec_accept_token_num=n_out - steps,
                spec_draft_token_num=steps * (k - 1),
                spec_accept_rate=((n_out - steps) / (steps * (k - 1))) if k > 1 else 1.0,
            )
        out.append(_event({"text": cfg.token_text * n, "output_ids": list(range(n)), "meta_info": meta}))
    return out


def _openai_events(
    cfg: NullServerConfig, route: str, shape: _RequestShape, steps: int, k: int
) -> list[bytes]:
    """/v1/completions and /v1/chat/completions: each chunk carries the new text, then the usage chunk
    if asked for."""
    n_in, n_out = shape.n_in, shape.n_out
    kind = "chat.completion.chunk" if route == "chat" else "text_completion"
    out: list[bytes] = []
    for s in range(steps):
        n = min(n_out, (s + 1) * k)
        prev = min(n_out, s * k)
        text = cfg.token_text * (n - prev)
        fr = "length" if n == n_out else None
        choice: dict[str, Any] = {"index": 0, "finish_reason": fr}
        if route == "chat":
            choice["delta"] = {"content": text}
        else:
            choice["text"] = text
        obj = {"id": "null", "object": kind, "model": "sglbench-null", "choices": [choice]}
        obj["usage"] = (
            {"prompt_tokens": n_in, "completion_tokens": n, "total_tokens": n_in + n}
            if shape.continuous
            else None
        )
        out.append(_event(obj))
    if shape.include_usage:
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        out.append(
            _event({"id": "null", "object": kind, "model": "sglbench-null", "choices": [], "usage": usage})
        )
    return out


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_ROUTES = {facts.GENERATE: "native", facts.V1_COMPLETIONS: "completions", facts.V1_CHAT_COMPLETIONS: "chat"}


class _NullProtocol(asyncio.Protocol):
    def __init__(self, state: NullServerState) -> None:
        self.state = state
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.busy = False
        self._handles: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.state.connections += 1
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        for h in self._handles:
            h.cancel()
        self._handles.clear()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._process()

    def _process(self) -> None:
        while not self.busy and self.transport is not None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            lines = head.split("\r\n")
            try:
                method, target, _version = lines[0].split(" ", 2)
            except ValueError:
                self._simple(400, b"bad request line", close=True)
                return
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self._handle(method, target.split("?", 1)[0], headers, body)

    def _auth_ok(self, headers: dict[str, str]) -> bool:
        key = self.state.config.api_key
        return key is None or headers.get("authorization") == f"Bearer {key}"

    def _simple(self, status: int, body: bytes, ctype: str = "text/plain", close: bool = False) -> None:
        reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 503: "Unavailable"}
        reason = reasons.get(status, "X")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        ).encode()
        assert self.transport is not None
        self.transport.write(head + body)
        if close:
            self.transport.close()

    def _json(self, status: int, obj: Any) -> None:
        self._simple(status, json.dumps(obj).encode(), "application/json")

    def _handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        st = self.state
        if path in facts.HEALTH_ENDPOINTS:
            self._simple(200, b"")
        elif path in facts.SERVER_INFO_ENDPOINTS:
            self._json(200, st.server_info())
        elif path in facts.MODEL_INFO_ENDPOINTS:
            self._json(200, {"model_path": "sglbench-null", "is_generation": True, NULL_SERVER_MARKER: True})
        elif path == facts.V1_MODELS:
            self._json(200, {"object": "list", "data": [{"id": "sglbench-null", "object": "model"}]})
        elif path == facts.FLUSH_CACHE:
            st.flushes += 1
            st.tokens_since_flush = 0
            st.steps_since_flush = 0
            self._simple(200, b"Cache flushed.\n")
        elif path in _ROUTES and method == "POST":
            if not self._auth_ok(headers):
                st.auth_failures += 1
                self._json(401, {"error": {"message": "Unauthorized"}})
                return
            try:
                req = json.loads(body)
            except ValueError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            if 0 < st.config.fail_after_requests <= st.requests:
                self._json(503, {"error": {"message": "the scheduler is gone (fault: fail_after_requests)"}})
                return
            self._stream(_ROUTES[path], req)
        else:
            self._json(404, {"detail": "Not Found"})

    def _stream(self, route: str, req: dict[str, Any]) -> None:
        st = self.state
        cfg = st.config
        st.requests += 1
        events, steps = st.events(route, req)
        n_out = (
            (req.get("sampling_params") or {}).get("max_new_tokens")
            if route == "native"
            else (req.get("max_tokens") or req.get("max_completion_tokens"))
        )
        st.tokens_since_flush += int(n_out or cfg.default_max_new_tokens)
        st.steps_since_flush += steps
        close = cfg.framing == "close"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" + (
            b"Connection: close\r\n\r\n" if close else b"Transfer-Encoding: chunked\r\n\r\n"
        )
        frame = (lambda d: d) if close else _chunk
        tail = b"" if close else b"0\r\n\r\n"
        assert self.transport is not None
        if cfg.ttft_s <= 0 and cfg.gap_s <= 0:
            self.transport.write(head + b"".join(frame(e) for e in events) + tail)
            if close:
                self.transport.close()
            return
        self.busy = True
        self.transport.write(head)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # One write per verify step; trailing events (usage, [DONE]) ride with the last step.
        n_groups = max(1, steps)
        groups = [frame(events[i]) for i in range(n_groups - 1)]
        groups.append(b"".join(frame(e) for e in events[n_groups - 1 :]) + tail)
        times = [t0 + cfg.ttft_s + i * cfg.gap_s for i in range(n_groups)]
        self._schedule(loop, groups, times, 0, close)

    def _schedule(
        self, loop: asyncio.AbstractEventLoop, groups: list[bytes], times: list[float], i: int, close: bool
    ) -> None:
        # Chained, so writes keep their order even when several fall on the same instant.
        self._handles = [loop.call_at(times[i], self._write, loop, groups, times, i, close)]

    def _write(
        self, loop: asyncio.AbstractEventLoop, groups: list[bytes], times: list[float], i: int, close: bool
    ) -> None:
        if self.transport is None:
            return
        self.transport.write(groups[i])
        if i + 1 < len(groups):
            self._schedule(loop, groups, times, i + 1, close)
            return
        self._handles = []
        self.busy = False
        if close:
            self.transport.close()
        else:
            self._process()


async def start_null_server(
    config: NullServerConfig, host: str = "127.0.0.1", port: int = 0, reuse_port: bool = False
) -> tuple[asyncio.base_events.Server, NullServerState]:
    """Start serving on the running loop; returns (server, state). Port 0 picks a free port."""
    state = NullServerState(config)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _NullProtocol(state), host, port, reuse_port=reuse_port or None, backlog=4096
    )
    return server, state


def server_port(server: asyncio.base_events.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


class NullServerThread:
    """The null server on its own event loop in a daemon thread (tests, calibrate)."""

    def __init__(self, config: NullServerConfig, host: str = "127.0.0.1") -> None:
        self.config = config
        self.host = host
        self.port = 0
        self.state: NullServerState | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sglbench-null-server", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            server, state = loop.run_until_complete(start_null_server(self.config, self.host, 0))
        except BaseException as exc:  # pragma: no cover - bind failure
            self._error = exc
            self._ready.set()
            return
        self.state = state
        self.port = server_port(server)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def __enter__(self) -> NullServerThread:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Null SGLang server with known timing (loopback only).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--chunk-tokens", type=int, default=1)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--gap-ms", type=float, default=0.0)
    p.add_argument("--spec", action="store_true")
    p.add_argument("--api-key", default=None)
    p.add_argument("--reuse-port", action="store_true", help="let several processes share the port")
    a = p.parse_args(argv)
    cfg = NullServerConfig(
        chunk_tokens=a.chunk_tokens,
        ttft_s=a.ttft_ms / 1000,
        gap_s=a.gap_ms / 1000,
        spec=a.spec,
        api_key=a.api_key,
    )

    async def run() -> None:
        server, _ = await start_null_server(cfg, a.host, a.port, reuse_port=a.reuse_port)
        print(f"LISTENING {server_port(server)}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
