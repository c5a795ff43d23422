"""WebSocket for the streaming server: the handshake, framing (wsproto), and the two
ways Kubernetes uses it.

- The channel protocols of `k8s.io/streaming/pkg/httpstream/wsstream`: every message
  starts with its channel number (a byte, or an ASCII digit for the base64 variants,
  whose payload is base64). `v5.channel.k8s.io` adds the CLOSE signal: a message
  `[255, channel]` half-closes that channel (stdin's EOF).
- A tunnel (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+'s port-forward): binary
  messages carry a SPDY connection's bytes, in both directions.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass, field

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.utilities import generate_accept_token

from cri.streaming.spdy import Inbound

log = logging.getLogger(__name__)

NORMAL_CLOSURE, PROTOCOL_ERROR_CLOSE, UNSUPPORTED_DATA, TOO_BIG = 1000, 1002, 1003, 1009
MAX_MESSAGE = 16 * 1024 * 1024
STREAM_CLOSE_SIGNAL = 255


class HandshakeError(Exception):
    """The upgrade request is not a usable WebSocket handshake."""


def is_websocket_request(headers: dict[str, str]) -> bool:
    return headers.get("upgrade", "").lower() == "websocket" and \
        "upgrade" in [t.strip() for t in headers.get("connection", "").lower().split(",")]


def requested_protocols(headers: dict[str, str]) -> list[str]:
    return [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]


def choose_protocol(headers: dict[str, str], supported: tuple[str, ...]) -> str:
    """The first protocol the client lists that the server speaks; "" when the client
    names none (the raw channel protocol, as wsstream)."""
    requested = requested_protocols(headers)
    if not requested:
        return ""
    for protocol in requested:
        if protocol in supported:
            return protocol
    raise HandshakeError(f"requested protocol(s) are not supported: {requested}; supports {list(supported)}")


def accept_response(headers: dict[str, str], protocol: str) -> bytes:
    """The 101 answer to a valid handshake."""
    if headers.get("sec-websocket-version", "") != "13":
        raise HandshakeError("Sec-WebSocket-Version must be 13")
    key = headers.get("sec-websocket-key", "")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        raise HandshakeError("Sec-WebSocket-Key must be 16 bytes, base64") from None
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {generate_accept_token(key.encode()).decode()}"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class WebSocket:
    """A server WebSocket on an upgraded connection: whole messages in, messages out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str = "websocket") -> None:
        self.name = name
        self._reader = reader
        self._writer = writer
        self._conn = Connection(ConnectionType.SERVER)
        self._write_lock = asyncio.Lock()
        self._partial: list[bytes | str] = []
        self._partial_size = 0
        self._events: list[object] = []
        self.closed = asyncio.Event()

    async def _flush(self, data: bytes) -> None:
        if not data:
            return
        async with self._write_lock:
            try:
                self._writer.write(data)
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError):
                self._mark_closed()
                raise

    async def send(self, message: bytes | str) -> None:
        if self.closed.is_set() or self._conn.state is not ConnectionState.OPEN:
            raise ConnectionResetError(f"{self.name}: closed")
        event = BytesMessage(data=message) if isinstance(message, bytes) else TextMessage(data=message)
        await self._flush(self._conn.send(event))

    async def close(self, code: int = NORMAL_CLOSURE, reason: str = "") -> None:
        if self._conn.state is ConnectionState.OPEN:
            try:
                await self._flush(self._conn.send(CloseConnection(code=code, reason=reason)))
            except (ConnectionError, RuntimeError, OSError):
                pass
        self._mark_closed()

    def _mark_closed(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            try:
                self._writer.close()
            except (OSError, RuntimeError):
                pass

    async def receive(self) -> bytes | str | None:
        """The next whole message (bytes or text); None once the connection is closed."""
        while True:
            while self._events:
                event = self._events.pop(0)
                if isinstance(event, (BytesMessage, TextMessage)):
                    self._partial.append(bytes(event.data) if isinstance(event.data, bytearray) else event.data)
                    self._partial_size += len(event.data)
                    if self._partial_size > MAX_MESSAGE:
                        await self.close(TOO_BIG, f"message larger than {MAX_MESSAGE} bytes")
                        return None
                    if event.message_finished:
                        parts, self._partial, self._partial_size = self._partial, [], 0
                        if isinstance(event, TextMessage):
                            return "".join(p for p in parts if isinstance(p, str))
                        return b"".join(p for p in parts if isinstance(p, bytes))
                elif isinstance(event, Ping):
                    try:
                        await self._flush(self._conn.send(event.response()))
                    except (ConnectionError, RuntimeError, OSError):
                        return None
                elif isinstance(event, CloseConnection):
                    if event.code not in (NORMAL_CLOSURE, 1001, 1005):
                        log.info("%s: closed by the peer: %s %s", self.name, event.code, event.reason)
                    if self._conn.state is ConnectionState.REMOTE_CLOSING:
                        try:
                            await self._flush(self._conn.send(event.response()))
                        except (ConnectionError, RuntimeError, OSError):
                            pass
                    self._mark_closed()
                    return None
            if self.closed.is_set():
                return None
            try:
                data = await self._reader.read(65536)
            except (ConnectionError, OSError):
                data = b""
            if not data:
                self._mark_closed()
                return None
            self._conn.receive_data(data)
            self._events.extend(self._conn.events())


@dataclass(eq=False)
class Channel:
    """One channel of a channel-protocol connection, as a stream: read() what the client
    sent on it (b"" at its CLOSE signal or the end of the connection), write() to it."""

    number: int
    _conn: ChannelConnection
    _inbound: Inbound = field(default_factory=Inbound)

    async def read(self) -> bytes:
        return await self._inbound.get()

    async def write(self, data: bytes) -> None:
        await self._conn.write(self.number, data)

    async def close(self) -> None:
        """Nothing goes on the wire: the server's streams end with the connection (as wsstream)."""


class ChannelConnection:
    """`channel.k8s.io` and its variants over a WebSocket, with `channels` channels."""

    def __init__(self, ws: WebSocket, protocol: str, channels: int) -> None:
        self.ws = ws
        self.protocol = protocol
        self.base64 = "base64" in protocol
        self.close_signal = protocol == "v5.channel.k8s.io"
        self.channels = [Channel(i, self) for i in range(channels)]

    async def write(self, channel: int, data: bytes) -> None:
        if self.base64:
            await self.ws.send(chr(ord("0") + channel) + base64.b64encode(data).decode())
        else:
            await self.ws.send(bytes([channel]) + data)

    async def serve(self) -> None:
        """Route what the client sends to its channels until the connection ends."""
        try:
            while (message := await self.ws.receive()) is not None:
                if not message:
                    continue
                if self.base64:
                    raw = message.encode() if isinstance(message, str) else message
                    channel = raw[0] - ord("0")
                    try:
                        payload = base64.b64decode(raw[1:], validate=True)
                    except (ValueError, binascii.Error):
                        await self.ws.close(UNSUPPORTED_DATA, f"channel {channel}: payload is not base64")
                        return
                else:
                    raw = message if isinstance(message, bytes) else message.encode()
                    channel, payload = raw[0], raw[1:]
                if self.close_signal and channel == STREAM_CLOSE_SIGNAL:
                    if len(payload) != 1 or payload[0] >= len(self.channels):
                        await self.ws.close(PROTOCOL_ERROR_CLOSE, "a CLOSE signal names one valid channel")
                        return
                    self.channels[payload[0]]._inbound.end()
                    continue
                if not 0 <= channel < len(self.channels):
                    log.debug("%s: message for unknown channel %d dropped", self.ws.name, channel)
                    continue
                if payload:
                    await self.channels[channel]._inbound.put(payload)
        finally:
            for ch in self.channels:
                ch._inbound.end()


class TunnelReader:
    """Feeds a WebSocket's binary messages into an asyncio.StreamReader, for a SPDY
    session carried inside the WebSocket."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.reader = asyncio.StreamReader()

    async def pump(self) -> None:
        try:
            while (message := await self.ws.receive()) is not None:
                if isinstance(message, str):
                    await self.ws.close(UNSUPPORTED_DATA, "the SPDY tunnel carries binary messages only")
                    break
                self.reader.feed_data(message)
        finally:
            self.reader.feed_eof()


class TunnelWriter:
    """The write side of the tunnel: each write is one binary message."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        pending, self._pending = self._pending, []
        for data in pending:
            await self.ws.send(data)

    def close(self) -> None:
        """The session is done; whoever owns the WebSocket closes it (an async close)."""
