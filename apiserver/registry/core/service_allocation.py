"""A Service's ClusterIP and node ports, taken from the durable allocators while it is
written and given back when it goes (upstream's service storage: beginCreate,
beginUpdate and afterDelete around the generic registry), and the repair that makes the
bitmaps agree with the stored Services again (upstream's ipallocator and portallocator
repair controllers)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from apiserver.registry.core.allocator import AlreadyAllocated, OutOfRange, RangeAllocator, RangeFull
from apiserver.registry.core.services import NONE, allocates_node_ports, headless, needs_health_check, uses_node_ports
from apiserver.registry.generic.store import Finish, Registry
from apiserver.storage.etcd import prefix_end
from kubeling import errors
from kubeling.errors import FieldViolation
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2

__all__ = ["ServiceAllocations", "AllocationRepair", "LEAK_PASSES"]

log = logging.getLogger(__name__)

# A bit set with no Service holding it is freed only after this many repair passes saw it
# so (upstream's numRepairsBeforeLeakCleanup): a create between allocation and write is no leak.
LEAK_PASSES = 3


def _invalid(svc: core_pb2.Service, path: str, detail: str) -> errors.Invalid:
    violation = FieldViolation(path, f"Invalid value: {detail}")
    return errors.Invalid(f'Service "{svc.metadata.name}" is invalid: {violation}',
                          metadata={"kind": "Service", "name": svc.metadata.name}, violations=[violation])


def node_ports(svc: core_pb2.Service) -> set[str]:
    """The node ports a Service holds: its ports' and its health check's."""
    held = {str(p.nodePort) for p in svc.spec.ports if p.nodePort} if uses_node_ports(svc) else set()
    if needs_health_check(svc) and svc.spec.healthCheckNodePort:
        held.add(str(svc.spec.healthCheckNodePort))
    return held


def cluster_ip(svc: core_pb2.Service) -> str:
    ip = svc.spec.clusterIP
    return ip if ip and ip != NONE and svc.spec.type != "ExternalName" else ""


@dataclass
class _Taken:
    """What one write took, to give back if the write does not happen."""

    ips: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)


class ServiceAllocations:
    """The Service registry's write hooks."""

    def __init__(self, ips: RangeAllocator, ports: RangeAllocator) -> None:
        self.ips = ips
        self.ports = ports

    async def _ip(self, svc: core_pb2.Service, dry_run: bool, taken: _Taken) -> None:
        spec = svc.spec
        if spec.type == "ExternalName":
            spec.ClearField("ipFamilies")
            spec.ClearField("ipFamilyPolicy")
            return
        spec.ipFamilyPolicy = spec.ipFamilyPolicy or "SingleStack"
        if not spec.ipFamilies:
            spec.ipFamilies.append("IPv4")
        if headless(svc):
            del spec.clusterIPs[:]
            spec.clusterIPs.append(NONE)
            return
        wanted = spec.clusterIP or None
        try:
            ip = await (self.ips.would_allocate(wanted) if dry_run else self.ips.allocate(wanted))
        except OutOfRange:
            raise _invalid(svc, "spec.clusterIPs", f'["{wanted}"]: failed to allocate IP {wanted}: the provided IP '
                                                    f"({wanted}) is not in the valid range. The range of valid IPs "
                                                    f"is {self.ips.range.text}") from None
        except AlreadyAllocated:
            raise _invalid(svc, "spec.clusterIPs", f'["{wanted}"]: failed to allocate IP {wanted}: provided IP '
                                                    "is already allocated") from None
        except RangeFull:
            raise _invalid(svc, "spec.clusterIPs", "[]: failed to allocate a serviceIP: range is full") from None
        if not dry_run:
            taken.ips.append(ip)
        spec.clusterIP = ip
        del spec.clusterIPs[:]
        spec.clusterIPs.append(ip)

    async def _ports(self, svc: core_pb2.Service, keep: set[str], dry_run: bool, taken: _Taken) -> None:
        """Node ports for every port lacking one (unless a LoadBalancer declines them) and the
        health check's; those in `keep` are already this Service's."""
        if not uses_node_ports(svc):
            return
        mine = set(keep)
        allocate = allocates_node_ports(svc)
        for i, port in enumerate(svc.spec.ports):
            if port.nodePort and str(port.nodePort) in mine:
                continue  # kept from before, or shared by a TCP and a UDP port of this Service
            if not port.nodePort and not allocate:
                continue
            port.nodePort = await self._port(svc, f"spec.ports[{i}].nodePort", port.nodePort, dry_run, taken)
            mine.add(str(port.nodePort))
        if needs_health_check(svc):
            wanted = svc.spec.healthCheckNodePort
            if not wanted or str(wanted) not in mine:
                svc.spec.healthCheckNodePort = await self._port(svc, "spec.healthCheckNodePort", wanted, dry_run,
                                                                taken)

    async def _port(self, svc: core_pb2.Service, path: str, number: int, dry_run: bool, taken: _Taken) -> int:
        """`number` (0: any free one) taken from the node port range."""
        wanted = str(number) if number else None
        try:
            value = await (self.ports.would_allocate(wanted) if dry_run else self.ports.allocate(wanted))
        except OutOfRange:
            raise _invalid(svc, path, f"{number}: provided port is not in the valid range. The range of valid "
                                      f"ports is {self.ports.range.text}") from None
        except AlreadyAllocated:
            raise _invalid(svc, path, f"{number}: provided port is already allocated") from None
        except RangeFull:
            raise _invalid(svc, path, "0: range is full") from None
        if not dry_run:
            taken.ports.append(value)
        return int(value)

    async def _give_back(self, taken: _Taken) -> None:
        await self.ips.release(taken.ips)
        await self.ports.release(taken.ports)

    async def begin_create(self, obj: core_pb2.Service, dry_run: bool) -> Finish:
        taken = _Taken()
        try:
            await self._ip(obj, dry_run, taken)
            await self._ports(obj, set(), dry_run, taken)
        except BaseException:
            await self._give_back(taken)
            raise

        async def finish(stored: bool) -> None:
            if not stored:
                await self._give_back(taken)
        return finish

    async def begin_update(self, new: core_pb2.Service, old: core_pb2.Service, dry_run: bool) -> Finish:
        taken = _Taken()
        try:
            if not cluster_ip(old) and new.spec.type != "ExternalName" and not (
                    old.spec.clusterIP == NONE and headless(new)):
                await self._ip(new, dry_run, taken)  # e.g. ExternalName -> ClusterIP
            await self._ports(new, node_ports(old), dry_run, taken)
        except BaseException:
            await self._give_back(taken)
            raise
        # what the old object held and the new one does not: freed once the update is stored
        freed = _Taken([ip for ip in [cluster_ip(old)] if ip and ip != cluster_ip(new)],
                       sorted(node_ports(old) - node_ports(new)))

        async def finish(stored: bool) -> None:
            if not stored:
                await self._give_back(taken)
            elif not dry_run:
                await self._give_back(freed)
        return finish

    async def after_delete(self, obj: core_pb2.Service) -> None:
        ip = cluster_ip(obj)
        await self.ips.release([ip] if ip else [])
        await self.ports.release(node_ports(obj))


class AllocationRepair:
    """Every `interval`: bits the stored Services hold but the bitmaps lack are set (an etcd
    restored from backup, a range just configured), bits no Service holds for LEAK_PASSES
    passes in a row are freed (a create that died between allocation and write)."""

    def __init__(self, services: Registry[core_pb2.Service], ips: RangeAllocator, ports: RangeAllocator,
                 interval: float = 60.0) -> None:
        self.services = services
        self.ips = ips
        self.ports = ports
        self._leaks: dict[tuple[str, str], int] = {}
        self._loop = Periodic("service-allocation-repair", interval, self.repair, first_at_start=True)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def repair(self) -> None:
        # the bitmaps first, then the Services: anything allocated before the list is in it
        stored_ips, stored_ports = await self.ips.taken(), await self.ports.taken()
        kvs, _, _, _ = await self.services.storage.range(self.services.prefix, prefix_end(self.services.prefix))
        used_ips: set[str] = set()
        used_ports: set[str] = set()
        for kv in kvs:
            if kv.key == self.services.prefix:
                continue  # the watch cache's progress marker, not a Service
            svc = self.services.decode(kv)
            if ip := cluster_ip(svc):
                used_ips.add(ip)
            used_ports |= node_ports(svc)
        await self._fix("ip", self.ips, stored_ips, used_ips)
        await self._fix("port", self.ports, stored_ports, used_ports)

    async def _fix(self, what: str, allocator: RangeAllocator, stored: set[str], used: set[str]) -> None:
        missing = set()
        for value in used - stored:
            try:
                allocator.range.index(value)
            except (OutOfRange, ValueError):
                log.warning("a Service holds %s %s outside the configured range %s", what, value,
                            allocator.range.text)
                continue
            missing.add(value)
        leaked = stored - used
        for key in [k for k in self._leaks if k[0] == what and k[1] not in leaked]:
            del self._leaks[key]
        freed = set()
        for value in leaked:
            seen = self._leaks.get((what, value), 0) + 1
            if seen >= LEAK_PASSES:
                freed.add(value)
                self._leaks.pop((what, value), None)
            else:
                self._leaks[(what, value)] = seen
        if missing or freed:
            log.info("service %s allocations repaired: %d marked taken, %d leaked freed", what, len(missing),
                     len(freed))
            await allocator.reconcile(missing, freed)
