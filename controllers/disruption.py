"""The disruption controller, as upstream's pkg/controller/disruption: each
PodDisruptionBudget's status — the pods it covers (expectedPods), how many of them are
healthy (Ready), how many must stay healthy, and so how many may be disrupted now.
A percentage, or maxUnavailable, counts against the pods' controllers' scale (their
ReplicaSets', or the Deployments owning those), as upstream does."""

from __future__ import annotations

import logging
import time

from controllers.controllerref import controller_of, is_ready
from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.intstr import scaled_value
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.timestamps import now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2, policy_pb2

__all__ = ["DisruptionController", "budget_status"]

log = logging.getLogger(__name__)


def _expected_scale(pods: list[core_pb2.Pod], replicasets: Informer[apps_pb2.ReplicaSet],
                    deployments: Informer[apps_pb2.Deployment]) -> int | None:
    """The summed scale of the pods' controllers; None when a pod has none it knows."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = controller_of(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return None
        rs = replicasets.store.get(f"{pod.metadata.namespace}/{ref.name}")
        if rs is None or rs.metadata.uid != ref.uid:
            return None
        owner = controller_of(rs)
        d = deployments.store.get(f"{rs.metadata.namespace}/{owner.name}") \
            if owner is not None and owner.kind == "Deployment" else None
        if d is not None and owner is not None and d.metadata.uid == owner.uid:
            scales[d.metadata.uid] = d.spec.replicas
        else:
            scales[rs.metadata.uid] = rs.spec.replicas
    return sum(scales.values())


DELETION_TIMEOUT = 120.0  # upstream's: an eviction not seen through in 2 minutes is forgotten


def budget_status(pdb: policy_pb2.PodDisruptionBudget, pods: list[core_pb2.Pod],
                  expected_scale: int | None, now: float | None = None) -> policy_pb2.PodDisruptionBudgetStatus | None:
    """The status upstream's getExpectedPodCount and countHealthyPods give; None when it
    cannot be computed (a percentage of pods without a known controller). A pod an
    eviction just disrupted (status.disruptedPods) is not healthy until it is gone or the
    eviction is two minutes old (then forgotten)."""
    spec = pdb.spec
    at = time.time() if now is None else now
    active = [p for p in pods if not p.metadata.HasField("deletionTimestamp")
              and p.status.phase not in ("Succeeded", "Failed")]
    live = {p.metadata.name for p in active}
    disrupted = {name: ts for name, ts in pdb.status.disruptedPods.items()
                 if name in live and ts.seconds + DELETION_TIMEOUT > at}
    healthy = sum(1 for p in active if is_ready(p) and p.metadata.name not in disrupted)
    if spec.HasField("maxUnavailable"):
        if expected_scale is None:
            return None
        expected = expected_scale
        desired = max(0, expected - scaled_value(spec.maxUnavailable, expected, round_up=True))
    elif spec.HasField("minAvailable") and spec.minAvailable.type == 0:
        expected = len(active)
        desired = spec.minAvailable.intVal
    elif spec.HasField("minAvailable"):
        if expected_scale is None:
            return None
        expected = expected_scale
        desired = scaled_value(spec.minAvailable, expected, round_up=True)
    else:
        expected, desired = len(active), len(active)  # neither: no disruption allowed (upstream)
    status = policy_pb2.PodDisruptionBudgetStatus(
        observedGeneration=pdb.metadata.generation, currentHealthy=healthy, desiredHealthy=desired,
        expectedPods=expected, disruptionsAllowed=max(0, healthy - desired) if expected > 0 else 0)
    for name, ts in disrupted.items():
        status.disruptedPods[name].CopyFrom(ts)
    return status


class DisruptionController:
    def __init__(self, client: Client, pdbs: Informer[policy_pb2.PodDisruptionBudget], pods: Informer[core_pb2.Pod],
                 replicasets: Informer[apps_pb2.ReplicaSet], deployments: Informer[apps_pb2.Deployment],
                 workers: int = 1) -> None:
        self.client = client
        self.pdbs = pdbs
        self.pods = pods
        self.replicasets = replicasets
        self.deployments = deployments
        self.queue = WorkQueue("disruption")
        self.workers = Workers(self.queue, self.sync, workers)
        pdbs.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new), on_delete=self._enqueue)
        pods.add_handler(on_add=self._pod_changed, on_update=lambda old, new: self._pod_changed(new),
                         on_delete=self._pod_changed)

    def _enqueue(self, pdb: policy_pb2.PodDisruptionBudget) -> None:
        self.queue.add(object_key(pdb))

    def _pod_changed(self, pod: core_pb2.Pod) -> None:
        for pdb in self.pdbs.store.by_index(INDEX_NAMESPACE, pod.metadata.namespace):
            try:
                selector = from_label_selector_proto(pdb.spec.selector)
            except SelectorError:
                continue
            if selector is not None and not selector.empty() and selector.matches(pod.metadata.labels):
                self._enqueue(pdb)

    async def sync(self, key: str) -> None:
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return
        try:
            selector = from_label_selector_proto(pdb.spec.selector)
        except SelectorError:
            return
        pods = [] if selector is None or selector.empty() else \
            [p for p in self.pods.store.by_index(INDEX_NAMESPACE, pdb.metadata.namespace)
             if selector.matches(p.metadata.labels)]
        status = budget_status(pdb, pods, _expected_scale(pods, self.replicasets, self.deployments))
        if status is None:
            status = policy_pb2.PodDisruptionBudgetStatus()
            status.CopyFrom(pdb.status)
            status.disruptionsAllowed = 0
            status.observedGeneration = pdb.metadata.generation
        allowed = status.disruptionsAllowed > 0
        condition = meta_pb2.Condition(type="DisruptionAllowed", status="True" if allowed else "False",
                                       reason="SufficientPods" if allowed else "InsufficientPods",
                                       observedGeneration=pdb.metadata.generation)
        old = next((c for c in pdb.status.conditions if c.type == "DisruptionAllowed"), None)
        if old is not None and old.status == condition.status:
            condition.lastTransitionTime.CopyFrom(old.lastTransitionTime)
        else:
            condition.lastTransitionTime.CopyFrom(now())
        del status.conditions[:]
        status.conditions.append(condition)
        if status == pdb.status:
            return
        updated = policy_pb2.PodDisruptionBudget()
        updated.CopyFrom(pdb)
        updated.status.CopyFrom(status)
        try:
            await self.client.poddisruptionbudgets.update_status(updated)
        except errors.NotFound:
            pass
