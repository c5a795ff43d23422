"""RBAC's decision (apiserver/auth/rbac.py) over upstream's bootstrap policy
(apiserver/auth/bootstrap_policy.py) and bindings a user adds: who may do what, and the
forbidden message exactly as upstream words it."""

from __future__ import annotations

import pytest

from apiserver.auth.authentication import ANONYMOUS, UserInfo
from apiserver.auth.bootstrap_policy import bootstrap_policy
from apiserver.auth.rbac import (
    Attributes,
    Binding,
    PolicyRule,
    RBACAuthorizer,
    Role,
    RoleRef,
    Subject,
    forbidden_message,
)

ADMIN = UserInfo("kubernetes-admin", groups=("system:masters", "system:authenticated"))
JANE = UserInfo("jane", groups=("system:authenticated",))
BOB = UserInfo("bob", groups=("devs", "system:authenticated"))
SCHEDULER = UserInfo("system:kube-scheduler", groups=("system:authenticated",))
SA = UserInfo("system:serviceaccount:team:builder",
              groups=("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"))


def _authorizer() -> RBACAuthorizer:
    policy = bootstrap_policy()
    policy.bindings += [
        Binding("jane-view", RoleRef("ClusterRole", "view"), (Subject("User", "jane"),), "default"),
        Binding("devs-edit", RoleRef("ClusterRole", "edit"), (Subject("Group", "devs"),), "default"),
        Binding("builder", RoleRef("Role", "pod-reader"), (Subject("ServiceAccount", "builder"),), "team"),
        Binding("one-pod", RoleRef("ClusterRole", "one-pod"), (Subject("User", "jane"),)),
    ]
    policy.add_role(Role("pod-reader", (PolicyRule(("get",), ("",), ("pods",)),), "team"))
    policy.add_role(Role("one-pod", (PolicyRule(("delete",), ("",), ("pods",), ("keep-me",)),)))
    return RBACAuthorizer(lambda: policy)


def _can(user: UserInfo, verb: str, resource: str = "pods", namespace: str = "default", *, group: str = "",
         sub: str = "", name: str = "") -> bool:
    return _authorizer().authorize(Attributes(user, verb, True, namespace, group, resource, sub, name))[0]


@pytest.mark.parametrize("user, verb, resource, namespace, sub, allowed", [
    (ADMIN, "delete", "nodes", "", "", True),                 # system:masters -> cluster-admin
    (JANE, "list", "pods", "default", "", True),              # view in default
    (JANE, "get", "pods", "default", "log", True),            # pods/log is in view
    (JANE, "create", "pods", "default", "", False),           # view cannot write
    (JANE, "get", "pods", "default", "exec", False),          # nor exec
    (JANE, "list", "pods", "other", "", False),               # a RoleBinding grants only its namespace
    (BOB, "create", "pods", "default", "", True),             # edit through a group
    (BOB, "create", "pods", "default", "exec", True),
    (BOB, "update", "pods", "default", "status", False),      # edit does not write status
    (SA, "get", "pods", "team", "", True),                    # a Role bound to a ServiceAccount
    (SA, "list", "pods", "team", "", False),
    (SCHEDULER, "create", "pods", "default", "binding", True),
    (SCHEDULER, "create", "pods", "default", "", False),
    (ANONYMOUS, "get", "pods", "default", "", False),
])
def test_who_may_do_what(user: UserInfo, verb: str, resource: str, namespace: str, sub: str, allowed: bool) -> None:
    assert _can(user, verb, resource, namespace, sub=sub) is allowed


def test_names_groups_and_paths() -> None:
    assert _can(JANE, "delete", name="keep-me") and not _can(JANE, "delete", name="other")
    assert _can(SCHEDULER, "update", "leases", "kube-system", group="coordination.k8s.io", name="kube-scheduler")
    assert not _can(SCHEDULER, "update", "leases", "kube-system", group="coordination.k8s.io", name="someone-else")
    assert not _can(SCHEDULER, "update", "leases", "kube-system", name="kube-scheduler")  # the core group: no
    authorizer = _authorizer()

    def path(user: UserInfo, url: str, verb: str = "get") -> bool:
        return authorizer.authorize(Attributes(user, verb, False, path=url))[0]

    assert path(ANONYMOUS, "/healthz") and path(ANONYMOUS, "/version") and not path(ANONYMOUS, "/api")
    assert path(JANE, "/apis/coordination.k8s.io/v1") and not path(JANE, "/metrics")
    assert path(ADMIN, "/metrics") and not path(JANE, "/healthz", "post")
    allowed, why = authorizer.authorize(Attributes(BOB, "create", True, "default", "", "pods"))
    assert allowed and why == 'RBAC: allowed by RoleBinding "default/devs-edit" of ClusterRole "edit"'


def test_forbidden_message_as_upstream() -> None:
    assert forbidden_message(Attributes(JANE, "create", True, "default", "", "pods")) == \
        'pods is forbidden: User "jane" cannot create resource "pods" in API group "" in the namespace "default"'
    assert forbidden_message(Attributes(JANE, "get", True, "default", "", "pods", "log", "web")) == \
        'pods "web" is forbidden: User "jane" cannot get resource "pods/log" in API group "" in the namespace ' \
        '"default"'
    assert forbidden_message(Attributes(JANE, "list", True, "", "", "nodes")) == \
        'nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" at the cluster scope'
    assert forbidden_message(Attributes(JANE, "update", True, "kube-system", "coordination.k8s.io", "leases",
                                        name="x")) == \
        'leases.coordination.k8s.io "x" is forbidden: User "jane" cannot update resource "leases" in API group ' \
        '"coordination.k8s.io" in the namespace "kube-system"'
    assert forbidden_message(Attributes(JANE, "get", False, path="/metrics")) == \
        'forbidden: User "jane" cannot get path "/metrics"'


def test_coverage_as_upstreams_policy_comparator() -> None:
    """The escalation check's coverage (upstream's policy_comparator_test cases, in part)."""
    from apiserver.admission.rbac_escalation import compact_string, covers
    owned = [PolicyRule(("get", "list"), ("",), ("pods",)), PolicyRule(("*",), ("apps",), ("*/scale",)),
             PolicyRule(("delete",), ("",), ("secrets",), ("one",)), PolicyRule(("get",), non_resource_urls=("/api*",))]
    assert covers(owned, [PolicyRule(("get",), ("",), ("pods",))]) == []
    assert covers(owned, [PolicyRule(("update",), ("apps",), ("deployments/scale",))]) == []
    assert covers(owned, [PolicyRule(("get",), non_resource_urls=("/apis/x",))]) == []
    assert covers(owned, [PolicyRule(("delete",), ("",), ("secrets",), ("one",))]) == []
    # names held do not cover all names; one verb too many is named alone
    assert covers(owned, [PolicyRule(("delete",), ("",), ("secrets",))]) == [PolicyRule(("delete",), ("",),
                                                                                        ("secrets",))]
    missing = covers(owned, [PolicyRule(("get", "watch", "list"), ("",), ("pods", "nodes"))])
    assert [compact_string(r) for r in missing] == ['{APIGroups:[""], Resources:["pods"], Verbs:["watch"]}',
                                                    '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}',
                                                    '{APIGroups:[""], Resources:["nodes"], Verbs:["watch"]}',
                                                    '{APIGroups:[""], Resources:["nodes"], Verbs:["list"]}']
    assert covers([PolicyRule(("*",), ("*",), ("*",))], [PolicyRule(("get",), non_resource_urls=("/x",))]) != []


def test_escalation_message_compacts_verbs() -> None:
    from apiserver.admission.rbac_escalation import covers, escalation_message
    missing = covers([], [PolicyRule(("get", "list"), ("",), ("pods", "nodes"))])
    assert escalation_message(JANE, missing) == (
        'user "jane" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}\n'
        '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}')


def test_labels_a_kubelet_may_not_set() -> None:
    from apiserver.admission.noderestriction import forbidden_labels
    assert forbidden_labels({"kubernetes.io/hostname", "node.kubernetes.io/instance-type", "team", "example.com/x",
                             "kubelet.kubernetes.io/a", "x.node.kubernetes.io/b"}) == []
    assert forbidden_labels({"node-restriction.kubernetes.io/trusted", "a.node-restriction.kubernetes.io/b",
                             "node-role.kubernetes.io/control-plane", "k8s.io/x"}) == [
        "a.node-restriction.kubernetes.io/b", "k8s.io/x", "node-restriction.kubernetes.io/trusted",
        "node-role.kubernetes.io/control-plane"]


def test_node_authorizer_and_union() -> None:
    from apiserver.auth.authorization import authorizer_for, parse_modes
    from apiserver.auth.node import NodeAuthorizer
    node1 = UserInfo("system:node:node-1", groups=("system:nodes", "system:authenticated"))
    auth = NodeAuthorizer()
    assert auth.authorize(Attributes(node1, "update", True, "", "", "nodes", "status", "node-1"))[0]
    assert auth.authorize(Attributes(node1, "get", True, "kube-node-lease", "coordination.k8s.io", "leases", "",
                                     "node-1"))[0]
    assert not auth.authorize(Attributes(node1, "get", True, "kube-node-lease", "coordination.k8s.io", "leases", "",
                                         "node-2"))[0]
    assert not auth.authorize(Attributes(node1, "create", True, "default", "", "pods", "binding", "p"))[0]
    assert not auth.authorize(Attributes(JANE, "get", True, "", "", "nodes"))[0]  # no opinion on others
    union = authorizer_for("Node,RBAC", bootstrap_policy)
    assert union is not None and union.authorize(Attributes(node1, "list", True, "", "", "pods"))[0]
    assert union.authorize(Attributes(ADMIN, "delete", True, "", "", "nodes", "", "node-1"))[0]
    assert authorizer_for("AlwaysAllow", bootstrap_policy) is None
    for bad in ("", "RBAC,RBAC", "Webhook"):
        with pytest.raises(ValueError):
            parse_modes(bad)


def test_the_bootstrap_aggregated_roles_are_what_aggregation_makes_of_them() -> None:
    """admin, edit and view are written with the rules the clusterrole-aggregation
    controller computes from the bootstrap parts: a fresh cluster's controller has nothing to
    rewrite, and an apiserver alone grants the same."""
    from apiserver.auth.rbac_policy import bootstrap_objects
    from kubeling.rbacaggregation import aggregated_rules
    roles, _ = bootstrap_objects()
    aggregated = [r for r in roles if r.HasField("aggregationRule")]
    assert sorted(r.metadata.name for r in aggregated) == ["admin", "edit", "view"]
    for role in aggregated:
        assert list(role.rules) == aggregated_rules(role, roles), role.metadata.name
