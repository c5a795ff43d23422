"""The Node authorizer, as upstream's plugin/pkg/auth/authorizer/node: a kubelet (user
`system:node:<name>` in group `system:nodes`) may do what upstream's NodeRules allow,
its node Lease only by its own name; NodeRestriction admission then keeps its writes to
its own Node and its own pods. For anyone else it has no opinion (the next authorizer,
RBAC, decides). Upstream also narrows reads of Secrets, ConfigMaps and volumes to what
the node's pods reference; kubeling serves none of those yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.authn import UserInfo
from apiserver.bootstrappolicy import node_rules
from apiserver.rbac import Attributes, PolicyRule, rule_allows

__all__ = ["NodeAuthorizer", "node_name", "NODES_GROUP"]

NODES_GROUP = "system:nodes"
_NODE_PREFIX = "system:node:"
LEASE_NAMESPACE = "kube-node-lease"


def node_name(user: UserInfo) -> str | None:
    """The node a user is, or None (upstream's NodeIdentifier)."""
    if NODES_GROUP not in user.groups or not user.name.startswith(_NODE_PREFIX):
        return None
    return user.name[len(_NODE_PREFIX):] or None


@dataclass
class NodeAuthorizer:
    rules: tuple[PolicyRule, ...] = node_rules()

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        node = node_name(attrs.user)
        if node is None:
            return False, ""
        if attrs.resource_request and attrs.api_group == "coordination.k8s.io" and attrs.resource == "leases":
            if attrs.namespace != LEASE_NAMESPACE or attrs.name != node or attrs.verb in ("list", "watch"):
                return False, f'can only access node lease with the same name as the requesting node "{node}"'
        if any(rule_allows(attrs, rule) for rule in self.rules):
            return True, f'Node: allowed for node "{node}"'
        return False, ""

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        return list(self.rules) if node_name(user) is not None else []
