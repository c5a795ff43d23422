"""The resource quota controller (upstream's pkg/controller/resourcequota): a quota's
`status.hard` is its spec's and `status.used` what its namespace holds of each resource it
limits — counted from the informers' copies with the same evaluators the ResourceQuota
admission plugin charges writes with — recounted when the spec changes, when something
it counts goes (a deleted object, a pod that finished: upstream's replenishment) and
every resync period (what admission charged for a write that was then not stored)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.quota import evaluator_for, group_resource_of, quota_matches
from kubeling.quota import resources as rl
from kubeling.quota.evaluators import pod_counts
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2

__all__ = ["ResourceQuotaController", "SYNC_PERIOD"]

log = logging.getLogger(__name__)

SYNC_PERIOD = 300.0  # upstream's --resource-quota-sync-period
NOT_FOLLOWED_RETRY = 1.0  # seconds before a quota that counts what is not followed yet is counted again

# The informer of a resource by plural.group (None: not followed, then not counted).
InformerFor = Callable[[str], Informer[Any] | None]


class ResourceQuotaController:
    def __init__(self, client: Client, quotas: Informer[core_pb2.ResourceQuota], informer_for: InformerFor,
                 workers: int = 1) -> None:
        self.client = client
        self.quotas = quotas
        self.informer_for = informer_for
        self.queue = WorkQueue("resourcequota")
        self.workers = Workers(self.queue, self.sync, workers)
        self._replenished: set[str] = set()  # the resources whose informers tell of what goes
        quotas.add_handler(on_add=self._quota, on_update=self._quota_changed)

    def _quota(self, quota: core_pb2.ResourceQuota) -> None:
        self.queue.add(object_key(quota))

    def _quota_changed(self, old: core_pb2.ResourceQuota, new: core_pb2.ResourceQuota) -> None:
        # Not on a status write alone: admission's charges are newer than these informers'
        # copies of what they charge for, and a recount now could undo them.
        if dict(new.spec.hard) != dict(old.spec.hard) or dict(new.status.hard) != dict(new.spec.hard):
            self.queue.add(object_key(new))

    def resync(self) -> None:
        for key in self.quotas.store.keys():
            self.queue.add(key)

    async def resync_step(self) -> None:
        self.resync()

    # ---- replenishment ----

    def _follow(self, group_resource: str) -> Informer[Any] | None:
        informer = self.informer_for(group_resource)
        if informer is not None and group_resource not in self._replenished:
            self._replenished.add(group_resource)
            informer.add_handler(on_update=lambda old, new: self._updated(group_resource, old, new),
                                 on_delete=lambda obj: self._replenish(group_resource, obj.metadata.namespace))
        return informer

    def _updated(self, group_resource: str, old: Any, new: Any) -> None:
        """What an update frees: a pod that finished (or whose grace ran out), a Service
        that is no longer a load balancer or node port."""
        if group_resource == "pods":
            now = time.time()
            if pod_counts(old, now) and not pod_counts(new, now):
                self._replenish(group_resource, new.metadata.namespace)
        elif group_resource in ("services", "persistentvolumeclaims"):
            evaluator = evaluator_for(group_resource)
            if evaluator.usage(old) != evaluator.usage(new):
                self._replenish(group_resource, new.metadata.namespace)

    def _replenish(self, group_resource: str, namespace: str) -> None:
        evaluator = evaluator_for(group_resource)
        for quota in self.quotas.store.by_index(INDEX_NAMESPACE, namespace):
            if evaluator.matching_resources(quota.status.hard):
                self.queue.add(object_key(quota))

    # ---- counting ----

    def usage(self, quota: core_pb2.ResourceQuota) -> dict[str, str] | None:
        """What the quota's namespace uses of every resource it limits; None: something it
        limits is not followed (yet), and what admission charged stays."""
        hard = list(quota.spec.hard)
        used: rl.ResourceList = {name: rl.zero() for name in hard}
        now = time.time()
        for group_resource in sorted({group_resource_of(name) for name in hard} - {""}):
            informer = self._follow(group_resource)
            if informer is None:
                log.info("resourcequota %s/%s: %s is not followed; its usage is left as charged",
                         quota.metadata.namespace, quota.metadata.name, group_resource)
                return None
            evaluator = evaluator_for(group_resource)
            matching = evaluator.matching_resources(hard)
            for obj in informer.store.by_index(INDEX_NAMESPACE, quota.metadata.namespace):
                if quota_matches(quota, hard, evaluator, obj):
                    used = rl.add(used, rl.mask(evaluator.usage(obj, now), matching))
        return rl.to_strings(used)

    async def sync(self, key: str) -> None:
        quota = self.quotas.store.get(key)
        if quota is None:
            return
        used = self.usage(quota)
        hard = dict(quota.spec.hard)
        if used is None:
            used = {name: quota.status.used.get(name, "0") for name in hard}
            # a resource not followed yet (a CRD just established, its informer not made):
            # count again soon, so that once it is followed its replenishment is too
            # (upstream's quota monitor resyncs the quotas when it starts a new informer)
            self.queue.add_after(key, NOT_FOLLOWED_RETRY)
        if dict(quota.status.hard) == hard and dict(quota.status.used) == used:
            return
        updated = core_pb2.ResourceQuota()
        updated.CopyFrom(quota)
        updated.status.hard.clear()
        updated.status.hard.update(hard)
        updated.status.used.clear()
        updated.status.used.update(used)
        try:
            await self.client.resourcequotas.update_status(updated)
        except errors.Conflict:
            self.queue.add_after(key, 0.05)  # written meanwhile (admission's charge): count again
        except errors.NotFound:
            return
