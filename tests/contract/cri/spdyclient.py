"""A SPDY/3.1 client for the streaming contract tests, behaving as client-go's does
(moby/spdystream): it upgrades a POST, opens odd-numbered streams and waits for each
SYN_REPLY. CI cannot build the Go clients (crictl, critest; `make critest` runs them);
the WebSocket tests use the official Python client instead."""

from __future__ import annotations

import asyncio
import struct
import urllib.parse
from dataclasses import dataclass, field

from cri.streaming import spdy
from cri.streaming import spdyframes as wire


@dataclass(eq=False)
class ClientStream:
    id: int
    client: SpdyClient
    inbound: spdy.Inbound = field(default_factory=lambda: spdy.Inbound(limit=1 << 16))
    replied: asyncio.Event = field(default_factory=asyncio.Event)
    refused: bool = False
    reset_status: int = 0

    async def read(self) -> bytes:
        return await self.inbound.get()

    async def read_all(self, timeout: float = 30.0) -> bytes:
        async def collect() -> bytes:
            chunks = []
            while data := await self.read():
                chunks.append(data)
            return b"".join(chunks)
        return await asyncio.wait_for(collect(), timeout)

    async def write(self, data: bytes) -> None:
        await self.client.send(wire.data_frame(self.id, 0, data))

    async def close(self) -> None:
        await self.client.send(wire.data_frame(self.id, wire.FLAG_FIN, b""))

    async def reset(self) -> None:
        await self.client.send(wire.control_frame(wire.RST_STREAM, 0, struct.pack(">II", self.id, wire.CANCEL)))


class SpdyClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: str) -> None:
        self.reader, self.writer, self.protocol = reader, writer, protocol
        self.compressor = wire.HeaderCompressor()
        self.decompressor = wire.HeaderDecompressor()
        self.streams: dict[int, ClientStream] = {}
        self.next_id = 1
        self.goaway: int | None = None  # the status of the server's GOAWAY
        self.closed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url: str, protocols: list[str]) -> SpdyClient:
        status, headers, reader, writer = await upgrade(url, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"},
                                                        [("X-Stream-Protocol-Version", p) for p in protocols])
        if status != 101:
            writer.close()
            raise ConnectionError(f"upgrade refused: {status} {headers}")
        return cls(reader, writer, headers.get("x-stream-protocol-version", ""))

    async def send(self, frame: bytes) -> None:
        async with self._lock:
            self.writer.write(frame)
            await self.writer.drain()

    async def open(self, headers: dict[str, str], fin: bool = False) -> ClientStream:
        async with self._lock:
            stream = ClientStream(self.next_id, self)
            self.streams[stream.id] = stream
            self.next_id += 2
            block = self.compressor.compress({k.lower(): [v] for k, v in headers.items()})
            payload = struct.pack(">IIBB", stream.id, 0, 0, 0) + block
            self.writer.write(wire.control_frame(wire.SYN_STREAM, wire.FLAG_FIN if fin else 0, payload))
            await self.writer.drain()
        await asyncio.wait_for(stream.replied.wait(), 10)
        return stream

    async def _read(self) -> None:
        try:
            while (frame := await wire.read_frame(self.reader)) is not None:
                if not frame.control:
                    stream = self.streams.get(frame.stream_id)
                    if stream is not None:
                        if frame.payload:
                            await stream.inbound.put(frame.payload)
                        if frame.flags & wire.FLAG_FIN:
                            stream.inbound.end()
                    continue
                if frame.frame_type == wire.SYN_REPLY:
                    stream_id = struct.unpack(">I", frame.payload[:4])[0]
                    self.decompressor.decompress(frame.payload[4:])
                    stream = self.streams[stream_id]
                    if frame.flags & wire.FLAG_FIN:
                        stream.refused = True
                        stream.inbound.end()
                    stream.replied.set()
                elif frame.frame_type == wire.RST_STREAM:
                    stream_id, status = struct.unpack(">II", frame.payload)
                    stream = self.streams.get(stream_id) or ClientStream(stream_id, self)
                    self.streams.setdefault(stream_id, stream)
                    stream.reset_status = status
                    stream.inbound.end()
                    stream.replied.set()
                elif frame.frame_type == wire.GOAWAY:
                    self.goaway = struct.unpack(">II", frame.payload)[1]
                elif frame.frame_type == wire.PING:
                    await self.send(wire.control_frame(wire.PING, 0, frame.payload))
        except (wire.ProtocolError, ConnectionError, OSError):
            pass
        finally:
            for stream in self.streams.values():
                stream.inbound.end()
                stream.replied.set()
            self.closed.set()

    async def close(self) -> None:
        self.writer.close()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def upgrade(url: str, headers: dict[str, str], extra: list[tuple[str, str]] | None = None,
                  method: str = "POST") -> tuple[int, dict[str, str], asyncio.StreamReader, asyncio.StreamWriter]:
    """Send an HTTP/1.1 request for url; the status, response headers and the open connection."""
    parts = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", *(f"{k}: {v}" for k, v in headers.items()),
             *(f"{k}: {v}" for k, v in extra or [])]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    response: dict[str, str] = {}
    for line in header_lines:
        if ":" in line:
            name, _, value = line.partition(":")
            response[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), response, reader, writer
