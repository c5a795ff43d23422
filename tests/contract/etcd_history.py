"""etcd's own record of changes under a prefix: the reference watch tests compare with."""

from __future__ import annotations

import asyncio

import aetcd

from apiserver.storage.etcd import prefix_end
from cluster.etcd import EtcdServer


async def history(etcd: EtcdServer, prefix: str, after: int, upto: int) -> list[tuple[str, str, int]]:
    """(type, name, revision) for every change to `<prefix>/pods/` with after < revision <= upto."""
    key = f"{prefix}/pods/".encode()
    host, _, port = etcd.endpoint.rpartition(":")
    out: list[tuple[str, str, int]] = []
    async with aetcd.Client(host=host, port=int(port)) as client:
        watch = await client.watch(key, range_end=prefix_end(key), start_revision=after + 1)
        try:
            async def collect() -> None:
                async for ev in watch:
                    kv = ev.kv
                    if kv.key == key:  # the watch cache's progress sentinel
                        if kv.mod_revision >= upto:
                            return
                        continue
                    name = kv.key.decode().rsplit("/", 1)[1]
                    if ev.kind == aetcd.EventKind.DELETE.value:
                        typ = "DELETED"
                    elif kv.create_revision == kv.mod_revision:
                        typ = "ADDED"
                    else:
                        typ = "MODIFIED"
                    out.append((typ, name, kv.mod_revision))
                    if kv.mod_revision >= upto:
                        return
            await asyncio.wait_for(collect(), 10)
        finally:
            await watch.cancel()
    return out
