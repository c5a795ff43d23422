"""The pods/eviction subresource, as upstream's EvictionREST: a delete that a
PodDisruptionBudget may refuse. A pod that is finished, pending or already being deleted
goes at once; one a budget covers goes only if the budget allows a disruption, which is
then used up (disruptionsAllowed decremented, the pod recorded in disruptedPods, so the
disruption controller does not count it healthy); otherwise 429 TooManyRequests with
upstream's message, and clients (kubectl drain) retry."""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.registry.generic.store import Registry
from apiserver.registry.generic.strategy import now
from kubeling import errors
from kubeling.selectors import SelectorError, from_label_selector_proto
from protos.kubeling.v1 import core_pb2, meta_pb2, policy_pb2

__all__ = ["Evictions", "MAX_DISRUPTED_PODS"]

MAX_DISRUPTED_PODS = 2000  # upstream's MaxDisruptedPodSize
_RETRIES = 5
_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def _too_many(message: str, retry_after: int) -> errors.TooManyRequests:
    return errors.TooManyRequests(_MESSAGE, metadata={"cause": "DisruptionBudget", "causeMessage": message,
                                                      **({"retryAfterSeconds": str(retry_after)} if retry_after
                                                         else {})})


def _ready(pod: core_pb2.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def _can_ignore_budgets(pod: core_pb2.Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed", "Pending") or pod.metadata.HasField("deletionTimestamp")


@dataclass
class Evictions:
    pods: Registry[core_pb2.Pod]
    budgets: Registry[policy_pb2.PodDisruptionBudget]

    async def evict(self, eviction: policy_pb2.Eviction, *, dry_run: bool = False) -> core_pb2.Pod:
        meta, opts = eviction.metadata, eviction.deleteOptions
        namespace, name = meta.namespace or "default", meta.name
        if not name:
            raise errors.BadRequest("the Eviction must name the pod (metadata.name)")
        dry_run = dry_run or "All" in opts.dryRun
        grace = opts.gracePeriodSeconds if opts.HasField("gracePeriodSeconds") else None
        policy = opts.propagationPolicy if opts.HasField("propagationPolicy") else None
        pinned = opts.HasField("preconditions") and opts.preconditions.HasField("resourceVersion")

        async def delete(pod: core_pb2.Pod, enforce_version: bool) -> core_pb2.Pod:
            pre = meta_pb2.Preconditions()
            if opts.HasField("preconditions"):
                pre.CopyFrom(opts.preconditions)
            if enforce_version and not pinned:
                pre.resourceVersion = pod.metadata.resourceVersion  # not racing a pod that turns ready
            return await self.pods.delete(namespace, name, grace_seconds=grace, preconditions=pre,
                                          propagation=policy, dry_run=dry_run)

        for _ in range(_RETRIES):
            pod = await self.pods.get(namespace, name)
            if not _can_ignore_budgets(pod):
                break
            try:
                return await delete(pod, enforce_version=pod.status.phase == "Pending"
                                    and not pod.metadata.HasField("deletionTimestamp"))
            except errors.Conflict:
                if pinned:
                    raise
        else:
            raise errors.Conflict(f'Operation cannot be fulfilled on pods "{name}": the pod kept changing')
        matching = await self._budgets_for(pod)
        if len(matching) > 1:
            raise errors.InternalError("This pod has more than one PodDisruptionBudget, which the eviction "
                                       "subresource does not support.")
        unready_allowed = False
        if matching:
            budget = matching[0]
            st = budget.status
            if not _ready(pod) and st.currentHealthy >= st.desiredHealthy and st.desiredHealthy > 0:
                unready_allowed = True  # it does not count as healthy: its going costs the budget nothing
            else:
                await self._use_up(budget, pod, dry_run)
        try:
            return await delete(pod, enforce_version=unready_allowed)
        except errors.Conflict:
            if unready_allowed and not pinned:
                raise _too_many(f"The disruption budget {matching[0].metadata.name} is still being processed by "
                                "the server.", 10) from None
            raise

    async def _budgets_for(self, pod: core_pb2.Pod) -> list[policy_pb2.PodDisruptionBudget]:
        items = await self.budgets.in_namespace(pod.metadata.namespace)
        out = []
        for budget in items:
            try:
                selector = from_label_selector_proto(budget.spec.selector)
            except SelectorError:
                continue
            if selector is not None and not selector.empty() and selector.matches(pod.metadata.labels):
                out.append(budget)
        return out

    async def _use_up(self, budget: policy_pb2.PodDisruptionBudget, pod: core_pb2.Pod, dry_run: bool) -> None:
        """upstream's checkAndDecrement, retried on conflicts with a fresh budget."""
        name = budget.metadata.name
        for _ in range(_RETRIES):
            st = budget.status
            if st.observedGeneration < budget.metadata.generation:
                raise _too_many(f"The disruption budget {name} is still being processed by the server.", 10)
            if st.disruptionsAllowed < 0:
                raise errors.Forbidden(f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed '
                                       "is negative")
            if len(st.disruptedPods) > MAX_DISRUPTED_PODS:
                raise errors.Forbidden(f'poddisruptionbudgets.policy "{name}" is forbidden: DisruptedPods map too '
                                       "big - too many evictions not confirmed by PDB controller")
            if st.disruptionsAllowed == 0:
                raise _too_many(f"The disruption budget {name} needs {st.desiredHealthy} healthy pods and has "
                                f"{st.currentHealthy} currently", 0)
            if dry_run:
                return
            updated = policy_pb2.PodDisruptionBudget()
            updated.CopyFrom(budget)
            updated.status.disruptionsAllowed -= 1
            updated.status.disruptedPods[pod.metadata.name].CopyFrom(now())
            if updated.status.disruptionsAllowed == 0:
                for cond in updated.status.conditions:
                    if cond.type == "DisruptionAllowed" and cond.status != "False":
                        cond.status, cond.reason = "False", "InsufficientPods"
                        cond.lastTransitionTime.CopyFrom(now())
            try:
                await self.budgets.update(updated, status=True)
                return
            except errors.Conflict:
                budget = await self.budgets.get(budget.metadata.namespace, name)
        raise errors.Timeout(f"couldn't update PodDisruptionBudget {name!r} due to conflicts")
