"""The registries: the generic store (`generic/`) and a Strategy per resource, in a module
per API group (`core/` for the core group, whose subresources live beside their resources).
The table below maps each scheme entry to its strategy: a group's module lists its own."""

from __future__ import annotations

from typing import Any

from apiserver.registry import (
    admissionregistration,
    apiextensions,
    apiregistration,
    apps,
    autoscaling,
    batch,
    certificates,
    coordination,
    core,
    discovery,
    events,
    flowcontrol,
    networking,
    node,
    policy,
    rbac,
    scheduling,
    storage,
    storagemigration,
)
from apiserver.registry.generic.strategy import DeletePlan, Strategy
from kubeling.scheme import ResourceType

__all__ = ["Strategy", "DeletePlan", "STRATEGIES", "strategy_for", "CONVERSIONS"]

STRATEGIES: dict[ResourceType[Any], type[Strategy[Any]]] = {
    s.resource: s for group in (core, apps, autoscaling, batch, coordination, discovery, policy, rbac, scheduling,
                                storage, admissionregistration, apiextensions, apiregistration, node, flowcontrol,
                                events, networking, certificates, storagemigration)
    for s in group.STRATEGIES}
# A second version of a resource (scheme entry with view_of): (to its version, to the storage version's).
CONVERSIONS: dict[ResourceType[Any], tuple[Any, Any]] = {**autoscaling.CONVERSIONS, **events.CONVERSIONS}


def strategy_for(resource: ResourceType[Any]) -> Strategy[Any]:
    """The resource's strategy (LookupError: the scheme has an entry no group serves)."""
    try:
        return STRATEGIES[resource]()
    except KeyError:
        raise LookupError(f"no strategy serves {resource.group_resource}: add one to its group's STRATEGIES") from None
