"""etcd's maintenance API, one member at a time: status (db size and what of it is in
use, alarms), defragmentation, compaction and alarm disarming — what `etcdctl endpoint
status`, `defrag`, `compact` and `alarm disarm` do, for the apiserver's scheduled
defragmentation and for `kubeling etcd`.

Defragmentation blocks the member it runs on while it rewrites the file, so members are
taken one after another (etcd's documented rolling defrag), each on a channel of its own:
the apiserver's storage channel reaches only whichever member answers first.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aetcd.rpc
import grpc
from aetcd.rpc import rpc_pb2

from apiserver.storage.etcd import EtcdTLS, open_channel, translate

__all__ = ["MemberStatus", "Maintenance", "Defragmenter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberStatus:
    endpoint: str
    member_id: int
    version: str
    db_size: int  # bytes of the backend file
    db_size_in_use: int  # bytes of it holding data; the rest a defragmentation gives back
    revision: int
    leader: bool
    alarms: tuple[str, ...]  # etcd's "memberID:… alarm:NOSPACE" lines

    @property
    def free(self) -> int:
        return max(self.db_size - self.db_size_in_use, 0)


class Maintenance:
    """Maintenance calls to one member, HOST:PORT, on a channel opened for each call."""

    def __init__(self, tls: EtcdTLS | None, timeout: float = 60.0) -> None:
        self.tls = tls
        self.timeout = timeout  # a defragmentation of a large file takes a while

    @asynccontextmanager
    async def _stub(self, endpoint: str) -> AsyncIterator[aetcd.rpc.MaintenanceStub]:
        channel = open_channel(endpoint, self.tls)
        try:
            yield aetcd.rpc.MaintenanceStub(channel)
        finally:
            await channel.close()

    async def status(self, endpoint: str) -> MemberStatus:
        async with self._stub(endpoint) as stub:
            try:
                resp = await stub.Status(rpc_pb2.StatusRequest(), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                raise translate(err, f"status of etcd member {endpoint}") from None
        return MemberStatus(endpoint, resp.header.member_id, resp.version, resp.dbSize, resp.dbSizeInUse,
                            resp.header.revision, resp.leader == resp.header.member_id, tuple(resp.errors))

    async def defragment(self, endpoint: str) -> None:
        async with self._stub(endpoint) as stub:
            try:
                await stub.Defragment(rpc_pb2.DefragmentRequest(), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                raise translate(err, f"defragment etcd member {endpoint}") from None

    async def alarms(self, endpoint: str) -> list[tuple[int, str]]:
        """Every member's raised alarms, as (member id, alarm name): the cluster's list."""
        async with self._stub(endpoint) as stub:
            try:
                resp = await stub.Alarm(rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                raise translate(err, f"list etcd's alarms at {endpoint}") from None
        return [(a.memberID, rpc_pb2.AlarmType.Name(a.alarm)) for a in resp.alarms]

    async def disarm(self, endpoint: str) -> list[tuple[int, str]]:
        """Disarm every raised alarm (etcdctl alarm disarm); the ones disarmed."""
        raised = await self.alarms(endpoint)
        async with self._stub(endpoint) as stub:
            for member_id, alarm in raised:
                request = rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.DEACTIVATE, memberID=member_id,
                                               alarm=rpc_pb2.AlarmType.Value(alarm))
                try:
                    await stub.Alarm(request, timeout=self.timeout)
                except grpc.aio.AioRpcError as err:
                    raise translate(err, f"disarm etcd's {alarm} alarm of member {member_id:x}") from None
        return raised

    async def compact(self, endpoint: str, revision: int) -> None:
        """Compact the cluster's history up to revision, waiting until the member has
        dropped it from its file (physical), so that a defragmentation after it frees it."""
        channel = open_channel(endpoint, self.tls)
        try:
            await aetcd.rpc.KVStub(channel).Compact(rpc_pb2.CompactionRequest(revision=revision, physical=True),
                                                    timeout=self.timeout)
        except grpc.aio.AioRpcError as err:
            if "compacted" not in (err.details() or ""):  # compacted as far already: done
                raise translate(err, f"compact etcd to revision {revision}") from None
        finally:
            await channel.close()


class Defragmenter:
    """After the apiserver's compactions: defragment each member whose file is mostly
    free space (at least `free_ratio` of it and `min_free_bytes`), one after another, so
    that the db size follows what is kept instead of its high-water mark."""

    def __init__(self, endpoints: list[str], maintenance: Maintenance, free_ratio: float,
                 min_free_bytes: int) -> None:
        self.endpoints = endpoints
        self.maintenance = maintenance
        self.free_ratio = free_ratio
        self.min_free_bytes = min_free_bytes
        self.sizes: dict[str, int] = {}  # each member's db size at the last look (a metric)

    def due(self, status: MemberStatus) -> bool:
        return self.free_ratio > 0 and status.free >= self.min_free_bytes and \
            status.free >= self.free_ratio * status.db_size

    async def run(self) -> list[str]:
        """One pass over the members; the ones defragmented."""
        done = []
        for endpoint in self.endpoints:
            status = await self.maintenance.status(endpoint)
            self.sizes[endpoint] = status.db_size
            if not self.due(status):
                continue
            await self.maintenance.defragment(endpoint)
            after = await self.maintenance.status(endpoint)
            self.sizes[endpoint] = after.db_size
            log.info("defragmented etcd member %s: %d → %d bytes (%d in use)", endpoint, status.db_size,
                     after.db_size, after.db_size_in_use)
            done.append(endpoint)
        return done
