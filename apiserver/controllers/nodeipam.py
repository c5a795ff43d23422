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

from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2

__all__ = ["NodeIPAM", "CIDRAllocator", "RangeExhausted"]

log = logging.getLogger(__name__)

class RangeExhausted(Exception):
    pass


class CIDRAllocator:
    """Hands out the subnets of `cluster_cidr` of prefix length `mask_size`, lowest first."""

    def __init__(self, cluster_cidr: str, mask_size: int) -> None:
        self.cluster = ipaddress.ip_network(cluster_cidr, strict=True)
        if not self.cluster.prefixlen <= mask_size <= self.cluster.max_prefixlen:
            raise ValueError(f"node CIDR mask size {mask_size} does not fit in cluster CIDR {cluster_cidr}")
        self.mask_size = mask_size

    def _taken(self, used: set[str]) -> set[int]:
        """The numbers of the subnets that the used ranges overlap (subnet i starts at the
        cluster's base + i × its size): arithmetic, not an overlap test per pair."""
        shift = self.cluster.max_prefixlen - self.mask_size
        base, count = int(self.cluster.network_address), 1 << (self.mask_size - self.cluster.prefixlen)
        taken: set[int] = set()
        for text in used:
            try:
                net = ipaddress.ip_network(text, strict=False)
            except ValueError:
                continue
            if net.version != self.cluster.version:
                continue
            first = (int(net.network_address) - base) >> shift
            last = (int(net.broadcast_address) - base) >> shift
            taken.update(range(max(first, 0), min(last, count - 1) + 1))
        return taken

    def allocate(self, used: set[str]) -> str:
        taken = self._taken(used)
        count = 1 << (self.mask_size - self.cluster.prefixlen)
        index = next((i for i in range(count) if i not in taken), None)
        if index is None:
            raise RangeExhausted(f"no free /{self.mask_size} left in cluster CIDR {self.cluster}")
        size = 1 << (self.cluster.max_prefixlen - self.mask_size)
        start = ipaddress.ip_address(int(self.cluster.network_address) + index * size)
        return f"{start}/{self.mask_size}"


class NodeIPAM:
    def __init__(self, nodes: Registry[core_pb2.Node], allocator: CIDRAllocator, interval: float = 0.2) -> None:
        self.nodes = nodes
        self.allocator = allocator
        self._loop = Periodic("node-ipam", interval, self._pass)
        self._seen_rv = -1  # the nodes' revision the last pass looked at
        self._warned: set[str] = set()  # nodes already told the range is exhausted

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        cache = self.nodes.watch_cache
        if not cache.ready.is_set() or cache.rv == self._seen_rv:
            return  # nothing changed among the nodes since the last pass
        self._seen_rv = cache.rv
        try:
            await self._assign_waiting([e.obj for e in cache.store.values()])
        except BaseException:
            self._seen_rv = -1  # cut short: look again next pass
            raise

    async def _assign_waiting(self, nodes: list[core_pb2.Node]) -> None:
        waiting = [n for n in nodes if not n.spec.podCIDR and not n.metadata.HasField("deletionTimestamp")]
        if not waiting:
            return
        used = {c for n in nodes for c in (n.spec.podCIDR, *n.spec.podCIDRs) if c}
        for node in sorted(waiting, key=lambda n: n.metadata.creationTimestamp.ToNanoseconds()):
            try:
                cidr = self.allocator.allocate(used)
            except RangeExhausted as exc:
                for late in waiting:
                    if late.metadata.name not in self._warned:
                        self._warned.add(late.metadata.name)
                        log.warning("node %s: %s", late.metadata.name, exc)
                return
            if await self.assign(node.metadata.name, cidr):
                used.add(cidr)
                self._warned.discard(node.metadata.name)
            else:
                self._seen_rv = -1  # not assigned: look again next pass

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
