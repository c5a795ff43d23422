"""VolumeBinding, as upstream's plugins/volumebinding with its SchedulerVolumeBinder:

- PreFilter: every claim the pod names exists and is not being deleted; a claim that is
  not bound must be of a WaitForFirstConsumer class (an unbound Immediate claim is the
  binder's to bind first); a pod with no claims skips the plugin.
- Filter: a bound claim's volume must exist and its node affinity admit the node; an
  unbound claim needs, on this node, a free volume that satisfies it (smallest first, none
  another pod has just taken) or a class whose provisioner may provision there (its
  allowedTopologies, and the driver's CSIStorageCapacity when it publishes capacity).
- Reserve/Unreserve: the volumes chosen are held for the pod, so that pods scheduled
  meanwhile do not take them.
- PreBind: the chosen volumes get the claim's claimRef, claims to provision get
  `volume.kubernetes.io/selected-node`; then it waits (at most `bindTimeoutSeconds`) until
  the persistent volume binder and the provisioner have bound every claim.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeling import errors
from kubeling.quantity import QuantityError, parse_quantity
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.volumeutil import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    SELECTED_NODE,
    YES,
    claimed_by,
    find_best_match,
    storage_bytes,
)
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import node_selector_matches
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    Resource,
)
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.storage import StorageListers
from scheduler.framework.types import NodeInfo

__all__ = ["VolumeBinding", "BIND_CONFLICT", "NODE_CONFLICT", "NOT_ENOUGH_SPACE", "PV_NOT_EXIST", "UNBOUND_IMMEDIATE"]

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_STATE = "PreFilterVolumeBinding"
DEFAULT_BIND_TIMEOUT = 600.0


@dataclass
class _PodVolumes:
    """What this pod needs, and per node what would bind it."""

    bound: list[core_pb2.PersistentVolumeClaim] = field(default_factory=list)
    delayed: list[core_pb2.PersistentVolumeClaim] = field(default_factory=list)
    # node -> ([(claim, volume) to bind], [claims to provision])
    by_node: dict[str, tuple[list[tuple[core_pb2.PersistentVolumeClaim, core_pb2.PersistentVolume]],
                             list[core_pb2.PersistentVolumeClaim]]] = field(default_factory=dict)


def _key(claim: core_pb2.PersistentVolumeClaim) -> str:
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


def _matches_topology(terms: Sequence[storage_pb2.TopologySelectorTerm], labels: Any) -> bool:
    """upstream's MatchTopologySelectorTerms: no terms, or any term whose every key has one of its values."""
    if not terms:
        return True
    return any(all(labels.get(req.key) in req.values for req in term.matchLabelExpressions) for term in terms)


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin, EnqueueExtensions):
    name = "VolumeBinding"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        timeout = self.args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            from kubeling.options import ConfigError
            raise ConfigError("pluginConfig[VolumeBinding].args.bindTimeoutSeconds: Invalid value: "
                              f"{timeout!r}: must be a non-negative number of seconds")
        self.bind_timeout = float(timeout)
        self._assumed: dict[str, str] = {}  # volume name -> the claim (namespace/name) a reserved pod binds it to

    def _storage(self) -> StorageListers:
        return self.handle.storage() if self.handle is not None else StorageListers()

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        names = [v.persistentVolumeClaim.claimName for v in pod.spec.volumes if v.HasField("persistentVolumeClaim")]
        if not names:
            return None, Status(Code.SKIP)
        storage = self._storage()
        found = _PodVolumes()
        for name in names:
            claim = storage.claim(pod.metadata.namespace, name)
            if claim is None:
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" not found')
            if claim.metadata.HasField("deletionTimestamp"):
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if claim.spec.volumeName:
                found.bound.append(claim)
                continue
            sc = storage.storage_class(claim.spec.storageClassName) if claim.spec.storageClassName else None
            if sc is None or sc.volumeBindingMode != "WaitForFirstConsumer":
                return None, Status.unresolvable(UNBOUND_IMMEDIATE)
            found.delayed.append(claim)
        state.write(_STATE, found)
        return None, SUCCESS

    # ------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: core_pb2.Pod, node: NodeInfo) -> Status:
        found: _PodVolumes | None = state.get(_STATE)
        if found is None or node.node is None:
            return SUCCESS
        storage = self._storage()
        for claim in found.bound:
            volume = storage.volume(claim.spec.volumeName)
            if volume is None:
                return Status.unresolvable(PV_NOT_EXIST)
            if volume.spec.HasField("nodeAffinity") and not node_selector_matches(
                    volume.spec.nodeAffinity.required, node.node):
                return Status.unresolvable(NODE_CONFLICT)
        if not found.delayed:
            return SUCCESS
        reasons: list[str] = []
        bindings: list[tuple[core_pb2.PersistentVolumeClaim, core_pb2.PersistentVolume]] = []
        provisions: list[core_pb2.PersistentVolumeClaim] = []
        taken: set[str] = set()
        volumes = storage.volumes()
        for claim in found.delayed:
            key = _key(claim)

            def fits(volume: core_pb2.PersistentVolume, claim_key: str = key) -> bool:
                holder = self._assumed.get(volume.metadata.name)
                if volume.metadata.name in taken or (holder is not None and holder != claim_key):
                    return False
                return not volume.spec.HasField("nodeAffinity") or node_selector_matches(
                    volume.spec.nodeAffinity.required, node.node)
            volume = find_best_match(claim, volumes, fits)
            if volume is not None:
                taken.add(volume.metadata.name)
                bindings.append((claim, volume))
                continue
            reason = self._provisionable(claim, node, storage)
            if reason:
                reasons.append(reason)
            else:
                provisions.append(claim)
        if reasons:
            return Status.unresolvable(*sorted(set(reasons)))
        found.by_node[node.name] = (bindings, provisions)
        return SUCCESS

    def _provisionable(self, claim: core_pb2.PersistentVolumeClaim, node: NodeInfo,
                       storage: StorageListers) -> str:
        """"" when the claim's class may provision a volume on the node, else the reason."""
        sc = storage.storage_class(claim.spec.storageClassName)
        assert node.node is not None
        if sc is None or not sc.provisioner or sc.provisioner == NO_PROVISIONER:
            return BIND_CONFLICT
        if not _matches_topology(sc.allowedTopologies, node.node.metadata.labels):
            return BIND_CONFLICT
        driver = storage.csi_driver(sc.provisioner)
        if driver is not None and driver.spec.storageCapacity and not self._has_capacity(claim, sc, node, storage):
            return NOT_ENOUGH_SPACE
        return ""

    def _has_capacity(self, claim: core_pb2.PersistentVolumeClaim, sc: storage_pb2.StorageClass, node: NodeInfo,
                      storage: StorageListers) -> bool:
        """Some CSIStorageCapacity of the class, for a topology that includes the node, is
        large enough (upstream's hasEnoughCapacity)."""
        assert node.node is not None
        wanted = storage_bytes(claim.spec.resources.requests)
        for capacity in storage.capacities():
            if capacity.storageClassName != sc.metadata.name:
                continue
            try:
                selector = from_label_selector_proto(capacity.nodeTopology)
            except SelectorError:
                continue
            if selector is None or not selector.matches(node.node.metadata.labels):
                continue
            text = capacity.maximumVolumeSize if capacity.HasField("maximumVolumeSize") else capacity.capacity
            try:
                if parse_quantity(text or "0").int_value() >= wanted:
                    return True
            except QuantityError:
                continue
        return False

    # ------------------------------------------------------------ Reserve

    def reserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status:
        found: _PodVolumes | None = state.get(_STATE)
        if found is None:
            return SUCCESS
        bindings, _ = found.by_node.get(node_name, ([], []))
        for claim, volume in bindings:
            holder = self._assumed.get(volume.metadata.name)
            if holder is not None and holder != _key(claim):
                return Status.unschedulable(BIND_CONFLICT)  # taken by a pod reserved meanwhile
        for claim, volume in bindings:
            self._assumed[volume.metadata.name] = _key(claim)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> None:
        found: _PodVolumes | None = state.get(_STATE)
        if found is None:
            return
        bindings, _ = found.by_node.get(node_name, ([], []))
        for claim, volume in bindings:
            if self._assumed.get(volume.metadata.name) == _key(claim):
                del self._assumed[volume.metadata.name]

    # ------------------------------------------------------------ PreBind

    async def pre_bind(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status:
        found: _PodVolumes | None = state.get(_STATE)
        if found is None or not found.delayed:
            return SUCCESS
        client = self.handle.client if self.handle is not None else None
        if client is None:
            return Status.as_error("VolumeBinding needs an apiserver client to bind volumes")
        bindings, provisions = found.by_node.get(node_name, ([], []))
        try:
            for claim, volume in bindings:
                fresh = await client.persistentvolumes.get(volume.metadata.name)
                if fresh.spec.HasField("claimRef") and not claimed_by(fresh, claim):
                    return Status.as_error(f"volume {volume.metadata.name} was bound to another claim meanwhile")
                fresh.spec.claimRef.CopyFrom(meta_pb2.ObjectReference(
                    kind="PersistentVolumeClaim", apiVersion="v1", namespace=claim.metadata.namespace,
                    name=claim.metadata.name, uid=claim.metadata.uid, resourceVersion=claim.metadata.resourceVersion))
                fresh.metadata.annotations[BOUND_BY_CONTROLLER] = YES
                await client.persistentvolumes.update(fresh)
            for claim in provisions:
                await self._select_node(client, claim, node_name)
            await self._wait_bound([c for c, _ in bindings] + provisions)
        except (errors.ApiError, TimeoutError) as err:
            return Status.as_error(f"binding volumes: {err}")
        finally:
            for _, volume in bindings:
                self._assumed.pop(volume.metadata.name, None)
        return SUCCESS

    async def _select_node(self, client: Any, claim: core_pb2.PersistentVolumeClaim, node: str) -> None:
        """The claim's selected-node annotation: written on the informer's copy, read afresh
        only when that copy was behind (a conflict)."""
        current = core_pb2.PersistentVolumeClaim()
        current.CopyFrom(self._storage().claim(claim.metadata.namespace, claim.metadata.name) or claim)
        for attempt in range(2):
            if current.metadata.annotations.get(SELECTED_NODE) == node:
                return
            current.metadata.annotations[SELECTED_NODE] = node
            try:
                await client.persistentvolumeclaims.update(current)
                return
            except errors.Conflict:
                if attempt:
                    raise
                current = await client.persistentvolumeclaims.get(claim.metadata.name, claim.metadata.namespace)

    async def _wait_bound(self, claims: list[core_pb2.PersistentVolumeClaim]) -> None:
        """Until the binder (and the provisioner) bound every claim (upstream's
        checkBindings), polling the informer's view."""
        deadline = time.monotonic() + self.bind_timeout
        storage = self._storage()
        started = time.monotonic()
        while True:
            pending = []
            for claim in claims:
                current = storage.claim(claim.metadata.namespace, claim.metadata.name)
                if current is None:
                    raise errors.NotFound(f'persistentvolumeclaim "{claim.metadata.name}" not found')
                if current.metadata.annotations.get(BIND_COMPLETED) == YES and current.spec.volumeName:
                    continue
                pending.append(claim)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for the claims {', '.join(map(_key, pending))} to be bound")
            # The binder usually finishes within tens of ms: look every 5 ms (a lookup in the
            # informer's store) for the first seconds, then less often.
            await asyncio.sleep(0.005 if time.monotonic() - started < 2 else 0.2)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD),
                ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.UPDATE),
                ClusterEvent(Resource.PERSISTENT_VOLUME, Action.ADD),
                ClusterEvent(Resource.PERSISTENT_VOLUME, Action.UPDATE),
                ClusterEvent(Resource.STORAGE_CLASS, Action.ADD),
                ClusterEvent(Resource.CSI_NODE, Action.ADD), ClusterEvent(Resource.CSI_NODE, Action.UPDATE),
                ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)]
