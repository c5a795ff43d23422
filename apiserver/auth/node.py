"""The Node authorizer, as upstream's plugin/pkg/auth/authorizer/node: a kubelet (user
`system:node:<name>` in group `system:nodes`) may do what upstream's NodeRules allow,
its node Lease only by its own name; NodeRestriction admission then keeps its writes to
its own Node and its own pods. Secrets, ConfigMaps and PersistentVolumeClaims it may read
only when a pod bound to it references them (a volume, a projection, an env source), as
upstream's node graph decides. For anyone else it has no opinion (the next authorizer, RBAC, decides).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from apiserver.auth.authentication import UserInfo
from apiserver.auth.bootstrap_policy import node_rules
from apiserver.auth.rbac import Attributes, PolicyRule, rule_allows
from protos.kubeling.v1 import core_pb2

__all__ = ["NodeAuthorizer", "node_name", "NODES_GROUP", "references"]

NODES_GROUP = "system:nodes"
_NODE_PREFIX = "system:node:"
LEASE_NAMESPACE = "kube-node-lease"
# What a kubelet may read only when a pod bound to it references it (upstream's node graph).
# PersistentVolumes are not among them here: any node may get one by name (upstream follows
# claim -> volume in its graph; kubeling's authorizer sees pods only).
_GRAPH = ("configmaps", "secrets", "persistentvolumeclaims")


def node_name(user: UserInfo) -> str | None:
    """The node a user is, or None (upstream's NodeIdentifier)."""
    if NODES_GROUP not in user.groups or not user.name.startswith(_NODE_PREFIX):
        return None
    return user.name[len(_NODE_PREFIX):] or None


def references(pod: core_pb2.Pod) -> Iterable[tuple[str, str]]:
    """(resource, name) of every Secret, ConfigMap and PersistentVolumeClaim the pod needs to run."""
    for volume in pod.spec.volumes:
        if volume.HasField("persistentVolumeClaim"):
            yield "persistentvolumeclaims", volume.persistentVolumeClaim.claimName
        if volume.HasField("configMap"):
            yield "configmaps", volume.configMap.name
        if volume.HasField("secret"):
            yield "secrets", volume.secret.secretName
        for source in volume.projected.sources:
            if source.HasField("configMap"):
                yield "configmaps", source.configMap.name
            if source.HasField("secret"):
                yield "secrets", source.secret.name
    for c in [*pod.spec.initContainers, *pod.spec.containers]:
        for env in c.env:
            if env.valueFrom.HasField("configMapKeyRef"):
                yield "configmaps", env.valueFrom.configMapKeyRef.name
            if env.valueFrom.HasField("secretKeyRef"):
                yield "secrets", env.valueFrom.secretKeyRef.name
        for source in c.envFrom:
            if source.HasField("configMapRef"):
                yield "configmaps", source.configMapRef.name
            if source.HasField("secretRef"):
                yield "secrets", source.secretRef.name


def _no_pods(node: str) -> Sequence[core_pb2.Pod]:
    return ()


@dataclass
class NodeAuthorizer:
    rules: tuple[PolicyRule, ...] = node_rules()
    pods_on_node: Callable[[str], Sequence[core_pb2.Pod]] = field(default=_no_pods)

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        node = node_name(attrs.user)
        if node is None:
            return False, ""
        if attrs.resource_request and attrs.api_group == "" and attrs.resource in _GRAPH:
            return self._referenced(node, attrs)
        if attrs.resource_request and attrs.api_group == "coordination.k8s.io" and attrs.resource == "leases":
            if attrs.namespace != LEASE_NAMESPACE or attrs.name != node or attrs.verb in ("list", "watch"):
                return False, f'can only access node lease with the same name as the requesting node "{node}"'
        if any(rule_allows(attrs, rule) for rule in self.rules):
            return True, f'Node: allowed for node "{node}"'
        return False, ""

    def _referenced(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        """upstream's graph authorizer: a get of an object some pod on the node references (and
        a claim's status write: the kubelet records a volume's expansion on the node)."""
        claim_status = (attrs.resource, attrs.subresource) == ("persistentvolumeclaims", "status")
        verbs = ("patch", "update") if claim_status else ("get",) if not attrs.subresource else ()
        if attrs.verb in verbs and attrs.name:
            wanted = (attrs.resource, attrs.name)
            for pod in self.pods_on_node(node):
                if pod.metadata.namespace == attrs.namespace and wanted in set(references(pod)):
                    return True, f'Node: allowed for node "{node}"'
        kind = attrs.resource[:-1]
        return False, f"no relationship found between node '{node}' and this object ({kind} " \
                      f"{attrs.namespace}/{attrs.name})"

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        return list(self.rules) if node_name(user) is not None else []
