"""A FAKE network link: a fault-injecting TCP proxy for tests, put between a client and
a real server (the apiservers and etcd) to give the link faults a loopback never has.

Faults, changed at any time (`proxy.faults = Faults(...)`, `heal()`):
  latency, jitter  each chunk waits latency + uniform(0, jitter) seconds, in order (TCP
                   keeps order: a chunk never overtakes the one before it);
  loss             the chance a chunk is "lost": it arrives after a retransmission timeout,
                   as TCP delivers a lost segment (the stream itself never loses a byte);
  blackhole        nothing passes either way and new connections go nowhere; what was sent
                   is held and delivered when the hole closes, as TCP's retransmissions
                   would (until the endpoints' own keepalives give up on the connection).
And at once: `reset_all()` aborts every connection with a RST (a middlebox or a peer
restarting), both ways; `sever_all()` makes every open connection silent for good — nothing
passes either way, no RST, no FIN (a path that died, a NAT entry lost, a frozen peer) —
while new connections pass: only the endpoints' keepalives can tell.

Only for tests: it never makes up bytes, and it counts what it did (`stats`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from dataclasses import dataclass, field

__all__ = ["Faults", "FaultProxy"]


@dataclass(frozen=True)
class Faults:
    latency: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    retransmit: float = 0.2  # seconds a lost chunk waits (Linux's minimum RTO)
    blackhole: bool = False


@dataclass
class Stats:
    connections: int = 0
    resets: int = 0
    severed: int = 0
    chunks: int = 0
    lost: int = 0


@dataclass(eq=False)  # one per connection, kept in a set by identity
class _Conn:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: int = 0  # directions closed by their sender


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """`address` (127.0.0.1:PORT) forwards to `upstream` (HOST:PORT) through the faults."""

    def __init__(self, upstream: str, *, seed: int = 0) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.stats = Stats()
        self._faults = Faults()
        self._open = asyncio.Event()
        self._open.set()
        self._random = random.Random(seed)
        self._conns: set[_Conn] = set()
        self._severed: list[_Conn] = []  # silent, still open: closed at stop
        self._server: asyncio.Server | None = None
        self.address = ""

    @property
    def faults(self) -> Faults:
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self._faults = faults
        if faults.blackhole:
            self._open.clear()
        else:
            self._open.set()

    def heal(self) -> None:
        self.faults = Faults()

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.address = "127.0.0.1:%d" % self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset_all()
        for conn in self._severed:
            for writer in (conn.client, conn.server):
                if writer is not None:
                    _rst(writer)
        self._severed.clear()
        if self._server is not None:
            await self._server.wait_closed()

    def sever_all(self) -> int:
        """Every open connection goes silent for good (kept open, nothing relayed); how many."""
        conns = list(self._conns)
        for conn in conns:
            for task in conn.tasks:
                task.cancel()
            self._severed.append(conn)
        self._conns.clear()
        self.stats.severed += len(conns)
        return len(conns)

    def reset_all(self) -> int:
        """Abort every open connection with a RST; how many."""
        conns = list(self._conns)
        for conn in conns:
            for writer in (conn.client, conn.server):
                if writer is not None:
                    _rst(writer)
            for task in conn.tasks:
                task.cancel()
        self._conns.clear()
        self.stats.resets += len(conns)
        return len(conns)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        self._conns.add(conn)
        self.stats.connections += 1
        try:
            await self._open.wait()  # a blackhole: the connection goes nowhere for now
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except (OSError, asyncio.CancelledError):
            self._conns.discard(conn)
            _rst(writer)
            return
        conn.server = up_writer
        conn.tasks = [asyncio.create_task(self._pump(reader, up_writer, conn)),
                      asyncio.create_task(self._pump(up_reader, writer, conn))]

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn) -> None:
        """Read chunks as they come; deliver each at its time, in order."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        deliver = asyncio.create_task(self._deliver(queue, writer))
        last = 0.0
        try:
            while chunk := await reader.read(65536):
                f = self._faults
                self.stats.chunks += 1
                due = time.monotonic() + f.latency + (self._random.uniform(0, f.jitter) if f.jitter else 0.0)
                if f.loss and self._random.random() < f.loss:
                    self.stats.lost += 1
                    due += f.retransmit
                last = max(last, due)
                queue.put_nowait((last, chunk))
            queue.put_nowait((last, b""))  # the peer closed its side: pass the FIN on, in order
            await deliver
        except OSError:  # reset on one side: reset the other, as the path would
            self._drop(conn, reset=True)
            return
        finally:
            deliver.cancel()
        conn.ended += 1
        if conn.ended == 2:
            self._drop(conn, reset=False)

    def _drop(self, conn: _Conn, *, reset: bool) -> None:
        if conn not in self._conns:
            return
        self._conns.discard(conn)
        for w in (conn.client, conn.server):
            if w is not None:
                _rst(w) if reset else w.close()

    async def _deliver(self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        while True:
            due, chunk = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await self._open.wait()
            if not chunk:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()
