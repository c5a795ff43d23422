"""The RBAC API and the authorizers behind it, on a TLS apiserver with
`--authorization-mode Node,RBAC`: Roles and bindings written with the real kubectl take
effect (and stop when removed), privilege escalation is refused with upstream's words,
the bootstrap roles are written and reconciled, and a kubelet's certificate reaches only
its own Node, Lease and pods (the Node authorizer and NodeRestriction)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from apiserver.auth.rbac_policy import AUTOUPDATE
from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, pki
from kubeling.client import Client, TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2, rbac_pb2
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl
from tests.objects import node, pod
from tests.wait import until

TOKENS = 'secret-jane,jane,uid-jane\nsecret-bob,bob,uid-bob\n'


@pytest.fixture
async def secured(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[tuple[APIServer, Path]]:
    root = tmp_path / "pki"
    pki.ensure(root, {"node-1": ["127.0.0.1"], "node-2": ["127.0.0.1"]})
    (root / "tokens.csv").write_text(TOKENS)
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        tls_cert_file=str(root / "apiserver.crt"),
                                        tls_private_key_file=str(root / "apiserver.key"),
                                        client_ca_file=str(root / "ca.crt"), token_auth_file=str(root / "tokens.csv"),
                                        authorization_mode="Node,RBAC"))
    await server.start()
    try:
        yield server, root
    finally:
        await server.stop(grace=0)


def _tls(root: Path, identity: str | None = None, token: str = "") -> TLSConfig:
    return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt" if identity else None,
                                root / f"{identity}.key" if identity else None, token)


def _kubectl(server: APIServer, root: Path, tmp_path: Path, who: str) -> Kubectl:
    tls = _tls(root, "admin") if who == "admin" else _tls(root, token=f"secret-{who}")
    (tmp_path / who).mkdir(exist_ok=True)
    return Kubectl(write_kubeconfig(tmp_path / who / "config", server.rest_address, tls=tls))


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_bindings_written_with_kubectl_grant_and_revoke(secured: tuple[APIServer, Path], tmp_path: Path) -> None:
    server, root = secured
    admin, jane = (_kubectl(server, root, tmp_path, w) for w in ("admin", "jane"))
    await admin("create", "namespace", "team")
    code, _, err = await jane("get", "pods", "-n", "team", ok=False)
    assert code != 0 and 'User "jane" cannot list resource "pods"' in err, err
    await admin("create", "rolebinding", "jane-view", "--clusterrole=view", "--user=jane", "-n", "team")

    async def jane_lists() -> bool:
        return (await jane("get", "pods", "-n", "team", ok=False))[0] == 0
    await _eventually(jane_lists, "the view binding to take effect")
    manifest = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    code, _, err = await jane("create", "-f", "-", stdin=manifest, ok=False)
    assert code != 0 and err.strip() == ('Error from server (Forbidden): error when creating "STDIN": pods is '
                                         'forbidden: User "jane" cannot create resource "pods" in API group "" in '
                                         'the namespace "team"'), err
    assert (await jane("get", "pods", "-n", "default", ok=False))[0] != 0  # a RoleBinding grants in its namespace
    await admin("create", "rolebinding", "jane-edit", "--clusterrole=edit", "--user=jane", "-n", "team")

    async def jane_creates() -> bool:
        return (await jane("create", "-f", "-", stdin=manifest, ok=False))[0] == 0
    await _eventually(jane_creates, "the edit binding to take effect")
    _, out, _ = await admin("get", "rolebindings", "-n", "team", "-o", "wide")
    assert "jane-edit" in out and "ClusterRole/edit" in out and "jane" in out, out
    await admin("delete", "rolebinding", "jane-edit", "jane-view", "-n", "team")
    await _eventually(lambda: _denied(jane), "the bindings' removal to take effect")
    # A Role of its own, in the namespace: exactly what it names.
    await admin("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "team")
    await admin("create", "rolebinding", "jane-reads", "--role=pod-reader", "--user=jane", "-n", "team")
    await _eventually(jane_lists, "the Role's binding to take effect")
    code, _, err = await jane("get", "pods", "-n", "team", "-w", "--request-timeout=2", ok=False)
    assert code != 0 and 'cannot watch resource "pods"' in err, err


async def _denied(kubectl: Kubectl) -> bool:
    return (await kubectl("get", "pods", "-n", "team", ok=False))[0] != 0


async def test_no_one_grants_what_it_does_not_hold(secured: tuple[APIServer, Path], tmp_path: Path) -> None:
    server, root = secured
    admin, jane = (_kubectl(server, root, tmp_path, w) for w in ("admin", "jane"))
    await admin("create", "namespace", "team")
    await admin("create", "rolebinding", "jane-admin", "--clusterrole=admin", "--user=jane", "-n", "team")
    await _eventually(lambda: _can(jane, "create", "roles", "team"), "jane to be the namespace's admin")
    code, _, err = await jane("create", "role", "node-reader", "--verb=get", "--resource=nodes", "-n", "team",
                              ok=False)
    assert code != 0 and err.strip() == (
        'Error from server (Forbidden): roles.rbac.authorization.k8s.io "node-reader" is forbidden: user "jane" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}'), err
    await jane("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "team")
    code, _, err = await jane("create", "rolebinding", "bob-root", "--clusterrole=cluster-admin", "--user=bob",
                              "-n", "team", ok=False)
    assert code != 0 and "is attempting to grant RBAC permissions not currently held" in err \
        and '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}' in err, err
    await jane("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", "team")
    code, _, err = await jane("create", "rolebinding", "bob-x", "--clusterrole=no-such-role", "--user=bob",
                              "-n", "team", ok=False)
    assert code != 0 and 'clusterroles.rbac.authorization.k8s.io "no-such-role" not found' in err, err
    # The `bind` verb on a role lets one bind it without holding it (upstream's BindingAuthorized).
    await admin("create", "role", "binder", "--verb=bind", "--resource=clusterroles", "--resource-name=cluster-admin",
                "-n", "team")
    await admin("create", "rolebinding", "jane-binds", "--role=binder", "--user=jane", "-n", "team")

    async def jane_binds() -> bool:
        return (await jane("create", "rolebinding", "bob-root", "--clusterrole=cluster-admin", "--user=bob",
                           "-n", "team", ok=False))[0] == 0
    await _eventually(jane_binds, "the bind verb to take effect")


async def _can(kubectl: Kubectl, verb: str, resource: str, namespace: str) -> bool:
    return (await kubectl("auth", "can-i", verb, resource, "-n", namespace, ok=False))[1] == "yes\n"


async def test_rbac_objects_are_validated(secured: tuple[APIServer, Path]) -> None:
    server, root = secured
    async with Client(server.address, tls=_tls(root, "admin")) as client:
        role = rbac_pb2.Role(metadata=meta_pb2.ObjectMeta(name="r"),
                             rules=[rbac_pb2.PolicyRule(verbs=["get"], nonResourceURLs=["/healthz"]),
                                    rbac_pb2.PolicyRule(resources=["pods"])])
        with pytest.raises(errors.Invalid) as caught:
            await client.roles.create(role)
        assert [(v.field, v.description.split(":")[0]) for v in caught.value.violations] == [
            ("rules[0].nonResourceURLs", "Invalid value"), ("rules[1].verbs", "Required value"),
            ("rules[1].apiGroups", "Required value")], caught.value.violations
        binding = rbac_pb2.RoleBinding(metadata=meta_pb2.ObjectMeta(name="b"),
                                       roleRef=rbac_pb2.RoleRef(kind="ClusterRole", name="view"),
                                       subjects=[rbac_pb2.Subject(kind="User", name="jane")])
        created = await client.rolebindings.create(binding)
        assert created.roleRef.apiGroup == "rbac.authorization.k8s.io"  # defaulted, as the subject's group
        assert created.subjects[0].apiGroup == "rbac.authorization.k8s.io"
        created.roleRef.name = "edit"
        with pytest.raises(errors.Invalid, match="cannot change roleRef"):
            await client.rolebindings.update(created)
        crb = rbac_pb2.ClusterRoleBinding(metadata=meta_pb2.ObjectMeta(name="c"),
                                          roleRef=rbac_pb2.RoleRef(kind="Role", name="view"),
                                          subjects=[rbac_pb2.Subject(kind="ServiceAccount", name="sa")])
        with pytest.raises(errors.Invalid) as caught:
            await client.clusterrolebindings.create(crb)
        assert {v.field for v in caught.value.violations} == {"roleRef.kind", "subjects[0].namespace"}


async def test_bootstrap_roles_are_written_and_reconciled(etcd: EtcdServer, prefix: str,
                                                          secured: tuple[APIServer, Path]) -> None:
    server, root = secured
    async with Client(server.address, tls=_tls(root, "admin")) as client:
        view = await client.clusterroles.get("view")
        assert view.metadata.annotations[AUTOUPDATE] == "true"
        assert view.metadata.labels["kubernetes.io/bootstrapping"] == "rbac-defaults"
        names = {r.metadata.name for r in (await client.clusterroles.list_all())[0]}
        assert {"cluster-admin", "admin", "edit", "view", "system:node", "system:kube-scheduler", "system:discovery",
                "system:public-info-viewer", "system:basic-user"} <= names, names
        full = list(view.rules)
        del view.rules[:]
        view.rules.append(full[0])
        await client.clusterroles.update(view)
        edit = await client.clusterroles.get("edit")
        edit.metadata.annotations[AUTOUPDATE] = "false"
        del edit.rules[:]
        edit.rules.append(rbac_pb2.PolicyRule(verbs=["get"], apiGroups=[""], resources=["pods"]))
        await client.clusterroles.update(edit)
    # Another apiserver starting on the same etcd reconciles: the missing rules are back,
    # the role its owner took over (autoupdate "false") is left alone.
    other = APIServer(apiserver_config(etcd, prefix))
    await other.start()
    try:
        async with Client(other.address) as client:
            assert list((await client.clusterroles.get("view")).rules) == full
            assert len((await client.clusterroles.get("edit")).rules) == 1
    finally:
        await other.stop(grace=0)


async def test_a_kubelet_reaches_only_its_own_objects(secured: tuple[APIServer, Path]) -> None:
    server, root = secured
    async with Client(server.address, tls=_tls(root, "admin")) as admin, \
            Client(server.address, tls=_tls(root, "kubelet/node-1-client")) as kubelet:
        own = await kubelet.nodes.create(node("node-1"))
        with pytest.raises(errors.Forbidden) as caught:
            await kubelet.nodes.create(node("node-2"))
        assert caught.value.message == 'nodes "node-2" is forbidden: node "node-1" is not allowed to modify node ' \
                                       '"node-2"'
        other = await admin.nodes.create(node("node-2"))
        other.metadata.labels["x"] = "y"
        with pytest.raises(errors.Forbidden, match='node "node-1" is not allowed to modify node "node-2"'):
            await kubelet.nodes.update(other)
        own.metadata.labels["node-restriction.kubernetes.io/trusted"] = "yes"
        with pytest.raises(errors.Forbidden, match="is not allowed to modify labels: "
                                                   "node-restriction.kubernetes.io/trusted"):
            await kubelet.nodes.update(own)
        del own.metadata.labels["node-restriction.kubernetes.io/trusted"]
        own.spec.taints.add(key="k", effect="NoSchedule")
        with pytest.raises(errors.Forbidden, match='node "node-1" is not allowed to modify taints'):
            await kubelet.nodes.update(own)
        # the apiserver's node IPAM writes the node's pod CIDR a moment after its create: read
        # after it, or the status update below conflicts with it (a clean-clone run saw that)
        own = await until(lambda: kubelet.nodes.get("node-1"), "node-1's pod CIDR", check=lambda n: n.spec.podCIDR)
        own.status.capacity["pods"] = "5"
        await kubelet.nodes.update_status(own)
        # Pods: status and delete only of its own; no pod created at all (mirror pods aside).
        mine = await admin.pods.create(pod("mine", node="node-1"))
        theirs = await admin.pods.create(pod("theirs", node="node-2"))
        mine.status.phase = "Running"
        await kubelet.pods.update_status(mine)
        theirs.status.phase = "Running"
        with pytest.raises(errors.Forbidden) as caught:
            await kubelet.pods.update_status(theirs)
        assert caught.value.message == 'pods "theirs" is forbidden: node "node-1" can only update pod status for ' \
                                       'pods with spec.nodeName set to itself'
        with pytest.raises(errors.Forbidden, match='node "node-1" can only delete pods with spec.nodeName set to '
                                                   'itself'):
            await kubelet.pods.delete("theirs", grace_period_seconds=0)
        await kubelet.pods.delete("mine", grace_period_seconds=0)
        with pytest.raises(errors.Forbidden, match='node "node-1" can only create mirror pods'):
            await kubelet.pods.create(pod("new", node="node-1"))
        with pytest.raises(errors.Forbidden, match='User "system:node:node-1" cannot update resource "pods"'):
            theirs = await admin.pods.get("theirs")
            theirs.metadata.labels["x"] = "y"
            await kubelet.pods.update(theirs)
        # Leases: its own, in kube-node-lease, only.
        await kubelet.leases.create(coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(
            name="node-1", namespace="kube-node-lease")))
        with pytest.raises(errors.Forbidden):
            await kubelet.leases.create(coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(
                name="node-2", namespace="kube-node-lease")))
        with pytest.raises(errors.Forbidden):
            await kubelet.roles.list_all()
        assert [p.metadata.name for p in (await kubelet.pods.list_all())[0]] == ["theirs"]
        assert isinstance(own, core_pb2.Node)


async def test_a_kubelet_gets_tokens_only_for_its_own_pods(secured: tuple[APIServer, Path]) -> None:
    server, root = secured
    async with Client(server.address, tls=_tls(root, "admin")) as admin, \
            Client(server.address, tls=_tls(root, "kubelet/node-1-client")) as kubelet:
        mine = await admin.pods.create(pod("mine", node="node-1"))
        theirs = await admin.pods.create(pod("theirs", node="node-2"))
        assert (await kubelet.serviceaccounts.create_token("default", bound_pod=mine)).status.token
        with pytest.raises(errors.Forbidden, match="node requested token bound to a pod scheduled on a different "
                                                   "node"):
            await kubelet.serviceaccounts.create_token("default", bound_pod=theirs)
        with pytest.raises(errors.Forbidden, match="node requested token not bound to a pod"):
            await kubelet.serviceaccounts.create_token("default")
        with pytest.raises(errors.Forbidden):
            await kubelet.serviceaccounts.get("default")
        other = core_pb2.ServiceAccount(metadata=meta_pb2.ObjectMeta(name="other"))
        await admin.serviceaccounts.create(other)
        with pytest.raises(errors.BadRequest, match="to pod running with different serviceaccount name"):
            await admin.serviceaccounts.create_token("other", bound_pod=mine)


WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}
WIDGETS_EDITOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "widgets-editor", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
    "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"],
               "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}


async def test_custom_resources_by_group_and_resource_and_the_aggregated_roles(
        secured: tuple[APIServer, Path], tmp_path: Path) -> None:
    """RBAC judges custom resources by their group and plural as any resource; an
    operator's ClusterRole labelled aggregate-to-edit becomes part of edit and admin
    (the controller manager's clusterrole-aggregation controller, as its own identity),
    and leaves them when it goes."""
    from controllers.manager import ControllerManager, ManagerConfig
    server, root = secured
    admin, jane = (_kubectl(server, root, tmp_path, w) for w in ("admin", "jane"))
    await admin("apply", "-f", "-", stdin=json.dumps(WIDGETS_CRD))
    await admin("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s")
    await admin("create", "rolebinding", "jane-edit", "--clusterrole=edit", "--user=jane", "-n", "default")
    await _eventually(lambda: _can(jane, "create", "pods", "default"), "the edit binding to take effect")
    code, _, err = await jane("get", "widgets", "-n", "default", ok=False)
    assert code != 0 and 'widgets.example.com is forbidden: User "jane" cannot list resource "widgets" in API ' \
                         'group "example.com" in the namespace "default"' in err, err

    manager = ControllerManager(Client(server.address, tls=_tls(root, "controller-manager")),
                                ManagerConfig(leader_elect=False))
    await manager.start()
    try:
        await admin("apply", "-f", "-", stdin=json.dumps(WIDGETS_EDITOR))
        await _eventually(lambda: _can(jane, "create", "widgets.example.com", "default"),
                          "edit to aggregate widgets-editor", timeout=20)
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
        await jane("create", "-f", "-", stdin=json.dumps(widget))
        assert not await _can(jane, "create", "widgets.example.com", "team")  # a RoleBinding: its namespace only
        async with Client(server.address, tls=_tls(root, "admin")) as client:
            roles = {r: await client.clusterroles.get(r) for r in ("admin", "edit", "view")}
            has_widgets = {name: any("widgets" in rule.resources for rule in role.rules)
                           for name, role in roles.items()}
            assert has_widgets == {"admin": True, "edit": True, "view": False}  # admin aggregates edit
            assert roles["edit"].aggregationRule.clusterRoleSelectors[0].matchLabels == {
                "rbac.authorization.k8s.io/aggregate-to-edit": "true"}
        await admin("delete", "clusterrole", "widgets-editor")
        await _eventually(lambda: _denied_widgets(jane), "edit to lose widgets-editor's rules", timeout=20)
    finally:
        await manager.stop()


async def _denied_widgets(kubectl: Kubectl) -> bool:
    return not await _can(kubectl, "create", "widgets.example.com", "default")


async def test_kubectl_as_impersonates_only_with_the_impersonate_verb(secured: tuple[APIServer, Path],
                                                                     tmp_path: Path) -> None:
    """`kubectl auth can-i --as=jane` answers for jane, not for the caller; impersonating
    needs the impersonate verb, as upstream's filter checks it."""
    server, root = secured
    admin, bob = (_kubectl(server, root, tmp_path, w) for w in ("admin", "bob"))
    assert (await admin("auth", "can-i", "list", "pods", ok=False))[:2] == (0, "yes\n")
    assert (await admin("auth", "can-i", "list", "pods", "--as=jane", ok=False))[:2] == (1, "no\n")
    await admin("create", "namespace", "ns")
    await admin("create", "serviceaccount", "sa", "-n", "ns")
    await admin("create", "rolebinding", "sa-view", "--clusterrole=view", "--serviceaccount=ns:sa", "-n", "ns")

    async def sa_lists() -> bool:
        code, out, err = await admin("get", "pods", "-n", "ns", "--as=system:serviceaccount:ns:sa", ok=False)
        return code == 0
    await _eventually(sa_lists, "the ServiceAccount's view binding")
    code, _, err = await admin("get", "secrets", "-n", "ns", "--as=system:serviceaccount:ns:sa", ok=False)
    assert code != 0 and 'User "system:serviceaccount:ns:sa" cannot list resource "secrets"' in err, err
    code, _, err = await bob("get", "--raw", "/api/v1/namespaces/default/pods", "--as=jane", ok=False)
    assert code != 0 and err.strip() == 'Error from server (Forbidden): users "jane" is forbidden: User "bob" cannot ' \
                                        'impersonate resource "users" in API group "" at the cluster scope', err
    await admin("create", "clusterrole", "impersonator", "--verb=impersonate", "--resource=users,groups")
    await admin("create", "clusterrolebinding", "bob-impersonates", "--clusterrole=impersonator", "--user=bob")

    async def bob_is_jane() -> bool:
        code, out, _ = await bob("auth", "whoami", "--as=jane", "--as-group=devs", "-o", "json", ok=False)
        return code == 0 and json.loads(out)["status"]["userInfo"] == {
            "username": "jane", "groups": ["devs", "system:authenticated"]}
    await _eventually(bob_is_jane, "bob impersonating jane")


async def test_token_and_subject_access_reviews(secured: tuple[APIServer, Path], tmp_path: Path) -> None:
    """TokenReview of a ServiceAccount token and of a forged one; SubjectAccessReview and
    LocalSubjectAccessReview answered for another user ([sig-auth] SubjectReview)."""
    server, root = secured
    admin = _kubectl(server, root, tmp_path, "admin")
    await admin("create", "serviceaccount", "robot")
    token = (await admin("create", "token", "robot"))[1].strip()

    async def review(token: str) -> dict[str, Any]:
        body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        out = (await admin("create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews", "-f", "-",
                           stdin=body))[1]
        return dict(json.loads(out)["status"])
    status = await review(token)
    assert status["authenticated"] is True and status["user"]["username"] == "system:serviceaccount:default:robot"
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    status = await review(forged)
    assert "authenticated" not in status and status["error"], status

    async def access(path: str, spec: dict[str, Any]) -> dict[str, Any]:
        kind = "LocalSubjectAccessReview" if "namespaces" in path else "SubjectAccessReview"
        body = json.dumps({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec})
        return dict(json.loads((await admin("create", "--raw", path, "-f", "-", stdin=body))[1]))
    sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    answer = await access(sar, {"user": "jane", "resourceAttributes": {"verb": "list", "resource": "pods",
                                                                        "namespace": "default"}})
    assert answer["status"] == {"allowed": False}, answer
    answer = await access(sar, {"user": "x", "groups": ["system:masters"], "nonResourceAttributes": {
        "verb": "get", "path": "/healthz"}})
    assert answer["status"]["allowed"] is True
    await admin("create", "rolebinding", "jane-view", "--clusterrole=view", "--user=jane", "-n", "default")

    async def jane_may() -> bool:
        answer = await access("/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
                              {"user": "jane", "resourceAttributes": {"verb": "list", "resource": "pods"}})
        return bool(answer["status"]["allowed"]) and answer["spec"]["resourceAttributes"]["namespace"] == "default"
    await _eventually(jane_may, "jane's binding in the local review")


async def test_subjectreview_api_operations(secured: tuple[APIServer, Path], tmp_path: Path) -> None:
    """SubjectReview ([sig-auth] SubjectReview should support SubjectReview API operations):
    what a SubjectAccessReview and a LocalSubjectAccessReview answer for a ServiceAccount is
    what the ServiceAccount's own request (impersonated) gets."""
    server, root = secured
    admin = _kubectl(server, root, tmp_path, "admin")
    await admin("create", "namespace", "reviews")
    await admin("create", "serviceaccount", "e2e", "-n", "reviews")
    user = "system:serviceaccount:reviews:e2e"
    groups = ["system:serviceaccounts", "system:serviceaccounts:reviews", "system:authenticated"]

    async def answers() -> tuple[bool, bool, bool]:
        code, _, _ = await admin("get", "--raw", "/api/v1/namespaces/reviews/configmaps", f"--as={user}", ok=False)
        reviews = []
        for path, kind in (("/apis/authorization.k8s.io/v1/subjectaccessreviews", "SubjectAccessReview"),
                           ("/apis/authorization.k8s.io/v1/namespaces/reviews/localsubjectaccessreviews",
                            "LocalSubjectAccessReview")):
            body = json.dumps({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": {
                "user": user, "groups": groups,
                "resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": "reviews"}}})
            reviews.append(json.loads((await admin("create", "--raw", path, "-f", "-", stdin=body))[1]))
        return code == 0, bool(reviews[0]["status"]["allowed"]), bool(reviews[1]["status"]["allowed"])
    assert await answers() == (False, False, False)
    await admin("create", "rolebinding", "e2e-view", "--clusterrole=view", "--serviceaccount=reviews:e2e",
                "-n", "reviews")

    async def all_allowed() -> bool:
        return await answers() == (True, True, True)
    await _eventually(all_allowed, "the binding in the request and both reviews")
