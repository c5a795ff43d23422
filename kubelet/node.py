"""The kubelet's Node: registration (kubelet_node_status.go), the node Lease renewed
every 10 s (nodelease), and status conditions written on change and at least every
report period — Ready from the runtime's Status, the pressures from the machine."""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.timestamp_pb2 import Timestamp

from kubelet.config import parse_taint
from kubelet.runtime import CRICallError, Runtime
from kubeling import errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.quantity import parse_quantity
from kubeling.version import KUBELET_VERSION
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2
from protos.runtime.v1 import api_pb2

__all__ = ["NodeManager", "machine_capacity", "LEASE_NAMESPACE", "allocatable", "node_images", "MAX_IMAGES"]

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
# Upstream's hard eviction defaults: memory.available<100Mi, nodefs.available<10%.


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return out


def machine_capacity(max_pods: int) -> dict[str, str]:
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{_meminfo()['MemTotal'] // 1024}Ki", "pods": str(max_pods)}


MAX_IMAGES = 50  # upstream's nodeStatusMaxImages: the largest ones


def node_images(images: list[api_pb2.Image]) -> list[core_pb2.ContainerImage]:
    """status.images: the node's images, largest first, names then digests."""
    ordered = sorted(images, key=lambda i: i.size, reverse=True)[:MAX_IMAGES]
    return [core_pb2.ContainerImage(names=[*i.repo_digests, *i.repo_tags], sizeBytes=i.size) for i in ordered]


def allocatable(capacity: dict[str, str], reserved: dict[str, str], eviction_memory: Callable[[int], int]) -> dict[
        str, str]:
    """capacity less what is reserved (cpu in millicores, memory in Ki), never below zero."""
    out = dict(capacity)
    cpu = parse_quantity(capacity["cpu"]).milli_value() - parse_quantity(reserved.get("cpu", "0")).milli_value()
    out["cpu"] = f"{max(0, cpu)}m" if cpu % 1000 else str(max(0, cpu // 1000))
    memory = parse_quantity(capacity["memory"]).int_value()
    held = parse_quantity(reserved.get("memory", "0")).int_value() + eviction_memory(memory)
    out["memory"] = f"{max(0, memory - held) // 1024}Ki"
    for name, value in reserved.items():
        if name not in ("cpu", "memory") and name in out:
            out[name] = str(max(0, parse_quantity(out[name]).int_value() - parse_quantity(value).int_value()))
    return out


def _read(path: str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip('"')
    return "Linux"


def _arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def _condition(kind: str, status: bool, reason: str, message: str) -> core_pb2.NodeCondition:
    return core_pb2.NodeCondition(type=kind, status="True" if status else "False", reason=reason, message=message)


def _now() -> Timestamp:
    t = Timestamp()
    t.FromSeconds(int(time.time()))
    return t


@dataclass
class NodeManager:
    client: Client
    runtime: Runtime
    node_name: str
    node_ip: str
    daemon_port: int
    state_dir: Path
    max_pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    report_frequency: float = 60.0
    lease_duration: int = 40
    pressure: Callable[[], set[str]] = set  # the eviction manager's conditions under pressure
    # what allocatable leaves out of capacity: --system-reserved and --kube-reserved summed,
    # and memory the hard eviction threshold holds back (upstream's node allocatable)
    reserved: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)  # registered with (key[=value]:Effect), at creation only
    eviction_memory: Callable[[int], int] = lambda capacity: 0
    _images: list[core_pb2.ContainerImage] = field(default_factory=list)
    node: core_pb2.Node | None = None
    _last_report: float = 0.0
    _runtime_version: str = ""
    _own: Informer[core_pb2.Node] | None = None  # this node, watched (upstream's node lister)

    # ---- registration ----

    def _initial_node(self) -> core_pb2.Node:
        labels = {"kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": _arch(), **self.labels}
        node = core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=self.node_name, labels=labels))
        for text in self.taints:
            key, value, effect = parse_taint(text)
            node.spec.taints.add(key=key, value=value, effect=effect)
        self._fill_static_status(node)
        return node

    def _fill_static_status(self, node: core_pb2.Node) -> None:
        capacity = machine_capacity(self.max_pods)
        status = node.status
        status.capacity.clear()
        status.capacity.update(capacity)
        status.allocatable.clear()
        status.allocatable.update(allocatable(capacity, self.reserved, self.eviction_memory))
        del status.images[:]
        status.images.extend(self._images)
        del status.addresses[:]
        status.addresses.extend([core_pb2.NodeAddress(type="InternalIP", address=self.node_ip),
                                 core_pb2.NodeAddress(type="Hostname", address=self.node_name)])
        status.daemonEndpoints.kubeletEndpoint.Port = self.daemon_port
        info = status.nodeInfo
        info.machineID = _read("/etc/machine-id")
        info.systemUUID = _read("/sys/class/dmi/id/product_uuid", info.machineID)
        info.bootID = _read("/proc/sys/kernel/random/boot_id")
        info.kernelVersion = platform.release()
        info.osImage = _os_image()
        info.containerRuntimeVersion = self._runtime_version
        info.kubeletVersion = KUBELET_VERSION
        info.operatingSystem = "linux"
        info.architecture = _arch()

    async def register(self) -> core_pb2.Node:
        """Create the Node, or take over the one that exists (after a restart), with fresh status."""
        version = await self.runtime.version()
        self._runtime_version = f"{version.runtime_name}://{version.runtime_version}"
        while True:
            try:
                node = await self.client.nodes.create(self._initial_node())
                log.info("node %s registered", self.node_name)
                break
            except errors.AlreadyExists:
                node = await self.client.nodes.get(self.node_name)
                for key, value in self._initial_node().metadata.labels.items():
                    node.metadata.labels[key] = value
                try:
                    node = await self.client.nodes.update(node)
                except errors.Conflict:
                    continue
                log.info("node %s already registered: taken over", self.node_name)
                break
        self.node = node
        await self.update_status(force=True)
        return self.node

    async def wait_for_pod_cidr(self, timeout: float | None = None) -> str:
        """The pod CIDR the apiserver allocated to this node (it takes a moment after creation)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            node = await self.client.nodes.get(self.node_name)
            if node.spec.podCIDR:
                self.node = node
                return node.spec.podCIDR
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"node {self.node_name} got no pod CIDR (is the apiserver's --cluster-cidr set?)")
            await asyncio.sleep(0.1)

    # ---- lease ----

    async def renew_lease(self) -> None:
        spec = coordination_pb2.LeaseSpec(holderIdentity=self.node_name, leaseDurationSeconds=self.lease_duration,
                                          renewTime=_now())
        spec.renewTime.nanos = time.time_ns() % 1_000_000_000 // 1000 * 1000  # MicroTime
        try:
            lease = await self.client.leases.get(self.node_name, LEASE_NAMESPACE)
        except errors.NotFound:
            lease = coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(name=self.node_name,
                                                                        namespace=LEASE_NAMESPACE), spec=spec)
            if self.node is not None:
                lease.metadata.ownerReferences.add(apiVersion="v1", kind="Node", name=self.node_name,
                                                   uid=self.node.metadata.uid)
            try:
                await self.client.leases.create(lease)
            except errors.AlreadyExists:
                pass
            return
        lease.spec.CopyFrom(spec)
        try:
            await self.client.leases.update(lease)
        except errors.Conflict:
            pass  # someone else wrote it: the next renewal (in 10 s) wins

    # ---- status ----

    async def _conditions(self) -> list[core_pb2.NodeCondition]:
        runtime_ok, network_ok, why = True, True, ""
        try:
            conditions = {c.type: c for c in (await self.runtime.status()).status.conditions}
            for kind in ("RuntimeReady", "NetworkReady"):
                c = conditions.get(kind)
                if c is None or not c.status:
                    runtime_ok = runtime_ok and kind != "RuntimeReady"
                    network_ok = network_ok and kind != "NetworkReady"
                    why += f"{kind}=false reason:{c.reason if c else ''} message:{c.message if c else ''}"
        except CRICallError as exc:
            runtime_ok, why = False, f"container runtime is down: {exc}"
        pressure = self.pressure()
        memory_pressure, disk_pressure = "MemoryPressure" in pressure, "DiskPressure" in pressure
        pid_pressure = "PIDPressure" in pressure
        ready = runtime_ok and network_ok

        return [
            _condition("MemoryPressure", memory_pressure,
                       *(("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
                         if memory_pressure
                         else ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"))),
            _condition("DiskPressure", disk_pressure,
                       *(("KubeletHasDiskPressure", "kubelet has disk pressure")
                         if disk_pressure else ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"))),
            _condition("PIDPressure", pid_pressure,
                       *(("KubeletHasInsufficientPID", "kubelet has insufficient PID available")
                         if pid_pressure else ("KubeletHasSufficientPID", "kubelet has sufficient PID available"))),
            _condition("NetworkUnavailable", not network_ok,
                       *(("NetworkPluginNotReady", f"container runtime network not ready: {why}")
                         if not network_ok else ("NetworkReady", "the pod network is ready"))),
            _condition("Ready", ready, *(("KubeletReady", "kubelet is posting ready status") if ready else
                                         ("KubeletNotReady", f"container runtime not ready: {why}"))),
        ]

    async def watch_own_node(self) -> None:
        """Keep a copy of this Node from a watch on it (`metadata.name=<node>`), as upstream's
        kubelet does with its node informer: the status loop then reads no Node from the
        apiserver every 10 s — at thousands of nodes, half of all requests."""
        self._own = Informer(self.client.nodes, field_selector=f"metadata.name={self.node_name}")
        await self._own.start()
        await self._own.wait_synced(timeout=60)

    async def stop(self) -> None:
        if self._own is not None:
            await self._own.stop()
            self._own = None

    def _latest_known(self) -> core_pb2.Node | None:
        """The watched copy, or the one this kubelet last wrote when the watch has not brought
        it yet (writing over an older copy would only be refused)."""
        watched = self._own.store.get(self.node_name) if self._own is not None else None
        if watched is None or self.node is None:
            return watched or self.node
        newer = int(watched.metadata.resourceVersion or 0) >= int(self.node.metadata.resourceVersion or 0)
        return watched if newer else self.node

    async def update_status(self, force: bool = False) -> None:
        """Write conditions when they changed, or when the report period passed (heartbeat)."""
        for attempt in range(5):
            # The first try from what this kubelet knows, as upstream's tryUpdateNodeStatus
            # (its node lister); before the watch runs, from the apiserver's cache but never
            # older than the copy last seen or written; after a conflict, from etcd.
            known = self._latest_known() if attempt == 0 and self._own is not None else None
            if known is not None:
                node = core_pb2.Node()
                node.CopyFrom(known)
            else:
                seen = self.node.metadata.resourceVersion if self.node is not None and attempt == 0 else ""
                node = await self.client.nodes.get(self.node_name, resource_version=seen)
            old = {c.type: c for c in node.status.conditions}
            new = await self._conditions()
            changed = any(old.get(c.type) is None or (old[c.type].status, old[c.type].reason) != (c.status, c.reason)
                          for c in new)
            due = time.monotonic() - self._last_report >= self.report_frequency
            if not (changed or due or force):
                self.node = node
                return
            now = _now()
            for c in new:
                before = old.get(c.type)
                c.lastHeartbeatTime.CopyFrom(now)
                c.lastTransitionTime.CopyFrom(before.lastTransitionTime if before is not None and
                                              before.status == c.status else now)
            del node.status.conditions[:]
            node.status.conditions.extend(new)
            try:
                self._images = node_images(await self.runtime.list_images())
            except CRICallError as exc:
                log.info("node %s: images not listed: %s", self.node_name, exc)
            self._fill_static_status(node)
            try:
                self.node = await self.client.nodes.update_status(node)
            except errors.Conflict:
                continue
            self._last_report = time.monotonic()
            if changed:
                log.info("node %s: %s", self.node_name,
                         ", ".join(f"{c.type}={c.status}" for c in new))
            return
