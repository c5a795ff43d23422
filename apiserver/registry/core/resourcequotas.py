"""v1 ResourceQuotas (upstream's pkg/registry/core/resourcequota): a new quota's status
starts empty — the quota controller fills `status.hard` from the spec and counts
`status.used` — and a spec write never touches status; scopes are fixed once made."""

from __future__ import annotations

from collections.abc import MutableMapping

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.quota import (
    validate_resource_quota,
    validate_resource_quota_status,
    validate_resource_quota_update,
)
from kubeling import scheme
from kubeling.quantity import canonical
from protos.kubeling.v1 import core_pb2

__all__ = ["ResourceQuotaStrategy"]


def canonicalize(values: MutableMapping[str, str]) -> None:
    """Store quantities in canonical form, as upstream's serialization does."""
    for name, text in list(values.items()):
        try:
            values[name] = canonical(text)
        except ValueError:
            pass  # reported by validation


class ResourceQuotaStrategy(Strategy[core_pb2.ResourceQuota]):
    resource = scheme.RESOURCEQUOTAS

    def prepare_for_create(self, obj: core_pb2.ResourceQuota) -> None:
        obj.ClearField("status")

    def default(self, obj: core_pb2.ResourceQuota) -> None:
        canonicalize(obj.spec.hard)

    def validate(self, obj: core_pb2.ResourceQuota, check: Checker) -> None:
        validate_resource_quota(obj, check)

    def validate_update(self, new: core_pb2.ResourceQuota, old: core_pb2.ResourceQuota, check: Checker) -> None:
        validate_resource_quota_update(new, old, check)

    def validate_status(self, new: core_pb2.ResourceQuota, check: Checker) -> None:
        canonicalize(new.status.hard)
        canonicalize(new.status.used)
        validate_resource_quota_status(new, check)
