"""The ResourceQuota admission plugin, as upstream's (plugin/pkg/admission/resourcequota):
the last word on a write. Each quota of the namespace that counts the object (it limits
something the object uses, and the object is in its scopes) is charged the object's usage
— on an update, what it uses beyond what it used — and a write that would take a quota
past its hard limit is refused: `exceeded quota: <name>, requested: ..., used: ...,
limited: ...`. The new usage is written to the quota's status before the object is stored
(a compare-and-swap, so two writes in the namespace never both take the last unit); the
quota controller recounts later what was charged and not stored.

A quota the controller has not counted yet (no status) constrains nothing, as upstream's;
one whose status lacks a resource it now limits refuses, until it is counted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from apiserver.admission.chain import CREATE, EVERY_RESOURCE, UPDATE, AdmissionAttributes, forbidden
from apiserver.auth.authentication import current_user
from kubeling import errors
from kubeling.quota import evaluator_for, quota_matches
from kubeling.quota import resources as rl
from protos.kubeling.v1 import core_pb2

__all__ = ["ResourceQuotaAdmission"]

QuotasOf = Callable[[str, bool], Awaitable[list[core_pb2.ResourceQuota]]]
WriteStatus = Callable[[core_pb2.ResourceQuota], Awaitable[core_pb2.ResourceQuota]]
_RETRIES = 3


@dataclass
class ResourceQuotaAdmission:
    # a namespace's quotas; True: read from etcd (after a conflict), else the watch cache's
    quotas: QuotasOf
    write_status: WriteStatus
    resources: frozenset[str] = EVERY_RESOURCE
    # one charge at a time per namespace (upstream batches a namespace's writes in one worker)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation not in (CREATE, UPDATE) or not attrs.namespace or attrs.obj is None:
            return
        group_resource = attrs.kind.group_resource if attrs.kind is not None else attrs.resource
        evaluator = evaluator_for(group_resource)
        if not evaluator.handles(attrs.operation, attrs.subresource):
            return
        lock = self._locks.setdefault(attrs.namespace, asyncio.Lock())
        async with lock:
            fresh = False
            for _ in range(_RETRIES):
                quotas = await self.quotas(attrs.namespace, fresh)
                charged = self._charge(attrs, group_resource, quotas)
                if not charged or attrs.dry_run:
                    return
                try:
                    await self._write(charged)
                    return
                except errors.Conflict:
                    fresh = True  # a quota changed meanwhile: judge again against etcd's copies
            raise errors.Conflict(f'Operation cannot be fulfilled on resourcequotas "{charged[0].metadata.name}": '
                                  "the quota was written by others too often; try again")

    def _charge(self, attrs: AdmissionAttributes, group_resource: str,
                quotas: list[core_pb2.ResourceQuota]) -> list[core_pb2.ResourceQuota]:
        """The quotas with the write's usage added, or Forbidden (upstream's checkRequest)."""
        evaluator = evaluator_for(group_resource)
        counting: list[core_pb2.ResourceQuota] = []
        for quota in quotas:
            hard = list(quota.status.hard)
            if not quota_matches(quota, hard, evaluator, attrs.obj):
                continue
            required = evaluator.matching_resources(hard)
            why = evaluator.constraints(required, attrs.obj)
            if why:
                raise forbidden(attrs, group_resource, f"failed quota: {quota.metadata.name}: {why}")
            missing = [name for name in required if name not in quota.status.used]
            if missing:
                raise forbidden(attrs, group_resource, f"status unknown for quota: {quota.metadata.name}, "
                                                               f"resources: {','.join(sorted(missing))}")
            counting.append(quota)
        if not counting:
            return []
        delta = evaluator.usage(attrs.obj)
        negative = rl.negative(delta)
        if negative:
            raise forbidden(attrs, group_resource,
                            f"quota usage is negative for resource(s): {','.join(negative)}")
        if attrs.operation == UPDATE and attrs.old is not None:
            delta = rl.subtract(delta, evaluator.usage(attrs.old))
        if rl.is_zero(delta):
            return []
        charged = []
        for quota in counting:
            limited = rl.parse(quota.status.hard)
            used = rl.parse(quota.status.used)
            requested = rl.mask(delta, limited)
            new_used = rl.add(used, requested)
            within, exceeded = rl.less_or_equal(rl.mask(new_used, requested), limited)
            if not within:
                raise forbidden(attrs, group_resource,
                                f"exceeded quota: {quota.metadata.name}, "
                                f"requested: {rl.pretty(rl.mask(requested, exceeded))}, "
                                f"used: {rl.pretty(rl.mask(used, exceeded))}, "
                                f"limited: {rl.pretty(rl.mask(limited, exceeded))}")
            if rl.is_zero(requested):
                continue
            updated = core_pb2.ResourceQuota()
            updated.CopyFrom(quota)
            updated.status.used.clear()
            updated.status.used.update(rl.to_strings(rl.mask(new_used, limited)))
            charged.append(updated)
        return charged

    async def _write(self, charged: list[core_pb2.ResourceQuota]) -> None:
        # The apiserver's own write (upstream's loopback client): not admitted again.
        token = current_user.set(None)
        try:
            for quota in charged:
                await self.write_status(quota)
        finally:
            current_user.reset(token)
