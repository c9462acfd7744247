"""Minimal HTTP/1.1 server on asyncio streams: keep-alive, Content-Length bodies, chunked streaming.

Enough for OpenAI clients, ``requests``, curl and SGLang's bench tools: one coroutine per
connection, handlers return a :class:`Response` or a :class:`StreamingResponse` (chunked transfer
encoding, e.g. Server-Sent Events).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes
    client: str

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    def json(self) -> object:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamingResponse:
    chunks: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    on_disconnect: Callable[[], None] | None = None


def json_response(obj: object, status: int = 200) -> Response:
    """JSON the way SGLang's FastAPI app sends it (orjson: compact, UTF-8)."""
    return Response(status, json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


Handler = Callable[[Request], Awaitable[Response | StreamingResponse]]
AccessLog = Callable[[Request, int], None]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_request(
    reader: asyncio.StreamReader, client: str, writer: asyncio.StreamWriter | None = None
) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise HttpError(400, "incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise HttpError(413, "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before large bodies
        await writer.drain()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY_BYTES:
            raise HttpError(413, "body too large")
        body = await reader.readexactly(length)
    return Request(method.upper(), target, version, headers, body, client)


def _head(
    status: int, content_type: str, extra: dict[str, str], *, length: int | None, keep_alive: bool
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        "server: uvicorn",
        f"content-type: {content_type}",
    ]
    if length is None:
        lines.append("transfer-encoding: chunked")
    else:
        lines.append(f"content-length: {length}")
    for key, value in extra.items():
        lines.append(f"{key}: {value}")
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler, access_log: AccessLog | None
) -> None:
    peer = writer.get_extra_info("peername")
    client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "unknown"
    try:
        while True:
            try:
                request = await _read_request(reader, client, writer)
            except (HttpError, ValueError) as exc:
                status = exc.status if isinstance(exc, HttpError) else 400
                body = json.dumps({"detail": str(exc)}).encode()
                writer.write(_head(status, "application/json", {}, length=len(body), keep_alive=False) + body)
                await writer.drain()
                return
            if request is None:
                return
            conn = request.headers.get("connection", "").lower()
            keep_alive = conn != "close" and (request.version == "HTTP/1.1" or conn == "keep-alive")
            try:
                response = await handler(request)
            except Exception as exc:  # a handler bug must not kill the server
                response = json_response(
                    {
                        "object": "error",
                        "message": f"Internal server error: {exc}",
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    },
                    500,
                )
            if isinstance(response, Response):
                body = b"" if request.method == "HEAD" else response.body
                writer.write(
                    _head(
                        response.status,
                        response.content_type,
                        response.headers,
                        length=len(response.body),
                        keep_alive=keep_alive,
                    )
                    + body
                )
                await writer.drain()
                if access_log:
                    access_log(request, response.status)
            else:
                writer.write(
                    _head(
                        response.status,
                        response.content_type,
                        response.headers,
                        length=None,
                        keep_alive=keep_alive,
                    )
                )
                if access_log:
                    access_log(request, response.status)
                try:
                    async for chunk in response.chunks:
                        if chunk:
                            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            await writer.drain()
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                except (ConnectionError, asyncio.CancelledError):
                    if response.on_disconnect:
                        response.on_disconnect()
                    raise
            if not keep_alive:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(
    host: str, port: int, handler: Handler, access_log: AccessLog | None = None
) -> asyncio.Server:
    """Bind and start serving; raises ``OSError`` when the address is in use."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _serve_connection(reader, writer, handler, access_log)

    return await asyncio.start_server(on_connect, host, port, limit=MAX_HEADER_BYTES, reuse_address=True)
