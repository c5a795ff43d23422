"""VolumeRestrictions, as upstream's plugins/volumerestrictions for the volumes kubeling's
pods can have: a claim with the ReadWriteOncePod access mode may be used by one pod in the
cluster. PreFilter counts the pods that already use the pod's ReadWriteOncePod claims;
any makes every node Unschedulable (preemption may remove them: AddPod/RemovePod keep the
count right). The disk conflicts upstream also checks are for gcePersistentDisk,
awsElasticBlockStore, rbd and iscsi volumes, which kubeling's pods cannot have."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["VolumeRestrictions", "RWOP_CONFLICT"]

RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
_STATE = "PreFilterVolumeRestrictions"


@dataclass
class _State:
    claims: frozenset[str]  # namespace/name of the pod's ReadWriteOncePod claims
    conflicts: int  # pods that use one of them


def _claims_of(pod: core_pb2.Pod) -> set[str]:
    return {f"{pod.metadata.namespace}/{v.persistentVolumeClaim.claimName}" for v in pod.spec.volumes
            if v.HasField("persistentVolumeClaim")}


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "VolumeRestrictions"

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        storage = self.handle.storage() if self.handle is not None else None
        once: set[str] = set()
        for key in _claims_of(pod):
            namespace, name = key.split("/", 1)
            claim = storage.claim(namespace, name) if storage is not None else None
            if claim is not None and "ReadWriteOncePod" in claim.spec.accessModes:
                once.add(key)
        if not once:
            return None, Status(Code.SKIP)
        conflicts = sum(1 for node in nodes for pi in node.pods
                        if pi.pod.metadata.uid != pod.metadata.uid and _claims_of(pi.pod) & once)
        state.write(_STATE, _State(frozenset(once), conflicts))
        return None, SUCCESS

    def add_pod(self, state: CycleState, pod: core_pb2.Pod, added: PodInfo, node: NodeInfo) -> Status:
        found: _State | None = state.get(_STATE)
        if found is not None and _claims_of(added.pod) & found.claims:
            found.conflicts += 1
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: core_pb2.Pod, removed: PodInfo, node: NodeInfo) -> Status:
        found: _State | None = state.get(_STATE)
        if found is not None and _claims_of(removed.pod) & found.claims:
            found.conflicts -= 1
        return SUCCESS

    def filter(self, state: CycleState, pod: core_pb2.Pod, node: NodeInfo) -> Status:
        found: _State | None = state.get(_STATE)
        if found is not None and found.conflicts > 0:
            return Status.unschedulable(RWOP_CONFLICT)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD),
                ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.UPDATE)]
