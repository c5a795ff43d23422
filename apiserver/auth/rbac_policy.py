"""The RBAC policy as stored: the Roles, ClusterRoles and bindings in the watch caches,
turned into the authorizer's `Policy` again only when one of them changed (upstream's
RBAC authorizer reads the same objects through informers). And the bootstrap roles and
bindings written at start, as upstream's `rbac/bootstrap-roles` post-start hook does:
missing ones created, existing ones given the permissions and subjects they lack unless
annotated `rbac.authorization.kubernetes.io/autoupdate: "false"`; nothing is removed.
admin, edit and view are written with their aggregationRule and the rules aggregation
gives them from the bootstrap parts (the controller manager keeps them so).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from apiserver.auth.bootstrap_policy import AGGREGATION, cluster_role_bindings, cluster_roles
from apiserver.auth.rbac import Policy, policy_of, rule_to_proto
from apiserver.registry.generic.store import Registry
from apiserver.registry.rbac import GROUP
from kubeling import errors, scheme
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import rbac_pb2

__all__ = ["StoredPolicy", "reconcile_bootstrap", "AUTOUPDATE"]

log = logging.getLogger(__name__)

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
_BOOTSTRAPPING = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_KINDS = (scheme.ROLES, scheme.CLUSTERROLES, scheme.ROLEBINDINGS, scheme.CLUSTERROLEBINDINGS)


class StoredPolicy:
    """Call it for the current policy (cheap when nothing changed: four counters read)."""

    def __init__(self, registries: Mapping[ResourceType[Any], Registry[Any]]) -> None:
        self._caches = [registries[k].watch_cache for k in _KINDS]
        self._seen: tuple[int, ...] = ()
        self._policy = Policy()

    def __call__(self) -> Policy:
        seen = tuple(c.changes for c in self._caches)
        if seen != self._seen:
            roles, clusterroles, rolebindings, clusterrolebindings = (
                [e.obj for e in c.store.values()] for c in self._caches)
            self._policy = policy_of([*roles, *clusterroles], [*rolebindings, *clusterrolebindings])
            self._seen = seen
        return self._policy


def bootstrap_objects() -> tuple[list[rbac_pb2.ClusterRole], list[rbac_pb2.ClusterRoleBinding]]:
    annotations = {AUTOUPDATE: "true"}
    roles = []
    for r in cluster_roles():
        labels, aggregates = AGGREGATION.get(r.name, ({}, ""))
        role = rbac_pb2.ClusterRole(metadata={"name": r.name, "labels": {**_BOOTSTRAPPING, **labels},
                                              "annotations": annotations},
                                    rules=[rule_to_proto(x) for x in r.rules])
        if aggregates:
            role.aggregationRule.clusterRoleSelectors.add().matchLabels[aggregates] = "true"
        roles.append(role)
    meta: dict[str, Any] = {"labels": _BOOTSTRAPPING, "annotations": annotations}
    bindings = [rbac_pb2.ClusterRoleBinding(
        metadata={"name": b.name, **meta},
        roleRef={"apiGroup": GROUP, "kind": b.role_ref.kind, "name": b.role_ref.name},
        subjects=[rbac_pb2.Subject(kind=s.kind, name=s.name, namespace=s.namespace,
                                   apiGroup="" if s.kind == "ServiceAccount" else GROUP) for s in b.subjects])
        for b in cluster_role_bindings()]
    return roles, bindings


async def reconcile_bootstrap(clusterroles: Registry[rbac_pb2.ClusterRole],
                              clusterrolebindings: Registry[rbac_pb2.ClusterRoleBinding]) -> None:
    roles, bindings = bootstrap_objects()
    for role in roles:
        await _reconcile(clusterroles, role, "rules")
    for binding in bindings:
        await _reconcile(clusterrolebindings, binding, "subjects")


async def _reconcile(registry: Registry[Any], wanted: Any, field: str) -> None:
    name = wanted.metadata.name
    for _ in range(5):
        try:
            existing = await registry.get("", name)
        except errors.NotFound:
            try:
                await registry.create(wanted)
                log.info("created bootstrap %s %s", registry.strategy.kind, name)
                return
            except errors.AlreadyExists:
                continue
        if existing.metadata.annotations.get(AUTOUPDATE) == "false":
            return
        updated = type(existing)()
        updated.CopyFrom(existing)
        have = list(getattr(updated, field))
        getattr(updated, field).extend(x for x in getattr(wanted, field) if x not in have)
        for k, v in wanted.metadata.labels.items():
            updated.metadata.labels.setdefault(k, v)
        for k, v in wanted.metadata.annotations.items():
            updated.metadata.annotations.setdefault(k, v)
        if field == "rules" and wanted.HasField("aggregationRule") and not updated.HasField("aggregationRule"):
            updated.aggregationRule.CopyFrom(wanted.aggregationRule)
        if updated == existing:
            return
        try:
            await registry.update(updated)
            log.info("added missing %s to bootstrap %s %s", field, registry.strategy.kind, name)
            return
        except errors.Conflict:
            continue
