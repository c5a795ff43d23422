"""Gives each Node a pod CIDR out of the cluster CIDR (kube-controller-manager's node
IPAM controller with its range allocator, folded into the apiserver as the namespace
finalizer is).

One allocator serializes the choices, so two nodes never get the same range; the
ranges in use are read back from the nodes themselves, so a restart loses nothing.
A node that already has a podCIDR keeps it (the apiserver refuses changes anyway).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterator

from apiserver.registry.store import Registry
from kubeling import errors
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2

__all__ = ["NodeIPAM", "CIDRAllocator", "RangeExhausted"]

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class RangeExhausted(Exception):
    pass


class CIDRAllocator:
    """Hands out the subnets of `cluster_cidr` of prefix length `mask_size`, lowest first."""

    def __init__(self, cluster_cidr: str, mask_size: int) -> None:
        self.cluster = ipaddress.ip_network(cluster_cidr, strict=True)
        if not self.cluster.prefixlen <= mask_size <= self.cluster.max_prefixlen:
            raise ValueError(f"node CIDR mask size {mask_size} does not fit in cluster CIDR {cluster_cidr}")
        self.mask_size = mask_size

    def _subnets(self) -> Iterator[Network]:
        return self.cluster.subnets(new_prefix=self.mask_size)

    def allocate(self, used: set[str]) -> str:
        taken = {ipaddress.ip_network(c, strict=False) for c in used}
        for subnet in self._subnets():
            if not any(subnet.overlaps(t) for t in taken):
                return str(subnet)
        raise RangeExhausted(f"no free /{self.mask_size} left in cluster CIDR {self.cluster}")


class NodeIPAM:
    def __init__(self, nodes: Registry[core_pb2.Node], allocator: CIDRAllocator, interval: float = 0.2) -> None:
        self.nodes = nodes
        self.allocator = allocator
        self._loop = Periodic("node-ipam", interval, self._pass)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        if not self.nodes.cache.ready.is_set():
            return
        nodes = [e.obj for e in self.nodes.cache.store.values()]
        waiting = [n for n in nodes if not n.spec.podCIDR and not n.metadata.HasField("deletionTimestamp")]
        if not waiting:
            return
        used = {c for n in nodes for c in (n.spec.podCIDR, *n.spec.podCIDRs) if c}
        for node in sorted(waiting, key=lambda n: n.metadata.creationTimestamp.ToNanoseconds()):
            try:
                cidr = self.allocator.allocate(used)
            except RangeExhausted as exc:
                log.warning("node %s: %s", node.metadata.name, exc)
                return
            if await self.assign(node.metadata.name, cidr):
                used.add(cidr)

    async def assign(self, name: str, cidr: str) -> bool:
        try:
            current = await self.nodes.get("", name)
            if current.spec.podCIDR:
                return False  # someone (a user, an earlier pass) set one
            current.spec.podCIDR = cidr
            del current.spec.podCIDRs[:]
            current.spec.podCIDRs.append(cidr)
            await self.nodes.update(current)  # CAS on its resourceVersion
        except errors.ApiError as err:
            log.info("node %s: pod CIDR %s not assigned (retried next pass): %s", name, cidr, err.message)
            return False
        log.info("node %s: pod CIDR %s", name, cidr)
        return True
