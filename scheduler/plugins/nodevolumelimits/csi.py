"""NodeVolumeLimits, as upstream's plugins/nodevolumelimits/csi.go: a node's CSINode says,
per driver, how many volumes it may have (allocatable.count); the volumes of the pods on
the node (unique by volume handle) plus the pod's new ones must not exceed it. A claim not
bound yet counts for its class's provisioner, once."""

from __future__ import annotations

from collections.abc import Sequence

from protos.kubeling.v1 import core_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Resource,
)
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.storage import StorageListers
from scheduler.framework.types import NodeInfo

__all__ = ["NodeVolumeLimits", "MAX_VOLUME_COUNT_EXCEEDED"]

MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"


def csi_volumes(pod: core_pb2.Pod, storage: StorageListers) -> dict[str, str]:
    """volume handle (or, unbound, namespace/claim) -> driver, for the pod's CSI claims."""
    out: dict[str, str] = {}
    for v in pod.spec.volumes:
        if not v.HasField("persistentVolumeClaim"):
            continue
        claim = storage.claim(pod.metadata.namespace, v.persistentVolumeClaim.claimName)
        if claim is None:
            continue
        volume = storage.volume(claim.spec.volumeName) if claim.spec.volumeName else None
        if volume is not None and volume.spec.HasField("csi"):
            out[volume.spec.csi.volumeHandle] = volume.spec.csi.driver
        elif volume is None and claim.spec.storageClassName:
            sc = storage.storage_class(claim.spec.storageClassName)
            if sc is not None and sc.provisioner:
                out[f"{pod.metadata.namespace}/{claim.metadata.name}"] = sc.provisioner
    return out


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodeVolumeLimits"

    def _storage(self) -> StorageListers:
        return self.handle.storage() if self.handle is not None else StorageListers()

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        if not any(v.HasField("persistentVolumeClaim") for v in pod.spec.volumes):
            return None, Status(Code.SKIP)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: core_pb2.Pod, node: NodeInfo) -> Status:
        storage = self._storage()
        new = csi_volumes(pod, storage)
        if not new:
            return SUCCESS
        csinode = storage.csi_node(node.name)
        if csinode is None:
            return SUCCESS  # no limits known (upstream: none to enforce)
        limits = {d.name: d.allocatable.count for d in csinode.spec.drivers if d.allocatable.HasField("count")}
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        for pi in node.pods:
            attached.update(csi_volumes(pi.pod, storage))
        for driver, limit in limits.items():
            used = {h for h, d in attached.items() if d == driver}
            wanted = {h for h, d in new.items() if d == driver} - used
            if wanted and len(used) + len(wanted) > limit:
                return Status.unschedulable(MAX_VOLUME_COUNT_EXCEEDED)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.CSI_NODE, Action.ADD), ClusterEvent(Resource.CSI_NODE, Action.UPDATE),
                ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD)]
