"""The cluster DNS server: UDP and TCP on one address, answers from informers on
Services and EndpointSlices (rebuilt into a ClusterView after a change, at most every
`rebuild_period`), other names forwarded to `upstream` when one is configured and
refused otherwise (in tests and on these machines nothing leaves the cluster)."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.rcode

from clusterdns.records import ClusterView, response
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.netutil import host_port_arg, optional_host_port_arg, split_host_port
from kubeling.options import flag
from protos.kubeling.v1 import core_pb2, discovery_pb2

__all__ = ["DNSConfig", "DNSServer"]

log = logging.getLogger(__name__)

MAX_UDP = 512  # without EDNS: larger answers are truncated (TC) and asked again over TCP



@dataclass
class DNSConfig:
    listen: str = flag("127.0.0.1:0", "UDP and TCP HOST:PORT, the same port for both (default %(default)s)",
                       type=host_port_arg)
    zone: str = flag("cluster.local", "the cluster domain (default %(default)s)")
    upstream: str = flag("", "forward other names to this HOST:PORT (default: refuse them)",
                         type=optional_host_port_arg)
    rebuild_period: float = 0.05
    forward_timeout: float = 2.0


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, server: DNSServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(data, addr))
        self.server._tasks.add(task)
        task.add_done_callback(self.server._tasks.discard)

    async def _answer(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = await self.server.answer(data, udp=True)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


class DNSServer:
    def __init__(self, client: Client, config: DNSConfig) -> None:
        self.client = client
        self.config = config
        self.services: Informer[core_pb2.Service] = Informer(client.services)
        self.slices: Informer[discovery_pb2.EndpointSlice] = Informer(client.endpointslices)
        self.view = ClusterView(config.zone)
        self._dirty = asyncio.Event()
        self._serial = int(time.time())
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._rebuilder: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.queries = 0
        for informer in (self.services, self.slices):
            informer.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                 on_delete=self._changed)

    def _changed(self, _obj: object) -> None:
        self._dirty.set()

    def _rebuild(self) -> None:
        self._serial += 1
        self.view = ClusterView.build(self.config.zone, self.services.store.list(), self.slices.store.list(),
                                      self._serial)

    async def _rebuild_loop(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.config.rebuild_period)  # a burst of changes: one rebuild
            self._dirty.clear()
            self._rebuild()

    async def start(self, sync_timeout: float = 60.0) -> None:
        for informer in (self.services, self.slices):
            await informer.start()
        for informer in (self.services, self.slices):
            await informer.wait_synced(sync_timeout)
        self._rebuild()
        self._rebuilder = asyncio.create_task(self._rebuild_loop(), name="dns-view")
        host, port = split_host_port(self.config.listen)
        loop = asyncio.get_running_loop()
        # TCP first: its port (a free one when 0) is then taken for UDP too
        self._tcp = await asyncio.start_server(self._serve_tcp, host, port)
        self.port = self._tcp.sockets[0].getsockname()[1]
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _UDP(self), local_addr=(host, self.port))
        log.info("cluster DNS for %s on %s:%d (udp and tcp), other names %s", self.config.zone, host, self.port,
                 f"forwarded to {self.config.upstream}" if self.config.upstream else "refused")

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(2)
                data = await reader.readexactly(struct.unpack("!H", head)[0])
                reply = await self.answer(data, udp=False)
                if reply is None:
                    break
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answer(self, data: bytes, *, udp: bool) -> bytes | None:
        """The wire reply to a wire query (None: not even a header to answer)."""
        self.queries += 1
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException:
            if len(data) < 12:
                return None
            header = bytearray(data[:4])
            header[2] |= 0x80  # QR
            header[3] = (header[3] & 0xF0) | dns.rcode.FORMERR
            return bytes(header) + b"\0\0\0\0\0\0\0\0"
        reply = response(query, self.view)
        if reply is None:
            reply = await self._forward(query, udp)
        size = query.payload if query.edns >= 0 and udp else MAX_UDP if udp else 65535
        return reply.to_wire(max_size=size) if not udp else self._fit(reply, size)

    @staticmethod
    def _fit(reply: dns.message.Message, size: int) -> bytes:
        try:
            return reply.to_wire(max_size=size)
        except dns.exception.TooBig:
            reply.answer.clear()
            reply.additional.clear()
            reply.flags |= dns.flags.TC
            return reply.to_wire()

    async def _forward(self, query: dns.message.Message, udp: bool) -> dns.message.Message:
        if not self.config.upstream:
            reply = dns.message.make_response(query)
            reply.set_rcode(dns.rcode.REFUSED)
            return reply
        host, port = split_host_port(self.config.upstream)
        try:
            if udp:
                return await dns.asyncquery.udp(query, host, port=port, timeout=self.config.forward_timeout)
            return await dns.asyncquery.tcp(query, host, port=port, timeout=self.config.forward_timeout)
        except (dns.exception.DNSException, OSError) as err:
            log.info("forwarding %s to %s failed: %s", query.question[0].name if query.question else "?",
                     self.config.upstream, err)
            reply = dns.message.make_response(query)
            reply.set_rcode(dns.rcode.SERVFAIL)
            return reply

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            try:
                async with asyncio.timeout(1.0):
                    await self._tcp.wait_closed()
            except TimeoutError:
                pass  # a client still connected: its connection ends with the process
        for task in [self._rebuilder, *self._tasks]:
            if task is not None:
                task.cancel()
        for informer in (self.services, self.slices):
            await informer.stop()
