"""The custom resources the garbage collector follows, as their definitions come and go
(upstream's collector rediscovers resources through discovery every 30 s; here the
CustomResourceDefinitions are watched, so a new kind is followed as soon as it is served):
for each definition whose names are accepted, an informer on its preferred version, handed
to the collector with the other served versions it may be named by."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from controllers.garbagecollector import GarbageCollector, Watched
from kubeling.client import Client
from kubeling.dynamic import served_versions
from kubeling.informer import Informer
from protos.kubeling.v1 import custom_pb2

__all__ = ["CustomResourceFollower"]

log = logging.getLogger(__name__)


@dataclass
class _Followed:
    shape: tuple[Any, ...]
    watched: Watched


class CustomResourceFollower:
    def __init__(self, client: Client, definitions: Informer[custom_pb2.CustomResource],
                 collector: GarbageCollector) -> None:
        self.client = client
        self.collector = collector
        self._followed: dict[str, _Followed] = {}  # by definition name
        definitions.add_handler(on_add=self._sync, on_update=lambda old, new: self._sync(new),
                                on_delete=self._forget)

    async def _sync(self, crd: custom_pb2.CustomResource) -> None:
        entries = served_versions(crd)
        name = crd.metadata.name
        if not entries:
            await self._forget(crd)
            return
        preferred = entries[0]
        shape = (crd.metadata.uid, preferred.api_version, preferred.plural, preferred.kind, preferred.namespaced,
                 tuple(e.api_version for e in entries))
        current = self._followed.get(name)
        if current is not None and current.shape == shape:
            return
        await self._forget(crd)
        resource = self.client.resource(preferred)
        informer = Informer(resource)
        watched = Watched(preferred, informer, resource)
        self.collector.follow(watched, tuple(e.api_version for e in entries[1:]))
        self._followed[name] = _Followed(shape, watched)
        await informer.start()
        log.info("garbage collector: following %s (%s)", preferred.group_resource, preferred.api_version)

    def informer_for(self, group_resource: str) -> Informer[Any] | None:
        """The informer of a custom resource followed now (plural.group), for others that
        count what it holds (the quota controller)."""
        return next((f.watched.informer for f in self._followed.values() if f.watched.resource == group_resource),
                    None)

    async def _forget(self, crd: custom_pb2.CustomResource) -> None:
        followed = self._followed.pop(crd.metadata.name, None)
        if followed is None:
            return
        await followed.watched.informer.stop()
        self.collector.unfollow(followed.watched)

    async def stop(self) -> None:
        for followed in list(self._followed.values()):
            await followed.watched.informer.stop()
        self._followed.clear()
