"""One etcd watch on a key prefix, on etcd's Watch RPC directly.

aetcd hides progress notifications; the watch cache needs them (a progress response
says "every change up to revision R has been sent"), so this speaks the RPC itself.
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
    """`async for batch in PrefixWatch(channel, prefix, start)`; `request_progress()` any time."""

    def __init__(self, channel: grpc.aio.Channel, prefix: bytes, start_revision: int) -> None:
        self._stub = rpc_pb2_grpc.WatchStub(channel)
        self._prefix = prefix
        self._start = start_revision
        self._requests: asyncio.Queue[rpc_pb2.WatchRequest | None] = asyncio.Queue()
        self._call: grpc.aio.StreamStreamCall | None = None
        self._pending_progress = 0

    def request_progress(self) -> None:
        self._requests.put_nowait(rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest()))

    def cancel(self) -> None:
        self._requests.put_nowait(None)
        if self._call is not None:
            self._call.cancel()

    async def _request_stream(self) -> AsyncIterator[rpc_pb2.WatchRequest]:
        yield rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=self._prefix, range_end=prefix_end(self._prefix), start_revision=self._start,
            prev_kv=True, progress_notify=True))
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
                if resp.created and not resp.events:
                    continue
                if not resp.events:
                    # A progress notification. etcd 3.4.23 may send it *before* the event at
                    # that very revision (its progress/notify race, fixed in later releases),
                    # so a revision is only trusted once a later progress response has come:
                    # a full round trip after it, the events it covers are on the stream.
                    trusted, self._pending_progress = self._pending_progress, resp.header.revision
                    if trusted:
                        yield WatchBatch(trusted, [])
                    continue
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
