"""Test objects shaped like upstream's st.MakePod / st.MakeNode."""

from __future__ import annotations

import itertools

from protos.kubeling.v1 import apps_pb2, core_pb2
from scheduler.cache import Cache, Snapshot
from scheduler.framework.storage import StorageListers
from scheduler.framework.types import NodeInfo, PodInfo

_uids = itertools.count()


def make_pod(name: str = "", *containers: dict[str, str], node: str = "", priority: int = 0,
             tolerations: list[core_pb2.Toleration] | None = None, labels: dict[str, str] | None = None,
             scheduler: str = "default-scheduler") -> core_pb2.Pod:
    """One container per requests dict (no containers at all when none, as st.MakePod().Obj())."""
    pod = core_pb2.Pod()
    pod.metadata.name = name or f"pod-{next(_uids)}"
    pod.metadata.namespace = "default"
    pod.metadata.uid = f"uid-{pod.metadata.name}-{next(_uids)}"
    pod.metadata.labels.update(labels or {})
    pod.spec.nodeName = node
    pod.spec.priority = priority
    pod.spec.schedulerName = scheduler
    for i, req in enumerate(containers):
        c = pod.spec.containers.add(name=f"c{i}", image="busybox")
        c.resources.requests.update(req)
    pod.spec.tolerations.extend(tolerations or [])
    return pod


def make_node(name: str, cpu: str = "", memory: str = "", pods: str = "", *,
              labels: dict[str, str] | None = None, taints: list[core_pb2.Taint] | None = None,
              extra: dict[str, str] | None = None) -> core_pb2.Node:
    node = core_pb2.Node()
    node.metadata.name = name
    node.metadata.labels.update(labels or {})
    for key, value in (("cpu", cpu), ("memory", memory), ("pods", pods), *(extra or {}).items()):
        if value:
            node.status.capacity[key] = value
            node.status.allocatable[key] = value
    node.spec.taints.extend(taints or [])
    return node


def snapshot_of(nodes: dict[str, dict[str, str]], pods: list[core_pb2.Pod]) -> Snapshot:
    """A snapshot of nodes (8 cpu, 8Gi, 110 pods; name -> labels) with these pods placed."""
    cache = Cache()
    for name, labels in nodes.items():
        cache.add_node(make_node(name, "8", "8Gi", "110", labels=labels))
    for p in pods:
        cache.add_pod(p)
    snap = Snapshot()
    cache.update_snapshot(snap)
    return snap


def node_info(node: core_pb2.Node, *pods: core_pb2.Pod) -> NodeInfo:
    info = NodeInfo()
    info.set_node(node)
    for p in pods:
        info.add_pod(PodInfo.of(p))
    return info


class SnapshotHandle:
    """A plugin Handle over a snapshot, for plugin tests (the Scheduler is the real one),
    with the Services and ReplicaSets its informers would hold."""

    def __init__(self, snap: object, services: list[core_pb2.Service] | None = None,
                 replica_sets: list[apps_pb2.ReplicaSet] | None = None) -> None:
        self.snap = snap
        self.client = None
        self._services = services or []
        self._replica_sets = replica_sets or []
        self.storage_listers = StorageListers()

    def services(self, namespace: str) -> list[core_pb2.Service]:
        return [s for s in self._services if s.metadata.namespace == namespace]

    def replica_set(self, namespace: str, name: str) -> apps_pb2.ReplicaSet | None:
        return next((rs for rs in self._replica_sets
                     if rs.metadata.namespace == namespace and rs.metadata.name == name), None)

    def storage(self) -> StorageListers:
        return self.storage_listers

    def node_infos(self):
        return self.snap.node_infos()  # type: ignore[attr-defined]

    def node_info(self, name: str):
        return self.snap.get(name)  # type: ignore[attr-defined]

    def node_table(self):
        return self.snap.table  # type: ignore[attr-defined]


class FailureLog:
    """A Recorder that keeps (reason, message, nominated node) of every failure."""

    def __init__(self) -> None:
        self.failures: list[tuple[str, str, str | None]] = []
        self.annotations: list[dict[str, str] | None] = []

    def scheduled(self, pod: object, node: str) -> None:
        pass

    def failed(self, pod: object, reason: str, message: str, nominated: str | None,
               annotations: dict[str, str] | None = None) -> None:
        self.failures.append((reason, message, nominated))
        self.annotations.append(annotations)
