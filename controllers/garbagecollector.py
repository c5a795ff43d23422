"""The garbage collector, as upstream's pkg/controller/garbagecollector: objects whose
owners (metadata.ownerReferences) are all gone are deleted; an owner deleted with
propagationPolicy Foreground (the `foregroundDeletion` finalizer) stays until its
blocking dependents are deleted; one deleted with Orphan (the `orphan` finalizer) has
its dependents' references to it removed first. An owner is judged gone only after a
live read says so (uid included), never from a cache alone."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from controllers.controllerref import drop_owner, update_with_retry
from kubeling import errors
from kubeling.client import ResourceClient
from kubeling.informer import Informer, object_key
from kubeling.scheme import ResourceType
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import meta_pb2

__all__ = ["GarbageCollector", "Watched", "ORPHAN", "FOREGROUND"]

log = logging.getLogger(__name__)

ORPHAN, FOREGROUND = "orphan", "foregroundDeletion"


@dataclass(frozen=True)
class Watched:
    """One resource the collector follows: as owner and as dependent."""

    type: ResourceType[Any]
    informer: Informer[Any]
    client: ResourceClient[Any]

    @property
    def resource(self) -> str:
        return self.type.group_resource  # plural.group: a custom resource may share a built-in's plural

    @property
    def api_version(self) -> str:
        return self.type.api_version

    @property
    def kind(self) -> str:
        return self.type.kind

    @property
    def namespaced(self) -> bool:
        return self.type.namespaced


Node = tuple[str, str]  # (resource, key)


class GarbageCollector:
    def __init__(self, watched: list[Watched], workers: int = 2) -> None:
        self.watched: dict[str, Watched] = {}
        self.by_kind: dict[tuple[str, str], Watched] = {}
        self.dependents: dict[str, set[Node]] = defaultdict(set)  # owner uid -> dependents
        self.uids: dict[str, Node] = {}
        self.queue = WorkQueue("garbage-collector")
        self.workers = Workers(self.queue, self.sync, workers)
        for w in watched:
            self.follow(w)

    def follow(self, w: Watched, also: tuple[str, ...] = ()) -> None:
        """Follow one more resource (a custom resource, once its definition is served);
        `also`: its other served versions, by which owner references may name it too.
        Call before its informer starts: the handlers see its objects from the first list."""
        self.watched[w.resource] = w
        for api_version in (w.api_version, *also):
            self.by_kind[(api_version, w.kind)] = w
        w.informer.add_handler(on_add=lambda obj, r=w.resource: self._seen(r, obj),
                               on_update=lambda old, new, r=w.resource: self._seen(r, new, old),
                               on_delete=lambda obj, r=w.resource: self._gone(r, obj))

    def unfollow(self, w: Watched) -> None:
        """A resource no longer served: its objects leave the graph as if deleted (their
        dependents are judged again: their owners are gone)."""
        if self.watched.get(w.resource) is not w:
            return
        for obj in w.informer.store.list():
            self._gone(w.resource, obj)
        del self.watched[w.resource]
        for key in [k for k, v in self.by_kind.items() if v is w]:
            del self.by_kind[key]

    # ---------------------------------------------------------------- the graph

    def _seen(self, resource: str, obj: Any, old: Any = None) -> None:
        node = (resource, object_key(obj))
        self.uids[obj.metadata.uid] = node
        if old is not None:
            for ref in old.metadata.ownerReferences:
                self.dependents[ref.uid].discard(node)
        for ref in obj.metadata.ownerReferences:
            self.dependents[ref.uid].add(node)
        # Only what may need the collector is judged (with live reads): a dependent
        # whose owner is not known here or is being deleted in the foreground.
        if any(self._suspect(ref.uid) for ref in obj.metadata.ownerReferences):
            self.queue.add(_key(node))
        # An owner waiting for its blocking dependents looks again when one of them changes
        # (unblocked, or its reference removed).
        refs = [*obj.metadata.ownerReferences, *(old.metadata.ownerReferences if old is not None else ())]
        for uid in {r.uid for r in refs}:
            owner_node = self.uids.get(uid)
            if owner_node is None:
                continue
            owner = self._object(owner_node)
            if owner is not None and owner.metadata.HasField("deletionTimestamp") \
                    and FOREGROUND in owner.metadata.finalizers:
                self.queue.add(_key(owner_node))
        meta = obj.metadata
        if meta.HasField("deletionTimestamp") and (ORPHAN in meta.finalizers or FOREGROUND in meta.finalizers):
            self.queue.add(_key(node))

    def _suspect(self, owner_uid: str) -> bool:
        node = self.uids.get(owner_uid)
        owner = self._object(node) if node is not None else None
        return owner is None or (owner.metadata.HasField("deletionTimestamp")
                                 and FOREGROUND in owner.metadata.finalizers)

    def _gone(self, resource: str, obj: Any) -> None:
        node = (resource, object_key(obj))
        self.uids.pop(obj.metadata.uid, None)
        for ref in obj.metadata.ownerReferences:
            self.dependents[ref.uid].discard(node)
            owner = self.uids.get(ref.uid)
            if owner is not None:
                self.queue.add(_key(owner))  # a foreground owner may be waiting for this one
        for dependent in self.dependents.pop(obj.metadata.uid, set()):
            self.queue.add(_key(dependent))

    def _object(self, node: Node) -> Any | None:
        w = self.watched.get(node[0])
        return w.informer.store.get(node[1]) if w is not None else None

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        resource, _, obj_key = key.partition("|")
        obj = self._object((resource, obj_key))
        if obj is None:
            return
        meta = obj.metadata
        if meta.HasField("deletionTimestamp"):
            if ORPHAN in meta.finalizers:
                await self._orphan(resource, obj)
                return
            if FOREGROUND in meta.finalizers:
                await self._foreground(resource, obj)
                return
        if meta.ownerReferences:
            await self._attempt_to_delete(resource, obj)

    async def _owner_state(self, dependent: Any, ref: meta_pb2.OwnerReference) -> tuple[bool, Any | None]:
        """(absent, the owner object if present): a live read decides."""
        w = self.by_kind.get((ref.apiVersion, ref.kind))
        if w is None:
            return False, None  # a kind not followed here: never judged gone
        namespace = dependent.metadata.namespace if w.namespaced else ""
        try:
            owner = await w.client.get(ref.name, namespace)
        except errors.NotFound:
            return True, None
        if owner.metadata.uid != ref.uid:
            return True, None
        return False, owner

    async def _attempt_to_delete(self, resource: str, obj: Any) -> None:
        if obj.metadata.HasField("deletionTimestamp"):
            return
        dangling, solid, waiting = [], [], []
        for ref in obj.metadata.ownerReferences:
            absent, owner = await self._owner_state(obj, ref)
            if absent:
                dangling.append(ref)
            elif owner is not None and owner.metadata.HasField("deletionTimestamp") \
                    and FOREGROUND in owner.metadata.finalizers:
                waiting.append(ref)
            else:
                solid.append(ref)
        w = self.watched[resource]
        if solid:
            if not dangling and not waiting:
                return
            # the owners gone and those waiting on their dependents leave the references
            # (upstream's: a waiting owner kept would wait on this one for ever)
            gone = {r.uid for r in dangling} | {r.uid for r in waiting}

            def tidy(o: Any) -> bool:
                kept = [r for r in o.metadata.ownerReferences if r.uid not in gone]
                if len(kept) == len(o.metadata.ownerReferences):
                    return False
                del o.metadata.ownerReferences[:]
                o.metadata.ownerReferences.extend(kept)
                return True
            await update_with_retry(w.client, obj, tidy)
            return
        # Every owner is gone or being deleted in the foreground: the dependent goes too.
        policy = "Foreground" if waiting and self.dependents.get(obj.metadata.uid) else "Background"
        log.info("garbage collector: deleting %s %s (owners %s gone%s)", w.kind, object_key(obj),
                 ", ".join(f"{r.kind}/{r.name}" for r in obj.metadata.ownerReferences),
                 ", in the foreground" if waiting else "")
        try:
            await w.client.delete(obj.metadata.name, obj.metadata.namespace, uid=obj.metadata.uid,
                                  propagation_policy=policy)
        except errors.NotFound:
            pass
        except errors.Conflict:
            pass  # another object with the name now: nothing of ours to delete

    async def _orphan(self, resource: str, owner: Any) -> None:
        uid = owner.metadata.uid
        for node in list(self.dependents.get(uid, ())):
            dependent = self._object(node)
            if dependent is None:
                continue
            await update_with_retry(self.watched[node[0]].client, dependent, lambda o: drop_owner(o, uid))
        log.info("garbage collector: orphaned the dependents of %s %s", self.watched[resource].kind,
                 object_key(owner))
        await self._remove_finalizer(resource, owner, ORPHAN)

    async def _foreground(self, resource: str, owner: Any) -> None:
        uid = owner.metadata.uid
        blocking = 0
        for node in list(self.dependents.get(uid, ())):
            dependent = self._object(node)
            if dependent is None:
                continue
            ref = next((r for r in dependent.metadata.ownerReferences if r.uid == uid), None)
            if ref is not None and ref.blockOwnerDeletion:
                blocking += 1
            if not dependent.metadata.HasField("deletionTimestamp"):
                self.queue.add(_key(node))  # judged as a dependent: deleted (in the foreground if it has its own)
        if blocking == 0:
            await self._remove_finalizer(resource, owner, FOREGROUND)

    async def _remove_finalizer(self, resource: str, obj: Any, finalizer: str) -> None:
        def change(o: Any) -> bool:
            if finalizer not in o.metadata.finalizers:
                return False
            o.metadata.finalizers.remove(finalizer)
            return True
        await update_with_retry(self.watched[resource].client, obj, change)


def _key(node: Node) -> str:
    return f"{node[0]}|{node[1]}"
