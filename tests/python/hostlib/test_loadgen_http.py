"""The streaming HTTP/1.1 parser: framing (chunked / Content-Length / close), SSE splitting, and the
keep-alive pool against loopback servers."""

from __future__ import annotations

import asyncio

import pytest

from sglbench.hostlib import loadgen_http as http
from sglbench.hostlib import nullserver


def _exchange(collect: list[tuple[bytes, float]] | None):
    loop = asyncio.new_event_loop()
    fut = loop.create_future()

    def on_event(payloads, t):
        collect.extend((p, t) for p in payloads)

    ex = http._Exchange(on_event if collect is not None else None, fut, False)
    return loop, ex


def _chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"a":1}\n\n', b'data: {"a":2}\n\n', b"data: [DONE]\n\n"]


@pytest.mark.parametrize("split_at", range(1, 60, 3))
def test_chunked_sse_survives_any_read_boundary(split_at):
    raw = SSE_HEAD + _chunked(*EVENTS)
    got: list[tuple[bytes, float]] = []
    loop, ex = _exchange(got)
    try:
        done = False
        for i, piece in enumerate((raw[:split_at], raw[split_at:])):
            done = ex.feed(piece, float(i))
        assert done
        assert [p for p, _ in got] == [b'{"a":1}', b'{"a":2}', b"[DONE]"]
        assert ex.resp.status == 200 and ex.resp.n_events == 3
    finally:
        loop.close()


def test_byte_by_byte_feed_and_event_timestamps_are_read_times():
    raw = SSE_HEAD + _chunked(*EVENTS)
    got: list[tuple[bytes, float]] = []
    loop, ex = _exchange(got)
    try:
        done = [ex.feed(raw[i : i + 1], float(i)) for i in range(len(raw))]
        assert done[-1] and not any(done[:-1])
        # Each event is stamped with the read that completed it (the one carrying its blank line).
        ends = [raw.index(e) + len(e) - 1 for e in EVENTS]
        assert [t for _, t in got] == [float(i) for i in ends]
    finally:
        loop.close()


def test_sse_in_one_http_chunk_split_across_events_and_crlf_and_multiline():
    body = b'data: {"x":1}\r\n\r\n: comment\n\nevent: m\ndata: line1\ndata: line2\n\ndata:nospace\n\n'
    raw = SSE_HEAD + _chunked(body[:7], body[7:])
    got: list[tuple[bytes, float]] = []
    loop, ex = _exchange(got)
    try:
        assert ex.feed(raw, 0.0)
        assert [p for p, _ in got] == [b'{"x":1}', b"line1\nline2", b"nospace"]
    finally:
        loop.close()


def test_content_length_body_and_no_callback_collects_body():
    raw = (
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        b'{"e":"no"}\n'
    )
    loop, ex = _exchange(None)
    try:
        assert not ex.feed(raw[:40], 0.0)
        assert ex.feed(raw[40:], 1.0)
        assert ex.resp.status == 401 and b"".join(ex.body_parts) == b'{"e":"no"}\n'
        assert ex.resp.keep_alive
    finally:
        loop.close()


def test_close_delimited_body_ends_at_eof():
    raw = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
        + b"".join(EVENTS[:2])
        + b'data: {"a":3}'
    )
    got: list[tuple[bytes, float]] = []
    loop, ex = _exchange(got)
    try:
        assert not ex.feed(raw, 0.0)
        assert ex.eof(1.0)
        assert [p for p, _ in got] == [b'{"a":1}', b'{"a":2}', b'{"a":3}']  # last event had no blank line
        assert not ex.resp.keep_alive
    finally:
        loop.close()


def test_malformed_input_raises_http_error():
    loop, ex = _exchange([])
    try:
        with pytest.raises(http.HttpError, match="not an HTTP"):
            ex.feed(b"SSH-2.0-OpenSSH\r\n\r\n", 0.0)
    finally:
        loop.close()
    loop, ex = _exchange([])
    try:
        with pytest.raises(http.HttpError, match="chunk size"):
            ex.feed(SSE_HEAD + b"zz\r\n", 0.0)
    finally:
        loop.close()


def test_chunk_extension_and_trailer_are_read_past():
    body = b"".join(b"%x;name=v \r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\nX-Trailer: 1\r\n\r\n"
    got: list[tuple[bytes, float]] = []
    loop, ex = _exchange(got)
    try:
        assert not ex.feed(SSE_HEAD + body[:-3], 0.0)  # the trailer's blank line not yet here
        assert ex.feed(body[-3:], 1.0)
        assert [p for p, _ in got] == [b'{"a":1}', b'{"a":2}', b"[DONE]"]
        assert ex.resp.headers_t == 0.0 and ex.resp.end_t == 1.0
    finally:
        loop.close()


def test_bytes_after_the_response_and_an_endless_head_raise_http_error():
    loop, ex = _exchange([])
    try:
        with pytest.raises(http.HttpError, match="after the end"):
            ex.feed(SSE_HEAD + _chunked(*EVENTS) + b"HTTP/1.1", 0.0)
    finally:
        loop.close()
    loop, ex = _exchange([])
    try:
        assert not ex.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (http.MAX_HEADER_BYTES - 40), 0.0)
        with pytest.raises(http.HttpError, match="larger than 64 KiB"):
            ex.feed(b"a" * 41, 1.0)
    finally:
        loop.close()


def test_endpoint_parsing_and_errors():
    ep = http.Endpoint.from_url("http://127.0.0.1:30000/")
    assert (ep.host, ep.port, ep.base_path) == ("127.0.0.1", 30000, "")
    assert http.Endpoint.from_url("http://[::1]:8/x").url("/generate") == "http://[::1]:8/x/generate"
    for bad in ("127.0.0.1:30000", "ftp://h:1", "http://h:1/?q=1", "http://h:notaport"):
        with pytest.raises(ValueError, match="bad server URL"):
            http.Endpoint.from_url(bad)


def test_pool_reuses_connections_and_sends_bearer_key():
    cfg = nullserver.NullServerConfig(api_key="s3cret")

    async def go(url: str) -> tuple[list[int], int]:
        ok = http.HttpClient(http.Endpoint.from_url(url), api_key="s3cret")
        statuses = []
        for _ in range(5):
            r = await ok.request(
                "POST",
                "/generate",
                b'{"sampling_params":{"max_new_tokens":3}}',
                on_event=lambda p, t: None,
                timeout=10,
            )
            statuses.append(r.status)
        opened = ok.connections_opened
        await ok.close()
        bad = http.HttpClient(http.Endpoint.from_url(url), api_key="wrong")
        r = await bad.request("POST", "/generate", b"{}", timeout=10)
        await bad.close()
        return [*statuses, r.status], opened

    with nullserver.NullServerThread(cfg) as srv:
        statuses, opened = asyncio.run(go(srv.url))
    assert statuses == [200] * 5 + [401]
    assert opened == 1


def test_stale_idle_connection_is_retried_once():
    async def go() -> tuple[int, int]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            writer.close()  # keep-alive promised, then the server drops the idle connection

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = http.HttpClient(http.Endpoint.from_url(f"http://127.0.0.1:{port}"))
        r1 = await client.request("GET", "/health", timeout=5)
        await asyncio.sleep(0.05)
        r2 = await client.request("GET", "/health", timeout=5)
        await client.close()
        server.close()
        await server.wait_closed()
        return r1.status + r2.status, client.connections_opened

    total, opened = asyncio.run(go())
    assert total == 400
    assert opened == 2


def test_connection_refused_names_the_url():
    async def go() -> None:
        client = http.HttpClient(http.Endpoint.from_url("http://127.0.0.1:9"), connect_timeout=2)
        await client.request("GET", "/health", timeout=2)

    with pytest.raises(http.HttpError, match=r"cannot connect to http://127\.0\.0\.1:9"):
        asyncio.run(go())


def test_connection_reset_before_the_request_fails_it_at_once(monkeypatch):
    """A dying server: the kernel completes the handshake from its listen backlog, then resets the
    connection before the client's coroutine resumes. The request fails at once, naming the server,
    instead of waiting out its timeout on a connection nothing will ever answer."""

    async def go() -> float:
        loop = asyncio.get_running_loop()

        class _Transport(asyncio.Transport):
            def get_extra_info(self, name, default=None):
                return default

            def write(self, data):  # a closed socket: what is written goes nowhere
                pass

            def close(self):
                pass

        async def create_connection(factory, host, port, ssl=None):
            conn = factory()
            t = _Transport()
            conn.connection_made(t)
            conn.connection_lost(ConnectionResetError("reset by peer"))
            return t, conn

        monkeypatch.setattr(loop, "create_connection", create_connection)
        client = http.HttpClient(http.Endpoint.from_url("http://127.0.0.1:30000"), connect_timeout=2)
        t0 = loop.time()
        with pytest.raises(http.HttpError, match=r"closed the connection at once"):
            await client.request("GET", "/health", timeout=30)
        return loop.time() - t0

    assert asyncio.run(go()) < 5
