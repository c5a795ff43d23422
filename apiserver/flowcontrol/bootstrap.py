"""The configuration every cluster starts with (upstream's apis/flowcontrol/bootstrap):
the mandatory objects — the `exempt` and `catch-all` levels and schemas, set back as
mandated at every start — and the suggested ones, made when missing: system components,
nodes, leader election, controllers, service accounts and everyone else each get a level
of their own, so that no one of them starves the others."""

from __future__ import annotations

from typing import Any

from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["ensure_configuration", "MANDATORY_LEVELS", "MANDATORY_SCHEMAS", "SUGGESTED_LEVELS", "SUGGESTED_SCHEMAS"]

AUTO_UPDATE = "apf.kubernetes.io/autoupdate-spec"
_GROUP_VERSION = "flowcontrol.apiserver.k8s.io/v1"
_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
_ALL_URLS = {"verbs": ["*"], "nonResourceURLs": ["*"]}
_EVERYONE = [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
             {"kind": "Group", "group": {"name": "system:authenticated"}}]


def _queue(shares: int, lendable: int, queues: int, hand: int) -> dict[str, Any]:
    return {"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares, "lendablePercent": lendable,
        "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50}}}}


def _user(name: str) -> dict[str, Any]:
    return {"kind": "User", "user": {"name": name}}


def _group(name: str) -> dict[str, Any]:
    return {"kind": "Group", "group": {"name": name}}


def _account(namespace: str, name: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}}


def _schema(level: str, precedence: int, subjects: list[dict[str, Any]], resource_rules: list[dict[str, Any]],
            non_resource_rules: list[dict[str, Any]] | None = None, by: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence,
                            "rules": [{"subjects": subjects, "resourceRules": resource_rules,
                                       **({"nonResourceRules": non_resource_rules} if non_resource_rules else {})}]}
    if by:
        spec["distinguisherMethod"] = {"type": by}
    return spec


MANDATORY_LEVELS: dict[str, dict[str, Any]] = {
    "exempt": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
    "catch-all": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                                                 "limitResponse": {"type": "Reject"}}},
}
MANDATORY_SCHEMAS: dict[str, dict[str, Any]] = {
    "exempt": _schema("exempt", 1, [_group("system:masters")], [_ALL_RESOURCES], [_ALL_URLS]),
    "catch-all": _schema("catch-all", 10000, _EVERYONE, [_ALL_RESOURCES], [_ALL_URLS], by="ByUser"),
}
SUGGESTED_LEVELS: dict[str, dict[str, Any]] = {
    "system": _queue(30, 33, 64, 6),
    "node-high": _queue(40, 25, 64, 6),
    "leader-election": _queue(10, 0, 16, 4),
    "workload-high": _queue(40, 50, 128, 6),
    "workload-low": _queue(100, 90, 128, 6),
    "global-default": _queue(20, 50, 128, 6),
}
_LEADER_LOCKS = [
    {"verbs": ["get", "create", "update"], "apiGroups": [""], "resources": ["endpoints", "configmaps"],
     "namespaces": ["kube-system"]},
    {"verbs": ["get", "create", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "namespaces": ["kube-system"]}]
SUGGESTED_SCHEMAS: dict[str, dict[str, Any]] = {
    "probes": _schema("exempt", 2, _EVERYONE, [], [{"verbs": ["get"],
                                                    "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]),
    "system-leader-election": _schema("leader-election", 100, [_user("system:kube-controller-manager"),
                                                               _user("system:kube-scheduler")],
                                      _LEADER_LOCKS, by="ByUser"),
    "endpoint-controller": _schema("workload-high", 150, [_user("system:kube-controller-manager"),
                                                          _account("kube-system", "endpoint-controller")],
                                   [{"verbs": ["get", "create", "update"], "apiGroups": [""],
                                     "resources": ["endpoints"], "clusterScope": True, "namespaces": ["*"]}],
                                   by="ByUser"),
    "workload-leader-election": _schema("leader-election", 200, [_account("kube-system", "*")], _LEADER_LOCKS,
                                        by="ByUser"),
    "system-node-high": _schema("node-high", 400, [_group("system:nodes")], [
        {"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"], "clusterScope": True},
        {"verbs": ["*"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "namespaces": ["kube-node-lease"]}], by="ByUser"),
    "system-nodes": _schema("system", 500, [_group("system:nodes")], [_ALL_RESOURCES], [_ALL_URLS], by="ByUser"),
    "kube-controller-manager": _schema("workload-high", 800, [_user("system:kube-controller-manager")],
                                       [_ALL_RESOURCES], [_ALL_URLS], by="ByNamespace"),
    "kube-scheduler": _schema("workload-high", 800, [_user("system:kube-scheduler")], [_ALL_RESOURCES], [_ALL_URLS],
                              by="ByNamespace"),
    "kube-system-service-accounts": _schema("workload-high", 900, [_account("kube-system", "*")],
                                            [_ALL_RESOURCES], [_ALL_URLS], by="ByNamespace"),
    "service-accounts": _schema("workload-low", 9000, [_group("system:serviceaccounts")], [_ALL_RESOURCES],
                                [_ALL_URLS], by="ByUser"),
    "global-default": _schema("global-default", 9900, _EVERYONE, [_ALL_RESOURCES], [_ALL_URLS], by="ByUser"),
}


def _object(kind: str, name: str, spec: dict[str, Any]) -> custom_pb2.CustomResource:
    obj = custom_pb2.CustomResource(apiVersion=_GROUP_VERSION, kind=kind, metadata=meta_pb2.ObjectMeta(
        name=name, annotations={AUTO_UPDATE: "true"}))
    set_content(obj, {"spec": spec})
    return obj


async def _ensure(registry: Registry[Any], kind: str, objects: dict[str, dict[str, Any]], mandatory: bool) -> None:
    for name, spec in objects.items():
        try:
            current = await registry.get("", name)
        except errors.NotFound:
            try:
                await registry.create(_object(kind, name, spec))
            except errors.AlreadyExists:
                pass  # another apiserver made it meanwhile
            continue
        if not mandatory or current.metadata.annotations.get(AUTO_UPDATE) == "false":
            continue
        content = content_of(current)
        if content.get("spec") == spec:
            continue
        content["spec"] = spec
        set_content(current, content)
        try:
            await registry.update(current)
        except errors.Conflict:
            pass  # changed meanwhile: the next start sets it back


async def ensure_configuration(schemas: Registry[Any], levels: Registry[Any]) -> None:
    """The mandatory objects as mandated, the suggested ones where missing."""
    await _ensure(levels, "PriorityLevelConfiguration", MANDATORY_LEVELS, True)
    await _ensure(levels, "PriorityLevelConfiguration", SUGGESTED_LEVELS, False)
    await _ensure(schemas, "FlowSchema", MANDATORY_SCHEMAS, True)
    await _ensure(schemas, "FlowSchema", SUGGESTED_SCHEMAS, False)
