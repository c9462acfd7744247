"""A small HTTP/1.1 client over asyncio protocols, built for streaming benchmark traffic.

Stdlib only (it ships to the GPU host as ``ansible.module_utils.sglbench_loadgen_http``).

Why not aiohttp/urllib: the load generator must never be the bottleneck. This client

- keeps connections alive and reuses them (a pool per base URL; no session or connection per request,
  which is what makes SGLang's Python bench_serving client collapse at high request counts),
- parses the response incrementally inside ``data_received`` (no per-line coroutine switches),
- decodes ``Transfer-Encoding: chunked``, ``Content-Length`` and close-delimited bodies,
- splits Server-Sent Events and hands the ``data`` payloads (bytes) completed by one socket read to a
  callback, in one call, with that read's arrival time, so timestamps are those of the data, not of
  whenever a coroutine got scheduled, and the per-event cost is a list append.

The callback API keeps the per-event cost to a few attribute look-ups; JSON decoding is left to the
caller, which can skip it on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl as _ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_perf = time.perf_counter

EventCallback = Callable[[list[bytes], float], None]

_HEAD, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _BODY_LEN, _BODY_EOF, _DONE = range(8)

MAX_HEADER_BYTES = 64 * 1024


class HttpError(Exception):
    """Transport or protocol failure (connection refused/reset, malformed response, timeout)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the server lives, parsed once from a base URL such as ``http://127.0.0.1:30000``."""

    scheme: str
    host: str
    port: int
    base_path: str  # "" or "/prefix" without trailing slash

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"bad server URL {url!r}: expected http://HOST:PORT or https://HOST:PORT (e.g. http://127.0.0.1:30000)"
            )
        if parts.query or parts.fragment:
            raise ValueError(
                f"bad server URL {url!r}: drop the query/fragment, give only scheme://host:port[/path]"
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise ValueError(f"bad server URL {url!r}: {exc}") from None
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host_header}{self.base_path}{path}"


@dataclass
class Response:
    """One HTTP exchange. ``body`` stays empty for SSE responses whose events went to a callback."""

    status: int = 0
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    sent_t: float = 0.0
    first_byte_t: float | None = None
    headers_t: float | None = None
    end_t: float | None = None
    bytes_received: int = 0
    n_events: int = 0
    keep_alive: bool = True

    @property
    def is_event_stream(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")


class _Exchange:
    """Incremental parser for one response, driven by the connection's ``data_received``."""

    __slots__ = (
        "_buf",
        "_remaining",
        "_sse",
        "_state",
        "body_parts",
        "future",
        "is_head",
        "on_event",
        "resp",
        "sse",
    )

    def __init__(
        self,
        on_event: EventCallback | None,
        future: asyncio.Future[Response],
        is_head: bool,
        resp: Response | None = None,
    ) -> None:
        self.resp = resp if resp is not None else Response()
        self.on_event = on_event
        self.future = future
        self.is_head = is_head
        self._state = _HEAD
        self._buf = b""
        self._remaining = 0
        self._sse = b""
        self.sse = False
        self.body_parts: list[bytes] = []

    # -- body sinks -------------------------------------------------------------------------------------
    def _body(self, data: bytes, out: list[bytes]) -> None:
        """Body bytes in order: SSE payloads go to ``out``, anything else to ``body_parts``."""
        if not self.sse:
            self.body_parts.append(data)
            return
        buf = self._sse + data if self._sse else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        events = buf.split(b"\n\n")
        self._sse = events.pop()  # incomplete tail (b"" when buf ended on a blank line)
        for event in events:
            if event[:6] == b"data: " and b"\n" not in event:  # the common single-line event
                out.append(event[6:])
            elif b"data:" in event:
                out.append(_join_data_lines(event))
            # else: comment / id / retry lines only, or an empty event

    def _emit(self, payloads: list[bytes], t: float) -> None:
        self.resp.n_events += len(payloads)
        assert self.on_event is not None
        self.on_event(payloads, t)

    def _finish_sse(self, t: float) -> None:
        if self.sse and self._sse.strip():  # last event without a blank line
            rest, self._sse = self._sse + b"\n\n", b""
            payloads: list[bytes] = []
            self._body(rest, payloads)
            if payloads:
                self._emit(payloads, t)

    # -- protocol feed ----------------------------------------------------------------------------------
    def feed(self, data: bytes, t: float) -> bool:
        """Consume bytes; return True when the response is complete.

        De-chunked body pieces of one read are joined and handed to the body sink once, so a read that
        carries many small HTTP chunks (one SSE event each, as SGLang sends them) costs one SSE split.
        The parser's states stay in this one loop over locals (over the ~80 lines a function gets here):
        it runs once per socket read, and a call per state would cost on every chunk of every stream.
        """
        resp = self.resp
        if resp.first_byte_t is None:
            resp.first_byte_t = t
        resp.bytes_received += len(data)
        buf = self._buf + data if self._buf else data
        pos = 0
        n = len(buf)
        parts: list[bytes] = []
        payloads: list[bytes] = []
        sse = self.sse
        state = self._state
        while pos < n or state == _DONE:
            if state == _CHUNK_SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = buf[pos:eol]
                pos = eol + 2
                try:
                    size = int(line, 16)
                except ValueError:
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise HttpError(f"malformed chunk size {line[:40]!r}") from None
                if size == 0:
                    state = _TRAILER
                elif pos + size + 2 <= n:  # whole chunk and its CRLF in this read: the fast path
                    end = pos + size
                    # Fastest path: the chunk is exactly one single-line "data: ...\n\n" event (how SGLang
                    # and uvicorn frame a stream); its payload is one slice, no SSE split needed.
                    if (
                        sse
                        and buf[end - 2 : end] == b"\n\n"
                        and buf.startswith(b"data: ", pos)
                        and buf.find(b"\n", pos, end - 2) < 0
                    ):
                        if parts:
                            self._body(parts[0] if len(parts) == 1 else b"".join(parts), payloads)
                            parts = []
                        if not self._sse:
                            payloads.append(buf[pos + 6 : end - 2])
                            pos = end + 2
                            continue
                    parts.append(buf[pos:end])
                    pos = end + 2
                else:
                    self._remaining = size
                    state = _CHUNK_DATA
            elif state in (_CHUNK_DATA, _BODY_LEN):  # a counted run of body bytes
                take = min(self._remaining, n - pos)
                parts.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    state = _CHUNK_CRLF if state == _CHUNK_DATA else _DONE
            elif state == _CHUNK_CRLF:
                if n - pos < 2:
                    break
                pos += 2
                state = _CHUNK_SIZE
            elif state == _BODY_EOF:
                parts.append(buf[pos:])
                pos = n
            elif state == _HEAD:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if n - pos > MAX_HEADER_BYTES:
                        raise HttpError("response header larger than 64 KiB")
                    break
                state = self._parse_head(buf[pos:end])
                sse = self.sse
                resp.headers_t = t
                pos = end + 4
            elif state == _TRAILER:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                state = _DONE if eol == pos else _TRAILER  # an empty line ends the trailer
                pos = eol + 2
            else:  # _DONE
                self._state = _DONE
                self._buf = b""
                if pos < n:
                    raise HttpError("server sent bytes after the end of the response")
                if parts:
                    self._body(parts[0] if len(parts) == 1 else b"".join(parts), payloads)
                if payloads:
                    self._emit(payloads, t)
                resp.end_t = t
                self._finish_sse(t)
                return True
        self._state = state
        self._buf = buf[pos:] if pos < n else b""
        if parts:
            self._body(parts[0] if len(parts) == 1 else b"".join(parts), payloads)
        if payloads:
            self._emit(payloads, t)
        return False

    def _parse_head(self, head: bytes) -> int:
        """Parse status and headers; return the body state."""
        resp = self.resp
        lines = head.split(b"\r\n")
        status_line = lines[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpError(f"not an HTTP/1.x response: {status_line[:80]!r}")
        try:
            resp.status = int(parts[1])
        except ValueError:
            raise HttpError(f"bad status line {status_line[:80]!r}") from None
        resp.reason = parts[2] if len(parts) > 2 else ""
        headers = resp.headers
        for raw in lines[1:]:
            key, sep, value = raw.decode("latin-1").partition(":")
            if sep:
                headers[key.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        resp.keep_alive = (conn != "close") if parts[0] == "HTTP/1.1" else (conn == "keep-alive")
        self.sse = self.on_event is not None and resp.is_event_stream
        if self.is_head or resp.status in (204, 304) or 100 <= resp.status < 200:
            return _DONE
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return _CHUNK_SIZE
        if "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise HttpError(f"bad Content-Length {headers['content-length']!r}") from None
            return _BODY_LEN if self._remaining > 0 else _DONE
        resp.keep_alive = False
        return _BODY_EOF

    def eof(self, t: float) -> bool:
        """Connection closed by the peer: True if that legitimately ends the response."""
        if self._state == _BODY_EOF:
            self.resp.end_t = t
            self._finish_sse(t)
            self._state = _DONE
            return True
        return False


def _join_data_lines(event: bytes) -> bytes:
    out = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            v = line[5:]
            out.append(v[1:] if v[:1] == b" " else v)
    return b"\n".join(out)


class _Connection(asyncio.Protocol):
    """One keep-alive TCP connection; serves one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        t = _perf()
        ex = self.exchange
        if ex is None:  # unsolicited bytes: the connection is unusable
            self.close()
            return
        try:
            done = ex.feed(data, t)
        except HttpError as exc:
            self.exchange = None
            self.close()
            if not ex.future.done():
                ex.future.set_exception(exc)
            return
        except Exception as exc:  # a bug in a caller's event callback must not hang the request
            self.exchange = None
            self.close()
            if not ex.future.done():
                ex.future.set_exception(exc)
            return
        if done:
            self.exchange = None
            if not ex.resp.keep_alive:
                self.close()
            ex.resp.body = b"".join(ex.body_parts)
            if not ex.future.done():
                ex.future.set_result(ex.resp)

    def eof_received(self) -> bool | None:
        return False  # let the transport close; connection_lost does the rest

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        self.exchange = None
        if ex is None or ex.future.done():
            return
        t = _perf()
        try:
            ok = ex.eof(t)
        except Exception as cb_exc:  # pragma: no cover - callback error at EOF
            ex.future.set_exception(cb_exc)
            return
        if ok:
            ex.resp.keep_alive = False
            ex.resp.body = b"".join(ex.body_parts)
            ex.future.set_result(ex.resp)
        else:
            why = f": {exc}" if exc else ""
            got = "before any response byte" if ex.resp.first_byte_t is None else "mid-response"
            ex.future.set_exception(HttpError(f"connection closed {got}{why}"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HttpClient:
    """Keep-alive connection pool for one server, with optional bearer token.

    ``request()`` returns a :class:`Response`; for ``text/event-stream`` responses the SSE ``data``
    payloads go to ``on_event(payloads, arrival_perf_counter)`` instead of the body: a list with every
    event completed by one socket read, all stamped with that read's arrival time.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        ssl_context: _ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self.connections_opened = 0
        self._ssl = (
            ssl_context
            if ssl_context is not None
            else (_ssl.create_default_context() if endpoint.scheme == "https" else None)
        )
        head = f"Host: {endpoint.host_header}\r\nUser-Agent: sglbench-loadgen\r\n"
        if api_key:
            head += f"Authorization: Bearer {api_key}\r\n"
        self._common_headers = head.encode("latin-1")

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _t, conn = await asyncio.wait_for(
                loop.create_connection(_Connection, self.endpoint.host, self.endpoint.port, ssl=self._ssl),
                self.connect_timeout,
            )
        except (TimeoutError, OSError) as exc:
            what = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc) or type(exc).__name__
            raise HttpError(
                f"cannot connect to {self.endpoint.url('')}: {what} (is the server up and is --url right?)"
            ) from None
        self.connections_opened += 1
        if conn.closed:
            # Connected, then reset before this coroutine resumed: a server that is going away (the kernel
            # completed the handshake from its listen backlog). Nothing would ever answer on it.
            raise HttpError(
                f"cannot connect to {self.endpoint.url('')}: the server closed the connection at once "
                "(is it shutting down?)"
            )
        self._all.add(conn)
        return conn

    def build_request(self, method: str, path: str, body: bytes | None, extra_headers: bytes = b"") -> bytes:
        target = f"{self.endpoint.base_path}{path}"
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._common_headers + extra_headers
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
            return head + b"\r\n" + body
        return head + b"\r\n"

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
        raw: bytes | None = None,
        into: Response | None = None,
    ) -> Response:
        """Send one request (``raw`` = prebuilt bytes from :meth:`build_request`) and await the response.

        ``into``: a :class:`Response` to fill, so that a caller still sees send/first-byte times and byte
        counts when the request fails with :class:`HttpError`.

        A reused idle connection that turns out to be closed by the server is retried once on a fresh
        connection, but only when not a single response byte had arrived.
        """
        payload = raw if raw is not None else self.build_request(method, path, body)
        for attempt in (0, 1):
            reused = bool(self._idle)
            conn = self._take_idle() or await self._open()
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[Response] = loop.create_future()
            if into is not None:
                into.__init__()  # type: ignore[misc]  # reset a possibly half-filled first attempt
            ex = _Exchange(on_event, fut, method == "HEAD", into)
            conn.exchange = ex
            ex.resp.sent_t = _perf()
            assert conn.transport is not None
            conn.transport.write(payload)
            try:
                resp = await (asyncio.wait_for(fut, timeout) if timeout else fut)
            except TimeoutError:
                conn.exchange = None
                self._discard(conn)
                raise HttpError(
                    f"no complete response from {self.endpoint.url(path)} within {timeout:g}s"
                ) from None
            except HttpError:
                self._discard(conn)
                if attempt == 0 and reused and ex.resp.first_byte_t is None:
                    continue
                raise
            except BaseException:
                conn.exchange = None
                self._discard(conn)
                raise
            if resp.keep_alive and not conn.closed:
                self._idle.append(conn)
            else:
                self._discard(conn)
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return None

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def close(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)
