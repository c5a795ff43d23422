"""The runtime's streaming server (upstream's k8s.io/kubelet/pkg/cri/streaming server):
Exec, Attach and PortForward RPCs return a single-use URL on it; a client (crictl,
critest, the kubelet's proxy) upgrades a GET or POST there to SPDY/3.1 or WebSocket.

    /exec/<token>  /attach/<token>  /portforward/<token>

An unknown, used or expired token is 404. The HTTP request head is parsed by h11;
after the upgrade the connection belongs to spdy.py or websocket.py.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from dataclasses import dataclass, field

import grpc
import h11

from cri.errors import CRIError
from cri.streaming import portforward, remotecommand
from cri.streaming.request_cache import CachedRequest, CacheFull, RequestCache
from cri.streaming.runtime import StreamingRuntime
from cri.streaming.spdy import SpdySession, StreamValidator
from cri.streaming.websocket import (
    ChannelConnection,
    HandshakeError,
    TunnelReader,
    TunnelWriter,
    WebSocket,
    accept_response,
    choose_protocol,
    is_websocket_request,
)
from kubeling.netutil import split_host_port
from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)

HEADER_PROTOCOL_VERSION = "x-stream-protocol-version"
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0


@dataclass
class StreamingConfig:
    listen: str = "127.0.0.1:0"  # HOST:PORT; port 0 picks a free one
    base_url: str = ""  # the URLs' prefix; default http://<the address actually bound>
    idle_timeout: float = 4 * 3600.0  # a connection with no traffic is closed (upstream: 4h)
    stream_creation_timeout: float = 30.0  # for the client to open its SPDY streams
    token_ttl: float = 60.0


class HTTPError(Exception):
    def __init__(self, code: int, message: str, headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.headers = code, message, headers or []


_REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error"}


@dataclass
class _Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lowercase names; repeated headers joined with ", "


def _negotiate_spdy(request: _Request, supported: tuple[str, ...]) -> str:
    """httpstream.Handshake: the client's first protocol the server speaks."""
    offered = [p.strip() for p in request.headers.get(HEADER_PROTOCOL_VERSION, "").split(",") if p.strip()]
    if not offered:
        raise HTTPError(403, "unable to upgrade: header X-Stream-Protocol-Version does not exist in request "
                             "or names no protocol")
    for protocol in offered:
        if protocol in supported:
            return protocol
    raise HTTPError(403, f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
                         f"server accepts {list(supported)}",
                    [("X-Accepted-Stream-Protocol-Versions", p) for p in supported])


def _is_spdy_upgrade(request: _Request) -> bool:
    connection = [t.strip() for t in request.headers.get("connection", "").lower().split(",")]
    return "upgrade" in connection and "spdy/3.1" in request.headers.get("upgrade", "").lower()


def _check_streams(request: api_pb2.ExecRequest | api_pb2.AttachRequest, none_set: str) -> None:
    if not request.container_id:
        raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, "missing required container_id")
    if request.tty and request.stderr:
        raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, "tty and stderr cannot both be true")
    if not (request.stdin or request.stdout or request.stderr):
        raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, none_set)


@dataclass
class StreamingServer:
    config: StreamingConfig
    runtime: StreamingRuntime
    cache: RequestCache = field(default_factory=RequestCache)
    _server: asyncio.base_events.Server | None = None
    _base_url: str = ""
    _connections: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.cache.ttl = self.config.token_ttl

    @property
    def base_url(self) -> str:
        return self._base_url

    async def start(self) -> None:
        host, port = split_host_port(self.config.listen)
        self._server = await asyncio.start_server(self._serve_connection, host, port, limit=MAX_HEAD)
        bound = self._server.sockets[0].getsockname()
        bound_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self._base_url = (self.config.base_url or f"http://{bound_host}:{bound[1]}").rstrip("/")
        log.info("streaming server on %s", self._base_url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    # ---- URLs for the RPCs ----

    def _url(self, kind: str, request: CachedRequest) -> str:
        try:
            token = self.cache.insert(request)
        except CacheFull as exc:
            raise CRIError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)) from None
        return f"{self._base_url}/{kind}/{token}"

    def get_exec(self, request: api_pb2.ExecRequest) -> str:
        _check_streams(request, "one of stdin, stdout, or stderr must be set")
        if not request.cmd:
            raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, "cmd is required")
        return self._url("exec", request)

    def get_attach(self, request: api_pb2.AttachRequest) -> str:
        _check_streams(request, "one of stdin, stdout, and stderr must be set")  # upstream's words differ
        return self._url("attach", request)

    def get_port_forward(self, request: api_pb2.PortForwardRequest) -> str:
        if not request.pod_sandbox_id:
            raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, "missing required pod_sandbox_id")
        for index, port in enumerate(request.port):
            if not 0 < port <= 0xFFFF:
                raise CRIError(grpc.StatusCode.INVALID_ARGUMENT, f"port[{index}]: {port} is not within 1-65535")
        return self._url("portforward", request)

    # ---- HTTP ----

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:  # stop() cancels what is still open
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        await self._handle(reader, writer)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                request = await self._read_head(reader)
            await self._route(request, reader, writer, f"stream {peer}")
        except HTTPError as exc:
            log.info("streaming request from %s refused: %d %s", peer, exc.code, exc.message)
            await self._respond(writer, exc.code, exc.message, exc.headers)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await self._respond(writer, 400, "malformed or incomplete request head")
        except (ConnectionError, OSError) as exc:
            log.debug("streaming connection from %s: %s", peer, exc)
        except Exception:  # noqa: BLE001 (one broken request must not take the server down)
            log.exception("streaming request from %s failed", peer)
            await self._respond(writer, 500, "internal error")
        finally:
            try:
                writer.close()
            except (OSError, RuntimeError):
                pass

    async def _read_head(self, reader: asyncio.StreamReader) -> _Request:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HTTPError(431, "request head too large") from None
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            conn.receive_data(head)
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise HTTPError(400, f"malformed request: {exc}") from None
        if not isinstance(event, h11.Request):
            raise HTTPError(400, "malformed request")
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        target = urllib.parse.urlsplit(event.target.decode("latin-1"))
        return _Request(event.method.decode(), target.path, urllib.parse.parse_qs(target.query), headers)

    async def _respond(self, writer: asyncio.StreamWriter, code: int, message: str,
                       headers: list[tuple[str, str]] | None = None) -> None:
        body = (message + "\n").encode()
        lines = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}", "Content-Type: text/plain; charset=utf-8",
                 "X-Content-Type-Options: nosniff", f"Content-Length: {len(body)}", "Connection: close",
                 *(f"{k}: {v}" for k, v in headers or [])]
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            await writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            pass

    async def _route(self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     name: str) -> None:
        parts = request.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] not in ("exec", "attach", "portforward"):
            raise HTTPError(404, "404 page not found")
        if request.method not in ("GET", "POST"):
            raise HTTPError(405, f"method {request.method} is not allowed")
        cached = self.cache.consume(parts[1])
        kind = parts[0]
        expected = {"exec": api_pb2.ExecRequest, "attach": api_pb2.AttachRequest,
                    "portforward": api_pb2.PortForwardRequest}[kind]
        if not isinstance(cached, expected):
            raise HTTPError(404, "404 page not found")
        if isinstance(cached, api_pb2.PortForwardRequest):
            await self._port_forward(cached, request, reader, writer, name)
        elif isinstance(cached, (api_pb2.ExecRequest, api_pb2.AttachRequest)):
            await self._remote_command(cached, request, reader, writer, name)

    async def _upgrade_websocket(self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                 supported: tuple[str, ...], name: str) -> tuple[WebSocket, str]:
        try:
            protocol = choose_protocol(request.headers, supported)
            response = accept_response(request.headers, protocol)
        except HandshakeError as exc:
            raise HTTPError(403 if "protocol" in str(exc) else 400, str(exc)) from None
        writer.write(response)
        await writer.drain()
        return WebSocket(reader, writer, name), protocol

    async def _upgrade_spdy(self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            protocol: str, validate: StreamValidator, name: str) -> SpdySession:
        if not _is_spdy_upgrade(request):
            raise HTTPError(400, "unable to upgrade: missing upgrade headers in request")
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                      f"X-Stream-Protocol-Version: {protocol}\r\n\r\n").encode())
        await writer.drain()
        return SpdySession(reader, writer, validate, name, self.config.idle_timeout)

    async def _remote_command(self, cached: api_pb2.ExecRequest | api_pb2.AttachRequest, request: _Request,
                              reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        options = remotecommand.Options.of(cached.stdin, cached.stdout, cached.stderr, cached.tty)
        background: list[asyncio.Task[None]] = []
        if is_websocket_request(request.headers):
            ws, protocol = await self._upgrade_websocket(request, reader, writer, remotecommand.WEBSOCKET_PROTOCOLS,
                                                         name)
            channels = ChannelConnection(ws, protocol, channels=5)
            background.append(asyncio.create_task(channels.serve()))
            connection = await remotecommand.websocket_connection(channels, options)
        else:
            protocol = _negotiate_spdy(request, remotecommand.SPDY_PROTOCOLS)
            session = await self._upgrade_spdy(request, reader, writer, protocol,
                                               remotecommand.validate_spdy_stream, name)
            background.append(asyncio.create_task(session.serve()))
            maybe = await remotecommand.spdy_connection(session, protocol, options,
                                                        self.config.stream_creation_timeout)
            if maybe is None:
                await session.close()
                await asyncio.gather(*background, return_exceptions=True)
                return
            connection = maybe
        try:
            if isinstance(cached, api_pb2.ExecRequest):
                await remotecommand.serve_exec(connection, self.runtime, cached.container_id, list(cached.cmd))
            else:
                await remotecommand.serve_attach(connection, self.runtime, cached.container_id)
        finally:
            for task in background:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    async def _port_forward(self, cached: api_pb2.PortForwardRequest, request: _Request,
                            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        sandbox_id = cached.pod_sandbox_id
        if is_websocket_request(request.headers):
            ws, protocol = await self._upgrade_websocket(
                request, reader, writer, (portforward.TUNNEL_PROTOCOL, *portforward.WEBSOCKET_PROTOCOLS), name)
            if protocol == portforward.TUNNEL_PROTOCOL:
                tunnel = TunnelReader(ws)
                pump = asyncio.create_task(tunnel.pump())
                session = SpdySession(tunnel.reader, TunnelWriter(ws), portforward.validate_spdy_stream, name,
                                      self.config.idle_timeout)
                serving = asyncio.create_task(session.serve())
                try:
                    await portforward.serve_spdy(session, self.runtime, sandbox_id,
                                                 self.config.stream_creation_timeout)
                finally:
                    await ws.close()
                    for task in (pump, serving):
                        task.cancel()
                    await asyncio.gather(pump, serving, return_exceptions=True)
                return
            ports = list(cached.port)
            try:
                # The CRI request names the ports; else the URL does (`port`, as the kubelet's own
                # server reads it, or `ports`, as PodPortForwardOptions)
                ports = ports or [portforward.parse_port(p) for key in ("port", "ports")
                                  for v in request.query.get(key, []) for p in v.split(",")]
            except ValueError as exc:
                await ws.close(1008, str(exc))
                return
            channels = ChannelConnection(ws, protocol, channels=2 * len(ports))
            serving = asyncio.create_task(channels.serve())
            try:
                await portforward.serve_websocket(channels, self.runtime, sandbox_id, ports)
            finally:
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)
            return
        _negotiate_spdy(request, (portforward.PROTOCOL,))
        session = await self._upgrade_spdy(request, reader, writer, portforward.PROTOCOL,
                                           portforward.validate_spdy_stream, name)
        serving = asyncio.create_task(session.serve())
        try:
            await portforward.serve_spdy(session, self.runtime, sandbox_id, self.config.stream_creation_timeout)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
