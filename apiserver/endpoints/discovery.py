"""Discovery (upstream's endpoints/discovery): /api, /apis, /apis/<group> and each
group-version's APIResourceList, read from the scheme when asked, so entries registered
at run time are listed at once. Groups served beside the scheme (metrics.k8s.io) add
their own resource lists. And aggregated discovery (apidiscovery.k8s.io v2, v2beta1):
/api and /apis as one APIGroupDiscoveryList each, every group's versions and resources
in one answer, which kubectl asks for first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubeling.dynamic import version_priority
from kubeling.scheme import VERBS, ResourceType, Scheme, deletes_collections

__all__ = ["Discovery", "VERSION", "aggregated_version"]

AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSIONS = ("v2", "v2beta1")  # the first: preferred

# The server's version: kubectl's wrapper on these machines runs the kubectl matching
# this minor, and clients use it for feature checks.
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-kubeling", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "python", "compiler": "cpython",
           "platform": "linux/amd64"}

# group -> version -> its APIResourceList: groups served beside the scheme (the metrics
# API, the extension apiservers behind APIServices), as they are now.
ExtraGroups = Mapping[str, Mapping[str, dict[str, Any]]]


class Discovery:
    def __init__(self, scheme: Scheme, extra: Callable[[], ExtraGroups] | None = None) -> None:
        self.scheme = scheme
        self.extra = extra or (lambda: {})

    def api_versions(self, server_address: str) -> dict[str, Any]:
        """/api: the core group's versions."""
        return {"kind": "APIVersions", "versions": self.scheme.groups().get("", ["v1"]),
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}

    def _versions(self) -> dict[str, list[str]]:
        """The named groups, by name, with their versions."""
        groups = {g: v for g, v in self.scheme.groups().items() if g}
        for group, versions in self.extra().items():
            groups.setdefault(group, sorted(versions, key=version_priority))
        return dict(sorted(groups.items()))

    def api_group(self, group: str) -> dict[str, Any] | None:
        """/apis/<group>, None for a group nobody serves."""
        versions = self._versions().get(group)
        if versions is None:
            return None
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed,
                "preferredVersion": listed[0]}

    def api_group_list(self) -> dict[str, Any]:
        """/apis: every named group."""
        groups = []
        for name in self._versions():
            group = self.api_group(name)
            assert group is not None
            del group["kind"], group["apiVersion"]
            groups.append(group)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def aggregated(self, core: bool, version: str) -> dict[str, Any]:
        """/api (the core group) or /apis (the named ones) as an APIGroupDiscoveryList."""
        groups = {"": self.scheme.groups().get("", ["v1"])} if core else self._versions()
        items = []
        for group, versions in groups.items():
            served = []
            for v in versions:
                listing = self.resource_list(group, v)
                if listing is not None:
                    served.append({"version": v, "resources": _aggregated(listing["resources"], group, v),
                                   "freshness": "Current"})
            if served:
                items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": served})
        return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{AGGREGATED_GROUP}/{version}", "metadata": {},
                "items": items}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        """/api/<version> or /apis/<group>/<version>, None when no resource is there."""
        extra = self.extra().get(group, {}).get(version)
        if extra is not None:
            return dict(extra)
        items: list[dict[str, Any]] = []
        for rt in self.scheme:
            if rt.group == group and rt.version == version:
                items.extend(_resources(rt))
        if not items:
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": items}


def _resources(rt: ResourceType[Any]) -> list[dict[str, Any]]:
    """The resource's APIResource, then one per subresource."""
    entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                             "kind": rt.kind,
                             "verbs": sorted([*VERBS, "deletecollection"]) if deletes_collections(rt) else list(VERBS)}
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    out = [entry]
    for sub in rt.subresources:
        item: dict[str, Any] = {"name": f"{rt.plural}/{sub.name}", "singularName": "", "namespaced": rt.namespaced,
                                "kind": sub.kind or rt.kind, "verbs": list(sub.verbs)}
        if sub.group is not None:
            item.update(group=sub.group, version=sub.version)
        out.append(item)
    return out


def _aggregated(resources: list[dict[str, Any]], group: str, version: str) -> list[dict[str, Any]]:
    """APIResourceList items as APIResourceDiscovery: each resource with its subresources."""
    out: dict[str, dict[str, Any]] = {}
    for item in resources:
        name = item["name"]
        kind = {"group": item.get("group", group), "version": item.get("version", version), "kind": item["kind"]}
        if "/" not in name:
            entry: dict[str, Any] = {"resource": name, "responseKind": kind,
                                     "scope": "Namespaced" if item["namespaced"] else "Cluster",
                                     "singularResource": item.get("singularName", ""), "verbs": item["verbs"]}
            for key in ("shortNames", "categories"):
                if item.get(key):
                    entry[key] = item[key]
            out[name] = entry
            continue
        parent, _, sub = name.partition("/")
        if parent in out:
            out[parent].setdefault("subresources", []).append(
                {"subresource": sub, "responseKind": kind, "verbs": item["verbs"]})
    return list(out.values())


def aggregated_version(accept: str) -> str | None:
    """The aggregated discovery version the Accept header asks for first, None when it
    asks for none (the plain documents then)."""
    for media in accept.split(","):
        params = dict(p.strip().partition("=")[::2] for p in media.split(";")[1:])
        if params.get("g") == AGGREGATED_GROUP and params.get("as") == "APIGroupDiscoveryList" and \
                params.get("v") in AGGREGATED_VERSIONS:
            return params["v"]
    return None
