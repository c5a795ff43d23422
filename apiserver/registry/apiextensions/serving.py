"""Custom resources served at run time (upstream's crdHandler): every apiserver watches
the CustomResourceDefinitions and, for each whose names are accepted, registers a scheme
entry and a registry (with its watch cache) per served version, so the REST and gRPC
front ends, discovery and OpenAPI find them at once; a changed definition is served as it
now says, a deleted one stops being served. Every replica does this for itself: no
election (serving is local), while the controllers that write a definition's status run
in one replica (apiserver.controllers.crd_*)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from apiserver.registry.apiextensions.conversion import ServiceAddress, WebhookConverter
from apiserver.registry.apiextensions.converting import ConvertingRegistry
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.apiextensions.definition import Definition
from apiserver.registry.generic.store import Registry
from kubeling import dynamic, errors
from kubeling.periodic import cancel_and_wait
from kubeling.scheme import ResourceType, Scheme
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["CustomResourceServing", "RegistryFactory"]

log = logging.getLogger(__name__)

# Builds a registry with the apiserver's settings (storage, cache sizes, admission, namespace checks).
RegistryFactory = Callable[[CustomResourceStrategy], Registry[Any]]


@dataclass
class _Served:
    """One definition as served: its entries (one per served version) and their registries."""

    definition: Definition
    entries: list[ResourceType[Any]] = field(default_factory=list)
    registries: list[Registry[Any]] = field(default_factory=list)  # the entries', in their order
    storage: Registry[Any] | None = None  # with webhook conversion: the registry over etcd

    def shape(self) -> tuple[Any, ...]:
        return _shape(self.definition)


def _shape(d: Definition) -> tuple[Any, ...]:
    """What the scheme entries and registries are made of: when it changes, they are made
    anew (and swapped in); otherwise only the strategies (columns, rules, messages) are
    replaced. The schemas are part of it: defaults are applied to what is read from etcd,
    so the watch caches are filled anew when they change, as upstream's storage is."""
    return (d.uid, d.group, d.namespaced, json.dumps(d.status.get("acceptedNames", {}), sort_keys=True),
            json.dumps([v.schema for v in d.versions], sort_keys=True),
            tuple((v.name, v.served, v.storage, v.status, v.scale is not None) for v in d.versions), d.kind, d.plural,
            d.short_names, d.categories, d.singular, json.dumps(d.spec.get("conversion"), sort_keys=True))


class CustomResourceServing:
    def __init__(self, definitions: Registry[custom_pb2.CustomResource], scheme: Scheme,
                 registries: dict[ResourceType[Any], Registry[Any]], make_registry: RegistryFactory,
                 service_address: ServiceAddress | None = None, conversion_timeout: float = 30.0) -> None:
        self.definitions = definitions
        self.scheme = scheme
        self.registries = registries
        self.make_registry = make_registry
        self.service_address = service_address or _no_services
        self.conversion_timeout = conversion_timeout
        self._served: dict[str, _Served] = {}  # by CRD name
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set after each sync (tests and the establishing controller wait on it)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Serve what is defined now, then follow the definitions."""
        items, meta = await self.definitions.list(meta_pb2.ListRequest())
        for crd in items:
            await self._sync_one(crd)
        self._task = asyncio.create_task(self._follow(meta.resourceVersion), name="crd-serving")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        for name in list(self._served):
            await self._unserve(name)

    async def _follow(self, rv: str) -> None:
        while True:
            try:
                watcher = await self.definitions.watch(meta_pb2.WatchRequest(resourceVersion=rv,
                                                                             allowWatchBookmarks=True))
                async for data in watcher.stream():
                    event = custom_pb2.CustomResourceWatchEvent.FromString(data)
                    rv = event.object.metadata.resourceVersion or rv
                    if event.type == "DELETED":
                        await self._unserve(event.object.metadata.name)
                    elif event.type != "BOOKMARK":
                        await self._sync_one(event.object)
                    self._changed.set()
                if watcher.error is not None:
                    raise watcher.error
            except asyncio.CancelledError:
                raise
            except errors.Expired:
                rv = await self._resync()
            except Exception as err:  # noqa: BLE001 - the loop must outlive any one failure
                log.warning("serving custom resources: %s; relisting", err)
                await asyncio.sleep(0.5)
                rv = await self._resync()

    async def _resync(self) -> str:
        items, meta = await self.definitions.list(meta_pb2.ListRequest())
        names = {crd.metadata.name for crd in items}
        for name in [n for n in self._served if n not in names]:
            await self._unserve(name)
        for crd in items:
            await self._sync_one(crd)
        return meta.resourceVersion

    # ------------------------------------------------------------ what is served

    def served(self, crd_name: str) -> Definition | None:
        s = self._served.get(crd_name)
        return s.definition if s is not None else None

    def storage_registries(self) -> Iterator[Registry[Any]]:
        """One registry per served definition (its storage version's, else its first):
        what the namespace finalizer and the cleanup go through."""
        for s in self._served.values():
            if s.storage is not None:
                yield s.storage
                continue
            if not s.entries:
                continue
            storage = s.definition.storage_version.name
            entry = next((e for e in s.entries if e.version == storage), s.entries[0])
            registry = self.registries.get(entry)
            if registry is not None:
                yield registry

    def registry_of(self, crd_name: str) -> Registry[Any] | None:
        s = self._served.get(crd_name)
        if s is not None and s.storage is not None:
            return s.storage
        if s is None or not s.entries:
            return None
        return next(iter(r for e in s.entries if (r := self.registries.get(e)) is not None), None)

    async def wait_served(self, crd_name: str, uid: str, timeout: float) -> bool:
        """Until the definition (this uid) is served with ready caches; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            s = self._served.get(crd_name)
            if s is not None and s.definition.uid == uid and s.entries and \
                    all(self.registries[e].ready for e in s.entries if e in self.registries):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            self._changed.clear()
            try:
                # a registry's cache becoming ready sets nothing here: look again soon
                async with asyncio.timeout(min(left, 0.01)):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _sync_one(self, crd: custom_pb2.CustomResource) -> None:
        name = crd.metadata.name
        try:
            d = Definition.of(crd)
        except (ValueError, TypeError, StopIteration) as err:
            log.warning("customresourcedefinition %s cannot be served: %s", name, err)
            await self._unserve(name)
            return
        accepted = (d.status.get("acceptedNames") or {}).get("plural")
        if not accepted or not any(v.storage for v in d.versions):
            await self._unserve(name)
            return
        current = self._served.get(name)
        if current is not None and current.shape() == _shape(d):
            current.definition = d
            for entry in current.entries:
                found = self.registries.get(entry)
                version = d.version(entry.version)
                if found is not None and version is not None:
                    found.replace_strategy(CustomResourceStrategy(entry, d, version))
            if current.storage is not None:
                current.storage.replace_strategy(CustomResourceStrategy(
                    current.storage.strategy.resource, d, d.storage_version, stored_versions_vary=True))
            self.scheme.changed()  # OpenAPI shows the new schema
            return
        served = _Served(d)
        entries = d.resource_types()
        converter = self._converter(d)
        storage: Registry[Any] | None = None
        if converter is not None:
            # One registry (and cache) over etcd, writing the storage version and reading each
            # object in the version it was stored in (older ones stay until rewritten, as
            # upstream's); every served version, the storage version's too, is a view that
            # converts what it reads.
            storage_version = d.storage_version
            storage_entry = _unserved_entry(d, entries, storage_version.name)
            storage = served.storage = self.make_registry(
                CustomResourceStrategy(storage_entry, d, storage_version, stored_versions_vary=True))
            storage.upgrade = functools.partial(_upgraded, converter, storage_entry.api_version)
            await storage.start()
        made: list[tuple[ResourceType[Any], Registry[Any]]] = []
        for entry in entries:
            version = d.version(entry.version)
            assert version is not None
            strategy = CustomResourceStrategy(entry, d, version)
            registry: Registry[Any]
            if storage is not None and converter is not None:
                registry = ConvertingRegistry(storage, strategy, converter)
            else:
                registry = self.make_registry(strategy)
                await registry.start()
            made.append((entry, registry))
        # The swap, with no await in it: no request finds the resource missing while a
        # changed definition (a new schema, defaults, versions) is served anew.
        old = self._served.pop(name, None)
        if old is not None:
            self._unregister(old)
        left_out = []
        for entry, registry in made:
            try:
                self.scheme.register(entry)
            except ValueError as err:  # a built-in (or a stale entry) holds the name
                log.warning("customresourcedefinition %s: version %s not served: %s", name, entry.version, err)
                left_out.append(registry)
                continue
            self.registries[entry] = registry
            served.entries.append(entry)
            served.registries.append(registry)
        self._served[name] = served
        if old is not None:
            await self._stop(old)
        for registry in left_out:
            await registry.stop()
        log.info("serving %s (%s)", name, ", ".join(e.version for e in served.entries))

    def _converter(self, d: Definition) -> WebhookConverter | None:
        conversion = d.spec.get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        return WebhookConverter(d.kind, d.group, conversion.get("webhook") or {}, self.service_address,
                                self.conversion_timeout)

    async def _unserve(self, name: str) -> None:
        served = self._served.pop(name, None)
        if served is None:
            return
        self._unregister(served)
        await self._stop(served)
        log.info("no longer serving %s", name)

    def _unregister(self, served: _Served) -> None:
        for entry in served.entries:
            self.registries.pop(entry, None)
            if entry in self.scheme:
                self.scheme.unregister(entry)

    @staticmethod
    async def _stop(served: _Served) -> None:
        for registry in served.registries:
            await registry.stop()
        if served.storage is not None:
            await served.storage.stop()


async def _upgraded(converter: WebhookConverter, storage_version: str,
                    obj: custom_pb2.CustomResource) -> custom_pb2.CustomResource:
    """A stored object in the storage version (what an update starts from)."""
    if obj.apiVersion == storage_version:
        return obj
    converted = dynamic.new((await converter.convert([dynamic.to_dict(obj)], storage_version))[0])
    converted.metadata.resourceVersion = obj.metadata.resourceVersion
    return converted


def _unserved_entry(d: Definition, served: list[ResourceType[Any]], version: str) -> ResourceType[Any]:
    """The entry of the registry over etcd in a webhook-converted definition's storage
    version (never registered: the served versions are views over it)."""
    like = served[0]
    return ResourceType(d.group, version, like.kind, like.plural, custom_pb2.CustomResource, namespaced=d.namespaced,
                        subresources=like.subresources, custom=True)


async def _no_services(namespace: str, name: str, port: int) -> str:
    raise errors.ServiceUnavailable(f"services/{name} in {namespace}: no Service lookup in this apiserver")

