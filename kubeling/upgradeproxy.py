"""Relaying an upgraded HTTP connection byte for byte, as upstream's
UpgradeAwareHandler does for exec, attach and port-forward (apiserver -> kubelet ->
the runtime's streaming server).

The client's request (its method, query and upgrade headers: SPDY's
X-Stream-Protocol-Version, WebSocket's key and subprotocols) is sent on to the
backend; a 101 answer is handed back and from then on both directions are copied
untouched, so SPDY, WebSocket and SPDY-in-WebSocket all pass, negotiated end to end.
Any other answer (a 404 for a used token, a 500 "container not found") is returned
to the client as it is, for it to show.

aiohttp serves the client: once the backend said 101, the response is prepared as a
101 (headers only) and the connection's further bytes are taken with set_parser, as
aiohttp's own WebSocket support takes them.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import urllib.parse

from aiohttp import web
from multidict import CIMultiDict

__all__ = ["ProxyError", "proxy_upgrade", "is_upgrade"]

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
MAX_ERROR_BODY = 1 << 20
CHUNK = 64 * 1024
# Not passed on: the client's credentials are for us, not for the backend; the rest is
# per connection and set again for the next hop.
_DROPPED = {"host", "authorization", "proxy-authorization", "content-length", "transfer-encoding",
            "keep-alive", "te", "trailer"}


class ProxyError(Exception):
    """The backend cannot be reached or did not answer HTTP."""


def is_upgrade(request: web.Request) -> bool:
    tokens = [t.strip().lower() for t in request.headers.get("Connection", "").split(",")]
    return "upgrade" in tokens and bool(request.headers.get("Upgrade"))


class _Tap:
    """What aiohttp's protocol feeds an upgraded connection's bytes to (the parser slot
    its WebSocket reader uses): into a StreamReader, which pauses the client's transport
    while too much is unread."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, str, list[tuple[str, str]]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise ProxyError(f"the backend did not answer with an HTTP response head: {exc}") from None
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProxyError(f"the backend answered {status_line!r}")
    headers = []
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers


async def proxy_upgrade(request: web.Request, url: str, connect_timeout: float = 10.0,
                        ssl_context: ssl.SSLContext | None = None) -> web.StreamResponse:
    """Send request on to url (http, or https with ssl_context); relay the upgraded
    connection or the answer."""
    target = urllib.parse.urlsplit(url)
    if target.scheme not in ("http", "https") or not target.hostname or \
            (target.scheme == "https") != (ssl_context is not None):
        raise ProxyError(f"cannot proxy to {url!r}")
    port = target.port or (443 if ssl_context is not None else 80)
    try:
        async with asyncio.timeout(connect_timeout):
            backend_reader, backend_writer = await asyncio.open_connection(target.hostname, port, limit=MAX_HEAD,
                                                                           ssl=ssl_context)
    except (OSError, asyncio.TimeoutError) as exc:
        raise ProxyError(f"cannot connect to {target.hostname}:{port}: {exc}") from None
    try:
        path = (target.path or "/") + (f"?{target.query}" if target.query else "")
        lines = [f"{request.method} {path} HTTP/1.1", f"Host: {target.netloc}"]
        lines += [f"{name}: {value}" for name, value in request.headers.items() if name.lower() not in _DROPPED]
        backend_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await backend_writer.drain()
        async with asyncio.timeout(connect_timeout):
            status, reason, headers = await _read_head(backend_reader)
        if status != 101:
            return await _plain_answer(status, headers, backend_reader)
        return await _relay(request, status, reason, headers, backend_reader, backend_writer)
    except (ConnectionError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ProxyError(f"the connection to {target.netloc} failed: {exc!r}") from None
    finally:
        backend_writer.close()


async def _plain_answer(status: int, headers: list[tuple[str, str]],
                        reader: asyncio.StreamReader) -> web.Response:
    """The backend's answer to show the client: its status, type and body (up to 1 MiB)."""
    fields = CIMultiDict(headers)
    length = fields.get("Content-Length", "")
    if length.isdigit():
        body = await reader.readexactly(min(int(length), MAX_ERROR_BODY))
    elif "chunked" in fields.get("Transfer-Encoding", "").lower():
        body = await _read_chunked(reader)
    else:  # the body ends with the connection
        body = b""
        while len(body) < MAX_ERROR_BODY and (data := await reader.read(MAX_ERROR_BODY - len(body))):
            body += data
    return web.Response(status=status, body=body,
                        content_type=fields.get("Content-Type", "text/plain").split(";")[0].strip())


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = b""
    while len(body) < MAX_ERROR_BODY:
        size_line = await reader.readline()
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise ProxyError(f"the backend sent a bad chunk size {size_line!r}") from None
        if size == 0:
            break
        body += (await reader.readexactly(size + 2))[:size]
    return body[:MAX_ERROR_BODY]


async def _relay(request: web.Request, status: int, reason: str, headers: list[tuple[str, str]],
                 backend_reader: asyncio.StreamReader, backend_writer: asyncio.StreamWriter) -> web.StreamResponse:
    response = web.StreamResponse(status=status, reason=reason or None)
    for name, value in headers:
        if name.lower() not in ("date", "server", "content-length", "transfer-encoding"):
            response.headers.add(name, value)
    response.force_close()  # the connection is the stream's now; nothing follows on it
    await response.prepare(request)
    transport, protocol = request.transport, request.protocol
    if transport is None or protocol is None:
        raise ProxyError("the client's connection is gone")
    client_reader = asyncio.StreamReader(limit=CHUNK)
    client_reader.set_transport(transport)  # back-pressure: pauses the client while we lag
    protocol.set_parser(_Tap(client_reader))  # type: ignore[arg-type]

    async def to_backend() -> None:
        try:
            while data := await client_reader.read(CHUNK):
                backend_writer.write(data)
                await backend_writer.drain()
        finally:
            # aiohttp closes a connection whose client half-closed it, so the client's
            # end is its going away: the backend's session ends with it.
            backend_writer.close()

    sending = asyncio.create_task(to_backend())
    try:
        while data := await backend_reader.read(CHUNK):
            await response.write(data)
    except (ConnectionError, OSError) as exc:
        log.debug("relay to %s ended: %s", request.path, exc)
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        transport.close()
    return response
