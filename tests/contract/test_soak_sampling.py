"""The soak's sampling of etcd, against a real etcd: its keys counted by resource in pages
(an hour of Events' keys is more than one gRPC message of 4 MiB holds; the first 2-hour run
ended there)."""

from __future__ import annotations

import aetcd.rpc
from aetcd.rpc import rpc_pb2

from apiserver.storage.etcd import Storage
from bench.soak import _keys_by_resource
from cluster.etcd import EtcdServer


async def test_keys_are_counted_by_resource_across_pages() -> None:
    etcd = EtcdServer().start()  # its own, not the session's: the count is of the whole store
    try:
        storage = await Storage.connect(etcd.endpoint)
        try:
            kv = aetcd.rpc.KVStub(storage.channel)
            filler = "x" * 1000  # 4,500 keys of ~1 KiB: their names alone are past 4 MiB
            for batch in range(45):
                await kv.Txn(rpc_pb2.TxnRequest(success=[
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                        key=f"/registry/events/default/{filler}{batch}-{i}".encode(), value=b"v"))
                    for i in range(100)]), timeout=30)
            for resource, n in (("pods", 5), ("leases", 2)):
                for i in range(n):
                    await storage.put(f"/registry/{resource}/default/o{i}".encode(), b"v")
            await storage.put(b"/elsewhere/x", b"v")
        finally:
            await storage.close()
        counts = await _keys_by_resource(etcd.endpoint, None)
        assert counts == {"events": 4500, "pods": 5, "leases": 2}
        assert list(counts) == ["events", "pods", "leases"], "the most first"
        assert await _keys_by_resource(etcd.endpoint, None, page=3) == counts
    finally:
        etcd.stop()
