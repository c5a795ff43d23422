"""One etcd watch on a key prefix, on etcd's Watch RPC directly (prev_kv, compaction
revision and cancel reasons are all visible; aetcd's watch shares one stream per client
and a failure there ends every watch).

No progress notifications: etcd 3.4 answers a progress request with the current revision
even while the watcher is still catching up, and lets it overtake queued events, so it
cannot prove that everything up to a revision was delivered. The watch cache writes a
sentinel key in the watched range instead (see watchcache.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
from aetcd.rpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

from apiserver.storage.etcd import KV, Compacted, prefix_end, translate

__all__ = ["WatchBatch", "WatchedEvent", "PrefixWatch"]


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    deleted: bool
    kv: KV          # for a delete: key and the delete's mod_revision, empty value
    prev: KV | None  # the previous version (etcd's prev_kv), when there was one


@dataclass(frozen=True, slots=True)
class WatchBatch:
    revision: int  # every change up to here has been delivered
    events: list[WatchedEvent]


def _kv(kv: kv_pb2.KeyValue) -> KV:
    return KV(kv.key, kv.value, kv.mod_revision, kv.create_revision, kv.version)


class PrefixWatch:
    """`async for batch in PrefixWatch(channel, prefix, start)`."""

    def __init__(self, channel: grpc.aio.Channel, prefix: bytes, start_revision: int) -> None:
        self._stub = rpc_pb2_grpc.WatchStub(channel)
        self._prefix = prefix
        self._start = start_revision
        self._requests: asyncio.Queue[rpc_pb2.WatchRequest | None] = asyncio.Queue()
        self._call: grpc.aio.StreamStreamCall | None = None

    def cancel(self) -> None:
        self._requests.put_nowait(None)
        if self._call is not None:
            self._call.cancel()

    async def _request_stream(self) -> AsyncIterator[rpc_pb2.WatchRequest]:
        yield rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=self._prefix, range_end=prefix_end(self._prefix), start_revision=self._start,
            prev_kv=True))
        while True:
            req = await self._requests.get()
            if req is None:
                return
            yield req

    async def __aiter__(self) -> AsyncIterator[WatchBatch]:
        self._call = self._stub.Watch(self._request_stream())
        try:
            async for resp in self._call:
                if resp.compact_revision:
                    raise Compacted(resp.compact_revision)
                if resp.canceled:
                    raise ConnectionError(f"etcd canceled the watch: {resp.cancel_reason or 'no reason'}")
                if not resp.events:
                    continue  # the created confirmation (or a progress notification: see above)
                events = [
                    WatchedEvent(ev.type == kv_pb2.Event.DELETE, _kv(ev.kv),
                                 _kv(ev.prev_kv) if ev.prev_kv.key else None)
                    for ev in resp.events
                ]
                # Only the last event's revision is certain to be complete: etcd may split a
                # catch-up into several responses that all carry the current header revision.
                yield WatchBatch(events[-1].kv.mod_revision, events)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.CANCELLED:
                return
            raise translate(err, f"watch {self._prefix.decode()}") from None
        finally:
            self._requests.put_nowait(None)
