"""SPDY/3.1 over an upgraded HTTP connection: the server side of what client-go's
`k8s.io/streaming/pkg/httpstream/spdy` (moby/spdystream) speaks for exec, attach and
port-forward.

The client opens every stream (SYN_STREAM with a `streamtype` header, odd ids,
increasing); the server answers each with SYN_REPLY (with FIN to refuse it), then
both sides send DATA, FIN half-closes, RST_STREAM ends a stream. Header blocks are
zlib-compressed with one shared context per direction and SPDY/3's dictionary. As
spdystream, flow-control windows (SETTINGS, WINDOW_UPDATE) are read and ignored:
neither side enforces them, TCP does the back-pressure.

A malformed frame ends the connection with GOAWAY(PROTOCOL_ERROR); a frame naming an
unknown or misused stream resets that stream only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cri.streaming.spdyframes import (
    CANCEL,
    DATA_CHUNK,
    FLAG_FIN,
    GOAWAY,
    GOAWAY_OK,
    GOAWAY_PROTOCOL_ERROR,
    HEADERS,
    INVALID_STREAM,
    PING,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    RST_STREAM,
    STREAM_IN_USE,
    SYN_REPLY,
    SYN_STREAM,
    Frame,
    HeaderCompressor,
    HeaderDecompressor,
    Headers,
    ProtocolError,
    control_frame,
    data_frame,
    read_frame,
)

log = logging.getLogger(__name__)

_INBOUND_FRAMES = 64  # per stream, before the connection's reader waits for the consumer
_FORBIDDEN_REQUEST_HEADERS = {"connection", "host", "keep-alive", "proxy-connection", "transfer-encoding"}

class StreamError(ConnectionError):
    """A write on a stream that is closed, reset, or whose connection is gone."""


class Writer(Protocol):
    """What the session writes to: an asyncio StreamWriter, or a tunnel over WebSocket."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class Inbound:
    """What the peer sent on one stream, for one reader: put() waits while `limit` chunks
    are unread (back-pressure on the connection), end() never waits."""

    def __init__(self, limit: int = _INBOUND_FRAMES) -> None:
        self._chunks: deque[bytes] = deque()
        self._limit = limit
        self._ended = False
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    @property
    def ended(self) -> bool:
        return self._ended

    async def put(self, data: bytes) -> None:
        while len(self._chunks) >= self._limit and not self._ended:
            self._writable.clear()
            await self._writable.wait()
        if not self._ended:
            self._chunks.append(data)
            self._readable.set()

    def end(self, discard: bool = False) -> None:
        self._ended = True
        if discard:
            self._chunks.clear()
        self._readable.set()
        self._writable.set()

    async def get(self) -> bytes:
        """The next chunk; b"" once ended and drained."""
        while not self._chunks:
            if self._ended:
                return b""
            self._readable.clear()
            await self._readable.wait()
        data = self._chunks.popleft()
        if len(self._chunks) < self._limit:
            self._writable.set()
        return data


@dataclass(eq=False)
class SpdyStream:
    """One stream the client opened. read() gives b"" once the client half-closed it or
    it was reset; write() raises StreamError once it is closed or reset."""

    id: int
    headers: Headers
    _session: SpdySession
    _inbound: Inbound = field(default_factory=Inbound)
    accepted: bool = False
    remote_closed: bool = False
    local_closed: bool = False
    was_reset: bool = False

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower())
        return values[0] if values else ""

    async def read(self) -> bytes:
        return await self._inbound.get()

    async def write(self, data: bytes) -> None:
        if self.local_closed or self.was_reset:
            raise StreamError(f"stream {self.id} is closed")
        for start in range(0, len(data), DATA_CHUNK):
            await self._session.send(data_frame(self.id, 0, data[start:start + DATA_CHUNK]))

    async def close(self) -> None:
        """Half-close: FIN on an empty DATA frame (once)."""
        if self.local_closed or self.was_reset:
            return
        self.local_closed = True
        try:
            await self._session.send(data_frame(self.id, FLAG_FIN, b""))
        except StreamError:
            pass
        self._session.forget_if_done(self)

    async def reset(self, status: int = CANCEL) -> None:
        if self.was_reset:
            return
        self._end_inbound(reset=True)
        try:
            await self._session.send(control_frame(RST_STREAM, 0, struct.pack(">II", self.id, status)))
        except StreamError:
            pass
        self._session.forget(self)

    def _end_inbound(self, reset: bool = False) -> None:
        if reset:
            self.was_reset = True
            self.local_closed = True
        self.remote_closed = True
        self._inbound.end(discard=reset)


# Decides whether to accept a new stream: None accepts, a message refuses (SYN_REPLY with FIN).
StreamValidator = Callable[[SpdyStream], "str | None"]


class SpdySession:
    """The server end of one SPDY connection. `serve()` reads frames until the
    connection ends; accepted streams (their SYN_REPLY already written) arrive on
    `streams`. `close()` sends GOAWAY and closes the transport."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer, validate: StreamValidator,
                 name: str = "spdy", idle_timeout: float = 4 * 3600.0) -> None:
        self.name = name
        self._reader = reader
        self._writer = writer
        self._validate = validate
        self._idle_timeout = idle_timeout
        self._compressor = HeaderCompressor()
        self._decompressor = HeaderDecompressor()
        self._write_lock = asyncio.Lock()
        self._streams: dict[int, SpdyStream] = {}
        self._last_stream_id = 0
        self._goaway_sent = False
        self.streams: asyncio.Queue[SpdyStream] = asyncio.Queue()
        self.closed = asyncio.Event()

    # ---- writing ----

    async def send(self, frame: bytes) -> None:
        if self.closed.is_set():
            raise StreamError(f"{self.name}: connection closed")
        async with self._write_lock:
            try:
                self._writer.write(frame)
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError) as exc:
                self._mark_closed()
                raise StreamError(f"{self.name}: connection lost: {exc}") from None

    async def _reply(self, stream: SpdyStream, refuse: bool) -> None:
        async with self._write_lock:  # compress and write in one order: the zlib context is shared
            block = self._compressor.compress({})
            payload = struct.pack(">I", stream.id) + block
            try:
                self._writer.write(control_frame(SYN_REPLY, FLAG_FIN if refuse else 0, payload))
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError) as exc:
                self._mark_closed()
                raise StreamError(f"{self.name}: connection lost: {exc}") from None

    async def close(self, status: int = GOAWAY_OK) -> None:
        if not self.closed.is_set() and not self._goaway_sent:
            self._goaway_sent = True
            try:
                await self.send(control_frame(GOAWAY, 0, struct.pack(">II", self._last_stream_id, status)))
            except StreamError:
                pass
        self._mark_closed()

    def _mark_closed(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for stream in list(self._streams.values()):
            stream.local_closed = True  # nothing more can be sent; what came in can still be read
            stream._end_inbound()
        self._streams.clear()
        try:
            self._writer.close()
        except (OSError, RuntimeError):
            pass

    def forget(self, stream: SpdyStream) -> None:
        self._streams.pop(stream.id, None)

    def forget_if_done(self, stream: SpdyStream) -> None:
        if stream.local_closed and stream.remote_closed:
            self.forget(stream)

    # ---- reading ----

    async def serve(self) -> None:
        """Read and dispatch frames until the peer or close() ends the connection."""
        try:
            while not self.closed.is_set():
                try:
                    async with asyncio.timeout(self._idle_timeout):
                        frame = await read_frame(self._reader)
                except asyncio.TimeoutError:
                    log.info("%s: idle for %.0fs, closing", self.name, self._idle_timeout)
                    await self.close()
                    return
                if frame is None:
                    return
                if frame.control:
                    await self._on_control(frame)
                else:
                    await self._on_data(frame)
        except ProtocolError as exc:
            log.warning("%s: protocol error, closing the connection: %s", self.name, exc)
            await self.close(GOAWAY_PROTOCOL_ERROR)
        except (ConnectionError, OSError) as exc:
            log.debug("%s: connection lost: %s", self.name, exc)
        finally:
            self._mark_closed()

    async def _rst(self, stream_id: int, status: int) -> None:
        try:
            await self.send(control_frame(RST_STREAM, 0, struct.pack(">II", stream_id, status)))
        except StreamError:
            pass

    async def _on_control(self, frame: Frame) -> None:
        payload = frame.payload
        if frame.frame_type == SYN_STREAM:
            if len(payload) < 10:
                raise ProtocolError("SYN_STREAM shorter than 10 bytes")
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            headers = self._decompressor.decompress(payload[10:])  # always: the zlib context moves on
            if stream_id == 0:
                raise ProtocolError("SYN_STREAM for stream 0")
            if stream_id in self._streams:
                await self._rst(stream_id, STREAM_IN_USE)
                return
            if stream_id % 2 == 0 or stream_id <= self._last_stream_id or self._goaway_sent:
                await self._rst(stream_id, PROTOCOL_ERROR if not self._goaway_sent else REFUSED_STREAM)
                return
            forbidden = _FORBIDDEN_REQUEST_HEADERS & headers.keys()
            if forbidden:
                await self._rst(stream_id, PROTOCOL_ERROR)
                return
            self._last_stream_id = stream_id
            stream = SpdyStream(stream_id, headers, self)
            self._streams[stream_id] = stream
            if frame.flags & FLAG_FIN:
                stream._end_inbound()
            refusal = self._validate(stream)
            await self._reply(stream, refuse=refusal is not None)
            if refusal is not None:
                log.info("%s: refused stream %d: %s", self.name, stream_id, refusal)
                stream.local_closed = True
                self.forget_if_done(stream)
                return
            stream.accepted = True
            await self.streams.put(stream)
        elif frame.frame_type == RST_STREAM:
            if len(payload) != 8:
                raise ProtocolError("RST_STREAM must carry 8 bytes")
            stream_id, _status = struct.unpack(">II", payload)
            reset = self._streams.pop(stream_id & 0x7FFFFFFF, None)
            if reset is not None:
                reset._end_inbound(reset=True)
        elif frame.frame_type == PING:
            if len(payload) != 4:
                raise ProtocolError("PING must carry 4 bytes")
            if struct.unpack(">I", payload)[0] % 2 == 1:  # the client's: echo it
                await self.send(control_frame(PING, 0, payload))
        elif frame.frame_type == GOAWAY:
            log.debug("%s: GOAWAY from the client", self.name)
            self._mark_closed()
        elif frame.frame_type in (SYN_REPLY, HEADERS):
            if len(payload) < 4:
                raise ProtocolError("frame shorter than its stream id")
            self._decompressor.decompress(payload[4:])  # keep the zlib context in step; nothing to do
            if frame.frame_type == SYN_REPLY:  # servers are not replied to
                await self._rst(struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF, PROTOCOL_ERROR)
        # SETTINGS and WINDOW_UPDATE: windows are not enforced (as spdystream)

    async def _on_data(self, frame: Frame) -> None:
        stream = self._streams.get(frame.stream_id)
        if frame.stream_id == 0:
            raise ProtocolError("DATA frame for stream 0")
        if stream is None or stream.remote_closed:
            await self._rst(frame.stream_id, INVALID_STREAM if stream is None else PROTOCOL_ERROR)
            return
        if frame.payload and stream.accepted:  # a refused stream's data has no reader
            await stream._inbound.put(frame.payload)
        if frame.flags & FLAG_FIN:
            stream._end_inbound()
            self.forget_if_done(stream)
