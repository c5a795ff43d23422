"""Upstream's default ClusterRoles and ClusterRoleBindings (plugin/pkg/auth/authorizer/rbac/
bootstrappolicy), for the resources kubeling serves: what a fresh cluster grants before
anyone writes an RBAC object. view, edit and admin are upstream's aggregated roles: their
parts are the system:aggregate-to-* roles, and the controller manager's clusterrole
aggregation controller adds whatever else is labelled for them.
"""

from __future__ import annotations

from apiserver.auth.rbac import Binding, Policy, PolicyRule, Role, RoleRef, Subject
from kubeling.rbacaggregation import AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW

__all__ = ["bootstrap_policy", "cluster_roles", "cluster_role_bindings", "node_rules", "AGGREGATION"]

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
CORE, COORDINATION, RBAC = "", "coordination.k8s.io", "rbac.authorization.k8s.io"
APPS, BATCH, POLICY, SCHEDULING = "apps", "batch", "policy", "scheduling.k8s.io"
NETWORKING = "networking.k8s.io"
CERTIFICATES = "certificates.k8s.io"
_SIGNERS = ("kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
            "kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown")
AUTOSCALING = "autoscaling"
DISCOVERY, STORAGE = "discovery.k8s.io", "storage.k8s.io"
_WORKLOADS = ("controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
              "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
              "statefulsets/scale", "statefulsets/status")
AUTHENTICATION, AUTHORIZATION, EVENTS = "authentication.k8s.io", "authorization.k8s.io", "events.k8s.io"


def _rule(verbs: tuple[str, ...], groups: tuple[str, ...], resources: tuple[str, ...],
          names: tuple[str, ...] = ()) -> PolicyRule:
    return PolicyRule(verbs, groups, resources, names)


def _urls(verbs: tuple[str, ...], urls: tuple[str, ...]) -> PolicyRule:
    return PolicyRule(verbs, non_resource_urls=urls)


_VIEW = (
    _rule(READ, (CORE,), ("pods", "pods/log", "pods/status", "events", "namespaces", "namespaces/status",
                          "serviceaccounts", "configmaps", "services", "services/status", "endpoints",
                          "persistentvolumeclaims", "persistentvolumeclaims/status", "replicationcontrollers",
                          "replicationcontrollers/scale", "replicationcontrollers/status", "limitranges",
                          "resourcequotas", "resourcequotas/status")),
    _rule(READ, (EVENTS,), ("events",)),
    _rule(READ, (APPS,), _WORKLOADS),
    _rule(READ, (BATCH,), ("cronjobs", "cronjobs/status", "jobs", "jobs/status")),
    _rule(READ, (AUTOSCALING,), ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
    _rule(READ, (POLICY,), ("poddisruptionbudgets", "poddisruptionbudgets/status")),
    _rule(READ, (NETWORKING,), ("ingresses", "ingresses/status", "networkpolicies")),
    _rule(READ, ("metrics.k8s.io",), ("pods", "nodes")),  # upstream's system:aggregated-metrics-reader
)
_EDIT_ONLY = (
    _rule(READ + WRITE, (CORE,), ("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy",
                                  "pods/ephemeralcontainers")),
    _rule(("create",), (CORE,), ("pods/eviction",)),
    _rule(READ + WRITE, (CORE,), ("serviceaccounts", "configmaps", "secrets", "services", "services/proxy",
                                  "endpoints", "persistentvolumeclaims", "replicationcontrollers",
                                  "replicationcontrollers/scale")),
    _rule(("create",), (CORE,), ("serviceaccounts/token",)),
    _rule(READ + WRITE, (APPS,), ("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
                                  "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale")),
    _rule(READ + WRITE, (BATCH,), ("cronjobs", "jobs")),
    _rule(READ + WRITE, (AUTOSCALING,), ("horizontalpodautoscalers",)),
    _rule(READ + WRITE, (POLICY,), ("poddisruptionbudgets",)),
    _rule(READ + WRITE, (NETWORKING,), ("ingresses", "networkpolicies")),
)
_ADMIN_ONLY = (
    _rule(READ + WRITE, (RBAC,), ("roles", "rolebindings")),
    _rule(("create",), (AUTHORIZATION,), ("localsubjectaccessreviews",)),
)


def _union(*parts: tuple[PolicyRule, ...]) -> tuple[PolicyRule, ...]:
    return tuple(dict.fromkeys(rule for part in parts for rule in part))


# What the clusterrole-aggregation controller makes of admin, edit and view from the parts
# below (their selectors match, by name: edit <- system:aggregate-to-edit, view;
# admin <- edit, system:aggregate-to-admin), written at bootstrap so that an apiserver
# without a controller manager grants them too.
_EDIT = _union(_EDIT_ONLY, _VIEW)
_ADMIN = _union(_EDIT, _ADMIN_ONLY)

# name -> (its labels, the label its aggregationRule selects), as upstream's bootstrap policy
AGGREGATION: dict[str, tuple[dict[str, str], str]] = {
    "admin": ({}, AGGREGATE_TO_ADMIN),
    "edit": ({AGGREGATE_TO_ADMIN: "true"}, AGGREGATE_TO_EDIT),
    "view": ({AGGREGATE_TO_EDIT: "true"}, AGGREGATE_TO_VIEW),
    "system:aggregate-to-admin": ({AGGREGATE_TO_ADMIN: "true"}, ""),
    "system:aggregate-to-edit": ({AGGREGATE_TO_EDIT: "true"}, ""),
    "system:aggregate-to-view": ({AGGREGATE_TO_VIEW: "true"}, ""),
}


def cluster_roles() -> list[Role]:
    return [
        Role("cluster-admin", (_rule(("*",), ("*",), ("*",)), _urls(("*",), ("*",)))),
        Role("admin", _ADMIN),
        Role("edit", _EDIT),
        Role("view", _VIEW),
        Role("system:aggregate-to-admin", _ADMIN_ONLY),
        Role("system:aggregate-to-edit", _EDIT_ONLY),
        Role("system:aggregate-to-view", _VIEW),
        Role("system:discovery", (_urls(("get",), ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                   "/openapi", "/openapi/*", "/readyz", "/version", "/version/")),)),
        Role("system:public-info-viewer", (_urls(("get",), ("/healthz", "/livez", "/readyz", "/version",
                                                            "/version/")),)),
        Role("system:basic-user", (
            _rule(("create",), (AUTHORIZATION,), ("selfsubjectaccessreviews", "selfsubjectrulesreviews")),
            _rule(("create",), (AUTHENTICATION,), ("selfsubjectreviews",)),
        )),
        # what an extension apiserver or a webhook needs to delegate its decisions (upstream's)
        Role("system:auth-delegator", (
            _rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            _rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",)),
        )),
        Role("system:kube-scheduler", (
            _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
            _rule(("create",), (COORDINATION,), ("leases",)),
            _rule(("get", "update"), (COORDINATION,), ("leases",), ("kube-scheduler",)),
            _rule(READ, (CORE,), ("nodes", "namespaces")),
            _rule(("delete", "get", "list", "watch"), (CORE,), ("pods",)),
            _rule(("create",), (CORE,), ("bindings", "pods/binding")),
            _rule(("patch", "update"), (CORE,), ("pods/status",)),
            _rule(READ, (POLICY,), ("poddisruptionbudgets",)),
            # what selects pods: spreading (SelectorSpread, PodTopologySpread's defaults, ServiceAffinity)
            _rule(READ, (CORE,), ("services",)),
            _rule(READ, (APPS,), ("replicasets", "statefulsets")),
            _rule(READ, (CORE,), ("replicationcontrollers",)),
            _rule(READ, (SCHEDULING,), ("priorityclasses",)),
            # upstream's system:volume-scheduler, and what NodeVolumeLimits and VolumeBinding read
            _rule(READ + ("patch", "update"), (CORE,), ("persistentvolumes", "persistentvolumeclaims")),
            _rule(READ, (STORAGE,), ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities")),
            _rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            _rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",)),
        )),
        # Upstream's system:kube-controller-manager with the node lifecycle controller's
        # rules, the workload controllers' and the garbage collector's (upstream gives each controller its own
        # ServiceAccount; one identity here).
        Role("system:kube-controller-manager", (
            _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
            _rule(("create",), (COORDINATION,), ("leases",)),
            _rule(("get", "update"), (COORDINATION,), ("leases",), ("kube-controller-manager",)),
            _rule(READ, (COORDINATION,), ("leases",)),
            _rule(READ + ("patch", "update"), (CORE,), ("nodes",)),
            _rule(("patch", "update"), (CORE,), ("nodes/status", "pods/status")),
            _rule(READ + ("create", "delete", "patch", "update"), (CORE,), ("pods",)),
            _rule(READ, (CORE,), ("namespaces", "serviceaccounts")),
            # the workload controllers'
            _rule(READ + ("create", "delete", "patch", "update"), (APPS,),
                  ("controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets")),
            _rule(("patch", "update"), (APPS,), ("daemonsets/status", "deployments/status", "replicasets/status",
                                                 "statefulsets/status")),
            _rule(READ + ("create", "delete", "patch", "update"), (CORE,), ("replicationcontrollers",)),
            _rule(("patch", "update"), (CORE,), ("replicationcontrollers/status",)),
            _rule(READ + ("create", "patch", "update", "delete"), (BATCH,), ("cronjobs", "jobs")),
            _rule(("patch", "update"), (BATCH,), ("cronjobs/status", "jobs/status")),
            # the horizontal pod autoscaler's: any scale, its status, the pods' metrics
            _rule(READ, (AUTOSCALING,), ("horizontalpodautoscalers",)),
            _rule(("patch", "update"), (AUTOSCALING,), ("horizontalpodautoscalers/status",)),
            _rule(("get", "patch", "update"), ("*",), ("*/scale",)),
            _rule(("get", "list"), ("metrics.k8s.io",), ("pods",)),
            _rule(READ, (POLICY,), ("poddisruptionbudgets",)),
            _rule(("patch", "update"), (POLICY,), ("poddisruptionbudgets/status",)),
            # the EndpointSlice and Endpoints controllers'
            _rule(READ, (CORE,), ("services",)),
            _rule(READ + ("create", "delete", "patch", "update"), (CORE,), ("endpoints",)),
            _rule(READ + ("create", "delete", "patch", "update"), (DISCOVERY,), ("endpointslices",)),
            # the service load balancer's (upstream's cloud service controller's)
            _rule(("patch", "update"), (CORE,), ("services/status",)),
            # the persistent volume binder's and the protection controllers'
            _rule(READ + ("create", "delete", "patch", "update"), (CORE,), ("persistentvolumes",)),
            _rule(READ + ("create", "patch", "update"), (CORE,), ("persistentvolumeclaims",)),
            _rule(("patch", "update"), (CORE,), ("persistentvolumes/status", "persistentvolumeclaims/status")),
            _rule(READ, (STORAGE,), ("storageclasses", "csidrivers", "csinodes")),
            _rule(READ + ("create", "delete", "patch", "update"), (STORAGE,), ("volumeattachments",)),
            # the resource quota controller's (it reads whatever it counts with the collector's rule)
            _rule(("patch", "update"), (CORE,), ("resourcequotas/status",)),
            # the garbage collector's: whatever has owners
            _rule(READ + ("delete", "patch", "update"), ("*",), ("*",)),
            # the clusterrole-aggregation controller's (escalate: it writes rules it need not hold)
            _rule(("escalate", "get", "list", "watch", "patch", "update"), (RBAC,), ("clusterroles",)),
            # the certificate controllers' (upstream's system:controller:certificate-controller):
            # approve nodes' client requests, sign for kubernetes.io's signers, clean up
            _rule(("get", "list", "watch", "delete"), (CERTIFICATES,), ("certificatesigningrequests",)),
            _rule(("update",), (CERTIFICATES,), ("certificatesigningrequests/status",
                                                 "certificatesigningrequests/approval")),
            _rule(("approve",), (CERTIFICATES,), ("signers",), ("kubernetes.io/kube-apiserver-client-kubelet",
                                                                # kubeling's serving policy, when on
                                                                "kubernetes.io/kubelet-serving")),
            _rule(("sign",), (CERTIFICATES,), ("signers",), _SIGNERS),
            _rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            _rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",)),
        )),
        # who may ask for which certificate, and approve for which signer (upstream's
        # bootstrap roles; `selfnodeclient`/`nodeclient` are what the approver's reviews ask)
        # what a machine joining with a bootstrap token may do: ask for its certificate
        Role("system:node-bootstrapper", (
            _rule(("create", "get", "list", "watch"), (CERTIFICATES,), ("certificatesigningrequests",)),)),
        Role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", (
            _rule(("create",), (CERTIFICATES,), ("certificatesigningrequests/nodeclient",)),)),
        Role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", (
            _rule(("create",), (CERTIFICATES,), ("certificatesigningrequests/selfnodeclient",)),)),
        *(Role(f"system:certificates.k8s.io:{signer.partition('/')[2]}-approver", (
            _rule(("approve",), (CERTIFICATES,), ("signers",), (signer,)),)) for signer in _SIGNERS),
        # What a kubelet may do at all (not bound by default, as upstream: the Node
        # authorizer grants these rules and NodeRestriction narrows them to its own node).
        Role("system:node", node_rules()),
        # kube-proxy's (upstream's system:node-proxier) and the cluster DNS's (system:kube-dns)
        Role("system:node-proxier", (
            _rule(("list", "watch"), (CORE,), ("services", "endpoints")),
            _rule(READ, (CORE,), ("nodes",)),
            _rule(("list", "watch"), (DISCOVERY,), ("endpointslices",)),
            _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
        )),
        # the network policy controllers' (kube-router's ClusterRole, the part its netpol controller uses)
        Role("system:network-policy", (
            _rule(("list", "watch"), (CORE,), ("pods", "namespaces")),
            _rule(("list", "watch"), (NETWORKING,), ("networkpolicies",)),
        )),
        # the ingress controller's (ingress-nginx's ClusterRole, less what it needs for leader election)
        Role("system:ingress-controller", (
            _rule(("list", "watch"), (CORE,), ("services", "secrets")),
            _rule(("list", "watch"), (DISCOVERY,), ("endpointslices",)),
            _rule(("get", "list", "watch"), (NETWORKING,), ("ingresses", "ingressclasses")),
            _rule(("update", "patch"), (NETWORKING,), ("ingresses/status",)),
            _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
        )),
        Role("system:kube-dns", (
            _rule(("list", "watch"), (CORE,), ("services", "endpoints")),
            _rule(("list", "watch"), (DISCOVERY,), ("endpointslices",)),
        )),
        # The sidecars of kubeling's hostpath CSI driver (upstream's external-provisioner-runner
        # role of csi-driver-host-path's deployment, made a bootstrap role here because
        # `kubeling up` installs the driver).
        # metrics-server's own role: the nodes and pods it reports on (their stats it reads
        # from the kubelets, which let this identity in)
        Role("system:metrics-server", (
            _rule(READ, (CORE,), ("nodes", "pods")),
            _rule(("get",), (CORE,), ("nodes/stats", "nodes/metrics")),
        )),
        Role("system:csi-hostpath", (
            _rule(READ + ("create", "delete", "patch", "update"), (CORE,), ("persistentvolumes",)),
            _rule(READ + ("patch", "update"), (CORE,), ("persistentvolumeclaims",)),
            _rule(("patch", "update"), (CORE,), ("persistentvolumeclaims/status",)),
            _rule(READ, (STORAGE,), ("storageclasses", "csinodes")),
            _rule(READ + ("create",), (STORAGE,), ("csidrivers",)),
            _rule(READ + ("patch", "update"), (STORAGE,), ("volumeattachments",)),
            _rule(("patch", "update"), (STORAGE,), ("volumeattachments/status",)),
            _rule(READ, (CORE,), ("nodes",)),
            _rule(READ + ("create", "delete", "patch", "update"), (STORAGE,), ("csistoragecapacities",)),
            _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
        )),
    ]


def node_rules() -> tuple[PolicyRule, ...]:
    """Upstream's NodeRules() for kubeling's resources."""
    return (
        _rule(("create", "get", "list", "watch", "patch", "update"), (CORE,), ("nodes",)),
        _rule(("patch", "update"), (CORE,), ("nodes/status",)),
        _rule(READ, (CORE,), ("pods",)),
        _rule(READ, (CORE,), ("services",)),  # the pods' Service environment variables
        _rule(("create", "delete"), (CORE,), ("pods",)),
        _rule(("patch", "update"), (CORE,), ("pods/status",)),
        _rule(("create", "patch", "update"), (CORE, EVENTS), ("events",)),
        _rule(("create", "delete", "get", "patch", "update"), (COORDINATION,), ("leases",)),
        _rule(("create",), (CORE,), ("serviceaccounts/token",)),
        _rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
        _rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews", "localsubjectaccessreviews")),
        # volumes: claims a pod on the node names (the Node authorizer's graph checks which),
        # the volumes they are bound to, the CSI objects the kubelet reads and its own CSINode
        _rule(("get",), (CORE,), ("persistentvolumeclaims", "persistentvolumes")),
        _rule(("patch", "update"), (CORE,), ("persistentvolumeclaims/status",)),
        _rule(("get",), (STORAGE,), ("volumeattachments",)),
        _rule(READ, (STORAGE,), ("csidrivers",)),
        _rule(("create", "delete", "get", "patch", "update"), (STORAGE,), ("csinodes",)),
        _rule(READ, ("node.k8s.io",), ("runtimeclasses",)),  # the handler of a pod's RuntimeClass
        _rule(("create", "get", "list", "watch"), (CERTIFICATES,), ("certificatesigningrequests",)),  # its certificates
    )


def cluster_role_bindings() -> list[Binding]:
    def bind(role: str, *subjects: Subject) -> Binding:
        return Binding(role, RoleRef("ClusterRole", role), subjects)

    authenticated = Subject("Group", "system:authenticated")
    unauthenticated = Subject("Group", "system:unauthenticated")
    return [
        bind("cluster-admin", Subject("Group", "system:masters")),
        bind("system:discovery", authenticated),
        bind("system:public-info-viewer", authenticated, unauthenticated),
        bind("system:basic-user", authenticated),
        bind("system:kube-scheduler", Subject("User", "system:kube-scheduler")),
        bind("system:kube-controller-manager", Subject("User", "system:kube-controller-manager")),
        bind("system:node-proxier", Subject("User", "system:kube-proxy")),
        bind("system:network-policy", Subject("User", "system:network-policy")),
        bind("system:ingress-controller", Subject("User", "system:ingress-controller")),
        bind("system:kube-dns", Subject("User", "system:kube-dns")),
        bind("system:csi-hostpath", Subject("User", "system:csi-hostpath")),
        bind("system:metrics-server", Subject("User", "system:metrics-server")),
        # kubeadm's: nodes renew their own client certificates, and a node joining with a
        # bootstrap token gets its first one, approved without a person (the approver asks)
        Binding("kubeling:node-autoapprove-certificate-rotation",
                RoleRef("ClusterRole", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"),
                (Subject("Group", "system:nodes"),)),
        Binding("kubeling:kubelet-bootstrap", RoleRef("ClusterRole", "system:node-bootstrapper"),
                (Subject("Group", "system:bootstrappers"),)),
        Binding("kubeling:node-autoapprove-bootstrap",
                RoleRef("ClusterRole", "system:certificates.k8s.io:certificatesigningrequests:nodeclient"),
                (Subject("Group", "system:bootstrappers"),)),
    ]


def bootstrap_policy() -> Policy:
    policy = Policy()
    for role in cluster_roles():
        policy.add_role(role)
    policy.bindings.extend(cluster_role_bindings())
    return policy
