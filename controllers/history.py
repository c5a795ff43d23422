"""Controller history, as upstream's pkg/controller/history: a DaemonSet's or StatefulSet's
pod templates kept as ControllerRevisions it owns, numbered in the order they were made
current, named `<parent>-<hash of the data>`, with the hash also on the revision's and
its pods' `controller-revision-hash` label. A hash collision bumps the parent's
collisionCount; a template made current again (a rollback) renumbers its old revision
instead of making a new one; revisions no pod uses are pruned to revisionHistoryLimit.

A revision's data is what `kubectl rollout undo` patches back into its parent:
`{"spec":{"template":{..., "$patch":"replace"}}}` (upstream's getPatch)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from controllers.controllerref import controller_of, controller_ref
from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, Informer
from kubeling.kjson import canonical_json, from_json, to_json
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2

__all__ = ["History", "CONTROLLER_REVISION_HASH", "hash_bytes", "template_patch", "template_of", "revision_hash"]

log = logging.getLogger(__name__)

CONTROLLER_REVISION_HASH = "controller-revision-hash"
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # upstream's rand.SafeEncodeString alphabet
_NAME_PREFIX_MAX = 223  # upstream's ControllerRevisionName: the parent's name, shortened


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def hash_bytes(data: bytes, probe: bytes = b"") -> str:
    """fnv-32a of the data and a collision probe, spelled as upstream's SafeEncodeString."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in str(_fnv32a(data + probe)))


def template_patch(template: core_pb2.PodTemplateSpec) -> bytes:
    body = to_json(template)
    body["$patch"] = "replace"
    return canonical_json({"spec": {"template": body}}).encode()


def template_of(revision: apps_pb2.ControllerRevision) -> core_pb2.PodTemplateSpec:
    """The pod template a revision holds."""
    data = json.loads(revision.data.raw or b"{}")
    body = dict((data.get("spec") or {}).get("template") or {})
    body.pop("$patch", None)
    decoded = from_json(body, core_pb2.PodTemplateSpec, ignore=frozenset())
    assert isinstance(decoded.message, core_pb2.PodTemplateSpec)
    return decoded.message


def revision_hash(revision: apps_pb2.ControllerRevision) -> str:
    return revision.metadata.labels.get(CONTROLLER_REVISION_HASH, "")


def _hash(data: bytes, collision_count: int) -> str:
    # upstream's HashControllerRevision writes the probe as its decimal text
    return hash_bytes(data, str(collision_count).encode() if collision_count else b"")


@dataclass
class History:
    client: Client
    revisions: Informer[apps_pb2.ControllerRevision]

    def owned(self, parent: Any) -> list[apps_pb2.ControllerRevision]:
        """The parent's revisions, oldest first."""
        uid = parent.metadata.uid
        out = [r for r in self.revisions.store.by_index(INDEX_NAMESPACE, parent.metadata.namespace)
               if (ref := controller_of(r)) is not None and ref.uid == uid]
        return sorted(out, key=lambda r: (r.revision, r.metadata.creationTimestamp.seconds, r.metadata.name))

    async def current(self, parent: Any, api_version: str, kind: str, data: bytes,
                      collision_count: int) -> tuple[apps_pb2.ControllerRevision, int]:
        """The revision holding `data`, made (or renumbered) to be the newest; and the
        collision count it took."""
        owned = self.owned(parent)
        newest = max((r.revision for r in owned), default=0)
        equal = [r for r in owned if r.data.raw == data]
        if equal:
            found = equal[-1]
            if found.revision == newest:
                return found, collision_count
            renumbered = apps_pb2.ControllerRevision()
            renumbered.CopyFrom(found)
            renumbered.revision = newest + 1
            return await self.client.controllerrevisions.update(renumbered), collision_count
        labels = dict(parent.spec.template.metadata.labels)
        while True:
            digest = _hash(data, collision_count)
            labels[CONTROLLER_REVISION_HASH] = digest
            revision = apps_pb2.ControllerRevision(
                metadata=meta_pb2.ObjectMeta(
                    name=f"{parent.metadata.name[:_NAME_PREFIX_MAX]}-{digest}", namespace=parent.metadata.namespace,
                    labels=labels, annotations=dict(parent.metadata.annotations),
                    ownerReferences=[controller_ref(parent, api_version, kind)]),
                data=apps_pb2.RawExtension(raw=data), revision=newest + 1)
            try:
                return await self.client.controllerrevisions.create(revision), collision_count
            except errors.AlreadyExists:
                existing = await self.client.controllerrevisions.get(revision.metadata.name,
                                                                     parent.metadata.namespace)
                ref = controller_of(existing)
                if existing.data.raw == data and ref is not None and ref.uid == parent.metadata.uid:
                    return existing, collision_count
                collision_count += 1  # another template (or parent) has this name: probe on
                log.info("%s %s/%s: revision name %s collides; collisionCount %d", kind, parent.metadata.namespace,
                         parent.metadata.name, revision.metadata.name, collision_count)

    async def truncate(self, parent: Any, live: Iterable[str], limit: int) -> None:
        """Delete the oldest revisions no pod uses (`live`: hashes in use, the current one
        among them) beyond `limit`."""
        keep = set(live)
        spare = [r for r in self.owned(parent) if revision_hash(r) not in keep]
        for revision in spare[:max(0, len(spare) - limit)]:
            try:
                await self.client.controllerrevisions.delete(revision.metadata.name, revision.metadata.namespace,
                                                             uid=revision.metadata.uid)
            except errors.NotFound:
                pass
