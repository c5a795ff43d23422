"""Objects that expire (Events, as kube-apiserver's --event-ttl): etcd leases, shared.

One lease per `reuse` seconds serves every object written meanwhile, as upstream's
leaseManager does: a lease per write would flood etcd. Each lease lives `ttl + reuse`
seconds, so every object lives at least `ttl`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from apiserver.storage.etcd import Storage

__all__ = ["LeasePool"]


@dataclass
class LeasePool:
    storage: Storage
    ttl: float
    reuse: float = 60.0
    _lease: int = 0
    _granted_at: float = float("-inf")

    async def lease(self) -> int:
        now = time.monotonic()
        if now - self._granted_at >= self.reuse:
            self._lease = await self.storage.grant_lease(max(1, int(self.ttl + self.reuse + 0.999)))
            self._granted_at = now
        return self._lease
