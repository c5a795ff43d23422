"""etcd's own record of changes under a prefix: the reference watch tests compare with."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aetcd

from apiserver.storage.etcd import prefix_end
from cluster.etcd import EtcdServer


@dataclass(frozen=True)
class Change:
    type: str  # ADDED, MODIFIED, DELETED
    name: str
    revision: int
    value: bytes  # what was written (empty for a delete)


async def changes(etcd: EtcdServer, prefix: str, resource: str, after: int, upto: int) -> list[Change]:
    """Every change to `<prefix>/<resource>/` with after < revision <= upto, read from etcd
    itself (not through any apiserver)."""
    key = f"{prefix}/{resource}/".encode()
    host, _, port = etcd.endpoint.rpartition(":")
    out: list[Change] = []
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
                    out.append(Change(typ, name, kv.mod_revision, kv.value or b""))
                    if kv.mod_revision >= upto:
                        return
            await asyncio.wait_for(collect(), 10)
        finally:
            await watch.cancel()
    return out


async def history(etcd: EtcdServer, prefix: str, after: int, upto: int) -> list[tuple[str, str, int]]:
    """(type, name, revision) for every change to `<prefix>/pods/` with after < revision <= upto."""
    return [(c.type, c.name, c.revision) for c in await changes(etcd, prefix, "pods", after, upto)]
