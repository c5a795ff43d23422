"""The APIServices the apiserver keeps (upstream's autoregister and availability
controllers, run by the elected replica):

- a local APIService (no service) for every group-version the apiserver serves itself,
  the built-in ones (`kube-aggregator.kubernetes.io/automanaged: onstart`) and those of
  custom resources (`true`, removed when no definition serves it any more), Available
  (`Local`);
- for every other APIService, the `Available` condition from what the remote check found
  (RemoteAPIs): Passed, or ServiceNotFound, MissingEndpoints, FailedDiscoveryCheck."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from apiserver.aggregator.remote import RemoteAPIs
from apiserver.controllers.crd_naming import set_condition
from apiserver.registry.generic.store import Registry
from kubeling import dynamic, errors
from kubeling.dynamic import content_of, set_content
from kubeling.periodic import Periodic
from kubeling.scheme import BUILTIN, ResourceType
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["LocalAPIServices", "APIServiceStatus", "AUTOMANAGED"]

log = logging.getLogger(__name__)

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
# upstream's priorities of the built-in groups (kube-apiserver's apiVersionPriorities)
_PRIORITIES = {"": (18000, 1), "apps": (17800, 15), "events.k8s.io": (17750, 15), "authentication.k8s.io": (17700, 15),
               "authorization.k8s.io": (17600, 15), "autoscaling": (17500, 15), "batch": (17400, 15),
               "certificates.k8s.io": (17300, 15), "networking.k8s.io": (17200, 15), "policy": (17100, 15),
               "rbac.authorization.k8s.io": (17000, 15), "storage.k8s.io": (16800, 15),
               "apiextensions.k8s.io": (16700, 15), "admissionregistration.k8s.io": (16700, 15),
               "scheduling.k8s.io": (16600, 15), "coordination.k8s.io": (16500, 15), "discovery.k8s.io": (16200, 15),
               "apiregistration.k8s.io": (18000, 15), "metrics.k8s.io": (100, 100)}


_BUILTIN = frozenset(BUILTIN)


def _name(group: str, version: str) -> str:
    return f"{version}.{group}" if group else version


class LocalAPIServices:
    def __init__(self, apiservices: Registry[custom_pb2.CustomResource],
                 served: Callable[[], Iterable[ResourceType[Any]]], interval: float = 1.0) -> None:
        self.apiservices = apiservices
        self.served = served
        self._loop = Periodic("aggregator-autoregister", interval, self._pass, first_at_start=True)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        wanted: dict[str, tuple[str, str, str]] = {}
        for r in self.served():
            wanted.setdefault(_name(r.group, r.version), (r.group, r.version, "onstart" if r in _BUILTIN else "true"))
        cache = self.apiservices.watch_cache
        present = {e.obj.metadata.name: e.obj for e in cache.store.values()}
        for name, (group, version, managed) in wanted.items():
            if name not in present:
                await self._create(name, group, version, managed)
        for name, obj in present.items():
            if obj.metadata.labels.get(AUTOMANAGED) == "true" and name not in wanted:
                try:
                    await self.apiservices.delete("", name)
                except errors.NotFound:
                    pass

    async def _create(self, name: str, group: str, version: str, managed: str) -> None:
        group_priority, version_priority = _PRIORITIES.get(group, (1000, 100))
        obj = dynamic.new({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                           "metadata": {"name": name, "labels": {AUTOMANAGED: managed}},
                           "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                                    "versionPriority": version_priority}})
        try:
            made = await self.apiservices.create(obj)
        except errors.AlreadyExists:
            return
        await _set_available(self.apiservices, made, ("True", "Local", "Local APIServices are always available"))


async def _set_available(registry: Registry[custom_pb2.CustomResource], obj: custom_pb2.CustomResource,
                         available: tuple[str, str, str]) -> None:
    content = content_of(obj)
    status = content.setdefault("status", {})
    if not set_condition(status, "Available", *available):
        return
    set_content(obj, content)
    try:
        await registry.update(obj, status=True)
    except (errors.Conflict, errors.NotFound):
        pass  # changed meanwhile: the next pass sees it


class APIServiceStatus:
    def __init__(self, apiservices: Registry[custom_pb2.CustomResource], remote: RemoteAPIs,
                 interval: float = 1.0) -> None:
        self.apiservices = apiservices
        self.remote = remote
        self._loop = Periodic("aggregator-available", interval, self._pass, first_at_start=True)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        found = {b.name: b.available for b in self.remote.backends() if b.available[0] != "Unknown"}
        items, _ = await self.apiservices.list(meta_pb2.ListRequest(resourceVersion="0"))
        for obj in items:
            spec = content_of(obj).get("spec") or {}
            if not spec.get("service"):
                wanted = ("True", "Local", "Local APIServices are always available")
            elif obj.metadata.name in found:
                wanted = found[obj.metadata.name]
            else:
                continue
            await _set_available(self.apiservices, obj, wanted)
