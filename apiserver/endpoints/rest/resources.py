"""What the REST facade serves: each resource's group, version, names and verbs, and the
discovery and OpenAPI documents built from them (the parts kubectl reads)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from apiserver.endpoints.rest.openapi import schemas
from apiserver.registry.metrics import GROUP as METRICS_GROUP
from apiserver.registry.metrics import VERSION as METRICS_VERSION
from apiserver.registry.metrics import resource_list as metrics_resource_list
from protos.kubeling.v1 import (
    apps_pb2,
    batch_pb2,
    coordination_pb2,
    core_pb2,
    discovery_pb2,
    policy_pb2,
    rbac_pb2,
    scheduling_pb2,
)

__all__ = ["Resource", "RESOURCES", "GROUPS", "by_path", "api_versions", "api_group_list", "api_group",
           "resource_list", "openapi_index", "openapi_document", "VERSION"]

# The server's version: kubectl's wrapper on these machines runs the kubectl matching
# this minor, and clients use it for feature checks.
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-kubeling", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "python", "compiler": "cpython",
           "platform": "linux/amd64"}

_MESSAGES: dict[str, Any] = {"Pod": core_pb2.Pod, "Node": core_pb2.Node, "Namespace": core_pb2.Namespace,
                             "Event": core_pb2.Event, "Lease": coordination_pb2.Lease,
                             "ServiceAccount": core_pb2.ServiceAccount, "ConfigMap": core_pb2.ConfigMap,
                             "Secret": core_pb2.Secret,
                             "Role": rbac_pb2.Role, "ClusterRole": rbac_pb2.ClusterRole,
                             "RoleBinding": rbac_pb2.RoleBinding, "ClusterRoleBinding": rbac_pb2.ClusterRoleBinding,
                             "ReplicaSet": apps_pb2.ReplicaSet, "Deployment": apps_pb2.Deployment,
                             "Job": batch_pb2.Job, "PriorityClass": scheduling_pb2.PriorityClass,
                             "PodDisruptionBudget": policy_pb2.PodDisruptionBudget, "Service": core_pb2.Service,
                             "Endpoints": core_pb2.Endpoints, "EndpointSlice": discovery_pb2.EndpointSlice}
_RBAC = "rbac.authorization.k8s.io"
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # status, binding, log, exec, attach, portforward
    categories: tuple[str, ...] = ()  # `kubectl get all` lists the "all" category

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def prefix(self) -> str:
        """The URL path of its group-version."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


RESOURCES: tuple[Resource, ...] = (
    Resource("pods", "Pod", "", "v1", True, ("po",),
             ("status", "binding", "eviction", "ephemeralcontainers", "log", "exec", "attach", "portforward"),
             ("all",)),
    Resource("nodes", "Node", "", "v1", False, ("no",), ("status",)),
    Resource("namespaces", "Namespace", "", "v1", False, ("ns",), ("status",)),
    Resource("events", "Event", "", "v1", True, ("ev",)),
    Resource("serviceaccounts", "ServiceAccount", "", "v1", True, ("sa",), ("token",)),
    Resource("configmaps", "ConfigMap", "", "v1", True, ("cm",)),
    Resource("secrets", "Secret", "", "v1", True),
    Resource("services", "Service", "", "v1", True, ("svc",), ("status",), ("all",)),
    Resource("endpoints", "Endpoints", "", "v1", True, ("ep",)),
    Resource("endpointslices", "EndpointSlice", "discovery.k8s.io", "v1", True),
    Resource("leases", "Lease", "coordination.k8s.io", "v1", True),
    Resource("roles", "Role", _RBAC, "v1", True),
    Resource("clusterroles", "ClusterRole", _RBAC, "v1", False),
    Resource("rolebindings", "RoleBinding", _RBAC, "v1", True),
    Resource("clusterrolebindings", "ClusterRoleBinding", _RBAC, "v1", False),
    Resource("deployments", "Deployment", "apps", "v1", True, ("deploy",), ("status", "scale"), ("all",)),
    Resource("replicasets", "ReplicaSet", "apps", "v1", True, ("rs",), ("status", "scale"), ("all",)),
    Resource("jobs", "Job", "batch", "v1", True, (), ("status",), ("all",)),
    Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io", "v1", False, ("pc",)),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, ("pdb",), ("status",)),
)
GROUPS = {"apps": "v1", "batch": "v1", "coordination.k8s.io": "v1", "discovery.k8s.io": "v1",
          "metrics.k8s.io": "v1beta1", "policy": "v1",
          _RBAC: "v1", "scheduling.k8s.io": "v1"}


def by_path(group: str, version: str, plural: str) -> Resource | None:
    for r in RESOURCES:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group(group: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{group}/{GROUPS[group]}", "version": GROUPS[group]}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


def api_group_list() -> dict[str, Any]:
    groups = [api_group(g) for g in GROUPS]
    for g in groups:
        del g["kind"], g["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    if (group, version) == (METRICS_GROUP, METRICS_VERSION):
        return metrics_resource_list()  # served by apiserver.registry.metrics, not a registry
    items: list[dict[str, Any]] = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        entry: dict[str, Any] = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                                 "kind": r.kind, "verbs": sorted([*_VERBS, "deletecollection"]) if r.namespaced
                                 else _VERBS}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        items.append(entry)
        for sub in r.subresources:
            # the streams: POST (SPDY) or GET (WebSocket)
            verbs = {"status": ["get", "patch", "update"], "binding": ["create"], "log": ["get"],
                     "token": ["create"], "scale": ["get", "patch", "update"],
                     "eviction": ["create"],
                     "ephemeralcontainers": ["get", "patch", "update"]}.get(sub, ["create", "get"])
            kind = {"binding": "Binding", "exec": "PodExecOptions", "attach": "PodAttachOptions",
                    "portforward": "PodPortForwardOptions", "token": "TokenRequest", "scale": "Scale",
                    "eviction": "Eviction"}.get(sub, r.kind)
            sub_group = {"token": "authentication.k8s.io", "scale": "autoscaling", "eviction": "policy"}.get(sub)
            sub_entry: dict[str, Any] = {"name": f"{r.plural}/{sub}", "singularName": "",
                                         "namespaced": r.namespaced, "kind": kind, "verbs": verbs}
            if sub_group:
                sub_entry.update(group=sub_group, version="v1")
            items.append(sub_entry)
    if not items:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": items}


# ------------------------------------------------------------------ OpenAPI v3

_GV_PATHS = {"": "api/v1", "coordination.k8s.io": "apis/coordination.k8s.io/v1", _RBAC: f"apis/{_RBAC}/v1",
             "apps": "apis/apps/v1", "batch": "apis/batch/v1", "policy": "apis/policy/v1",
             "scheduling.k8s.io": "apis/scheduling.k8s.io/v1", "discovery.k8s.io": "apis/discovery.k8s.io/v1"}


@functools.cache  # built once per group-version; callers only serialize it
def openapi_document(gv_path: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group-version: its paths, with the
    `fieldValidation` query parameter and the GVK extension on every write (what kubectl
    looks for before it leaves validation to the server), and the kinds' schemas."""
    group = next((g for g, p in _GV_PATHS.items() if p == gv_path), None)
    if group is None:
        return None
    paths: dict[str, Any] = {}
    kinds: list[tuple[Any, dict[str, str], str]] = []
    for r in RESOURCES:
        if r.group != group:
            continue
        gvk = [{"group": r.group, "version": r.version, "kind": r.kind}]
        field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
                            "description": "Ignore, Warn or Strict: what to do with unknown or duplicate fields"}
        ref = {"$ref": f"#/components/schemas/{_schema_name(r)}"}
        body = {"content": {"*/*": {"schema": ref}}, "required": True}
        ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}

        def op(verb: str, action: str, *, with_body: bool = False, r: Resource = r, ok: dict[str, Any] = ok,
               gvk: list[dict[str, str]] = gvk, field_validation: dict[str, Any] = field_validation,
               body: dict[str, Any] = body) -> dict[str, Any]:
            o: dict[str, Any] = {"operationId": f"{verb}{r.kind}", "responses": ok,
                                 "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk[0],
                                 "parameters": [field_validation] if with_body else []}
            if with_body:
                o["requestBody"] = body
            return o

        ns = "/namespaces/{namespace}" if r.namespaced else ""
        collection = f"/{gv_path}{ns}/{r.plural}"
        item = f"{collection}/{{name}}"
        paths[collection] = {"get": op("list", "list"), "post": op("create", "post", with_body=True)}
        paths[item] = {"get": op("read", "get"), "put": op("replace", "put", with_body=True),
                       "patch": op("patch", "patch", with_body=True), "delete": op("delete", "delete")}
        if "status" in r.subresources:
            paths[f"{item}/status"] = {"get": op("read", "get"), "put": op("replace", "put", with_body=True),
                                       "patch": op("patch", "patch", with_body=True)}
        kinds.append((_MESSAGES[r.kind].DESCRIPTOR, gvk[0], _schema_name(r)))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": schemas(kinds)}}


def _schema_name(r: Resource) -> str:
    group = {"": "core", "coordination.k8s.io": "coordination", _RBAC: "rbac", "apps": "apps", "batch": "batch",
             "policy": "policy", "scheduling.k8s.io": "scheduling", "discovery.k8s.io": "discovery"}[r.group]
    return f"io.k8s.api.{group}.{r.version}.{r.kind}"


@functools.cache
def openapi_index() -> dict[str, Any]:
    """/openapi/v3: where each group-version's document is (the hash lets clients cache)."""
    out = {}
    for path in _GV_PATHS.values():
        digest = hashlib.sha256(json.dumps(openapi_document(path), sort_keys=True).encode()).hexdigest()[:32].upper()
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}
