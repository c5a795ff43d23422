"""The node lifecycle controller, as upstream's pkg/controller/nodelifecycle: a node whose
kubelet stopped heartbeating (its Lease in kube-node-lease not renewed, nor its Ready
condition) for `grace` seconds gets its conditions set to Unknown ("Kubelet stopped
posting node status."), its pods marked not Ready, and upstream's taints by condition:
Ready Unknown → `node.kubernetes.io/unreachable`, Ready False → `node.kubernetes.io/
not-ready`, each as NoSchedule (the scheduler keeps new pods away) and NoExecute (the
taint eviction deletes pods that do not tolerate it); MemoryPressure, DiskPressure and
PIDPressure → `node.kubernetes.io/{memory,disk,pid}-pressure` as NoSchedule. A node well
again loses them.

Heartbeats are judged by when this controller saw them change, not by the timestamps
they carry, as upstream does (a kubelet's clock may be off).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NODE_NAME, Informer
from kubeling.timestamps import now as _now
from protos.kubeling.v1 import coordination_pb2, core_pb2

__all__ = ["NodeLifecycleController", "UNREACHABLE", "NOT_READY", "LEASE_NAMESPACE"]

log = logging.getLogger(__name__)

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
LEASE_NAMESPACE = "kube-node-lease"
_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_TAINT_FOR = {"Unknown": UNREACHABLE, "False": NOT_READY}
_PRESSURE_TAINTS = {"MemoryPressure": "node.kubernetes.io/memory-pressure",
                    "DiskPressure": "node.kubernetes.io/disk-pressure",
                    "PIDPressure": "node.kubernetes.io/pid-pressure"}


@dataclass
class _Health:
    probe: bytes  # the heartbeats as last seen (lease renewTime, Ready's lastHeartbeatTime)
    seen_at: float  # when they last changed, by this controller's clock


def _ready(node: core_pb2.Node) -> core_pb2.NodeCondition | None:
    return next((c for c in node.status.conditions if c.type == "Ready"), None)


@dataclass
class NodeLifecycleController:
    client: Client
    nodes: Informer[core_pb2.Node]
    leases: Informer[coordination_pb2.Lease]
    pods: Informer[core_pb2.Pod]
    grace: float = 40.0  # --node-monitor-grace-period
    clock: Callable[[], float] = time.monotonic
    _health: dict[str, _Health] = field(default_factory=dict)

    async def monitor(self) -> None:
        """One pass over every node (upstream's monitorNodeHealth, every --node-monitor-period)."""
        now = self.clock()
        names = set()
        for node in self.nodes.store.list():
            name = node.metadata.name
            names.add(name)
            try:
                await self._node(node, now)
            except errors.ApiError as err:  # a conflict with the kubelet's write: the next pass retries
                log.info("node %s: %s", name, err.message)
        for gone in set(self._health) - names:
            del self._health[gone]

    async def _node(self, node: core_pb2.Node, now: float) -> None:
        name = node.metadata.name
        lease = self.leases.store.get(f"{LEASE_NAMESPACE}/{name}")
        ready = _ready(node)
        probe = (lease.spec.renewTime.SerializeToString() if lease is not None else b"") + b"|" + \
            (ready.lastHeartbeatTime.SerializeToString() if ready is not None else b"")
        health = self._health.get(name)
        if health is None or health.probe != probe:
            self._health[name] = health = _Health(probe, now)
        if now - health.seen_at > self.grace and (ready is None or ready.status != "Unknown"):
            node = await self._mark_unknown(node)
            await self._mark_pods_not_ready(name)
        await self._taint(node)

    async def _mark_unknown(self, node: core_pb2.Node) -> core_pb2.Node:
        name = node.metadata.name
        log.warning("node %s: no heartbeat for %.0fs: conditions Unknown", name, self.grace)
        updated = core_pb2.Node()
        updated.CopyFrom(node)
        stamp = _now()
        present = {c.type for c in updated.status.conditions}
        for kind in _CONDITIONS:
            if kind not in present:
                updated.status.conditions.add(type=kind, lastTransitionTime=stamp)
        for c in updated.status.conditions:
            if c.type in _CONDITIONS and c.status != "Unknown":
                c.status, c.reason, c.message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
                c.lastTransitionTime.CopyFrom(stamp)
        return await self.client.nodes.update_status(updated)

    async def _mark_pods_not_ready(self, node: str) -> None:
        """Upstream's MarkPodsNotReady: what ran there is not known to serve any longer."""
        for pod in self.pods.store.by_index(INDEX_NODE_NAME, node):
            ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
            if ready is None or ready.status != "True" or pod.status.phase in ("Succeeded", "Failed"):
                continue
            updated = core_pb2.Pod()
            updated.CopyFrom(pod)
            for c in updated.status.conditions:
                if c.type == "Ready":
                    c.status, c.reason = "False", "NodeNotReady"
                    c.lastTransitionTime.CopyFrom(_now())
            try:
                await self.client.pods.update_status(updated)
            except errors.ApiError as err:
                log.info("pod %s/%s: not marked not ready: %s", pod.metadata.namespace, pod.metadata.name,
                         err.message)

    async def _taint(self, node: core_pb2.Node) -> None:
        ready = _ready(node)
        wanted_key = _TAINT_FOR.get(ready.status) if ready is not None else None
        # upstream's taints by condition: a node under pressure takes no new pods (NoSchedule)
        pressed = {_PRESSURE_TAINTS[c.type] for c in node.status.conditions
                   if c.type in _PRESSURE_TAINTS and c.status == "True"}
        ours = {UNREACHABLE, NOT_READY, *_PRESSURE_TAINTS.values()}
        kept = [t for t in node.spec.taints if t.key not in ours or t.key == wanted_key or
                (t.key in pressed and t.effect == "NoSchedule")]
        have = {(t.key, t.effect) for t in kept}
        added = [core_pb2.Taint(key=wanted_key, effect=effect, timeAdded=_now())
                 for effect in ("NoSchedule", "NoExecute") if wanted_key and (wanted_key, effect) not in have]
        added += [core_pb2.Taint(key=key, effect="NoSchedule", timeAdded=_now()) for key in sorted(pressed)
                  if (key, "NoSchedule") not in have]
        if not added and len(kept) == len(node.spec.taints):
            return
        updated = core_pb2.Node()
        updated.CopyFrom(node)
        del updated.spec.taints[:]
        updated.spec.taints.extend([*kept, *added])
        log.info("node %s: taints %s", node.metadata.name,
                 ", ".join(f"{t.key}:{t.effect}" for t in updated.spec.taints) or "none")
        await self.client.nodes.update(updated)
