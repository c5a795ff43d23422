"""A resource's storage codec, from its Strategy: what the storage layer (watch cache,
etcd watches, lists) may know of its objects, and nothing else; and how the registry
writes them. Built-in resources are stored as their protobuf message, resources kept as
JSON (custom resources, CustomResourceDefinitions) as their JSON, as upstream stores them."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Generic

from apiserver.registry.generic.strategy import Strategy, T
from apiserver.storage.encryption import Transformer
from apiserver.storage.etcd import KV
from apiserver.storage.selection import Attrs
from kubeling import errors
from kubeling.kjson import from_json, to_json

__all__ = ["StrategyCodec", "JsonCodec", "codec_for"]


class StrategyCodec(Generic[T]):
    """apiserver.storage.codec.Codec for one resource's protobuf messages."""

    def __init__(self, strategy: Strategy[T]) -> None:
        self._strategy = strategy
        self._message = strategy.message
        self._event = strategy.event_message
        self.resource = strategy.plural
        self.index_field = strategy.index_field
        # encryption at rest (None: stored as it is); the keys whose value, at a revision,
        # was read with an old key or provider: written again on their next update
        self.transformer: Transformer | None = None
        self._stale: dict[bytes, int] = {}

    def replace_strategy(self, strategy: Strategy[T]) -> None:
        self._strategy = strategy

    def plaintext(self, kv: KV) -> bytes:
        if self.transformer is None:
            return kv.value
        data, stale = self.transformer.from_storage(kv.value, kv.key)
        if stale:
            self._stale[kv.key] = kv.mod_revision
        else:
            self._stale.pop(kv.key, None)
        return data

    def stale(self, key: bytes, revision: int) -> bool:
        """Whether the value at key, at revision, must be written again (key rotation)."""
        return self._stale.get(key) == revision

    def decode(self, kv: KV) -> T:
        obj: T = self._message.FromString(self.plaintext(kv))
        obj.metadata.resourceVersion = str(kv.mod_revision)
        return obj

    def serialize(self, obj: T) -> bytes:
        """The object in the current storage format, before encryption (the resourceVersion
        is the caller's to clear)."""
        data: bytes = obj.SerializeToString(deterministic=True)
        return data

    def encode(self, obj: T, key: bytes = b"") -> bytes:
        """The stored value (the resourceVersion is the caller's to clear); encrypted when a
        provider is configured (key: where it goes, which AES-GCM binds it to)."""
        data = self.serialize(obj)
        return self.transformer.to_storage(data, key) if self.transformer is not None else data

    def attrs(self, obj: T) -> Attrs:
        fields = self._strategy.fields(obj)
        idx = self.index_field
        return Attrs(obj.metadata.namespace, dict(obj.metadata.labels), fields, fields.get(idx) if idx else None)

    def event(self, typ: str, obj: Any) -> bytes:
        data: bytes = self._event(type=typ, object=obj).SerializeToString()
        return data

    def new(self) -> T:
        return self._message()


class JsonCodec(StrategyCodec[T]):
    """Objects kept as JSON: etcd holds the whole object (apiVersion, kind, metadata and
    content) as upstream writes it, in the storage version; read back, an object is in the
    version this codec serves (`api_version`: None conversion rewrites apiVersion)."""

    # Parsing JSON into the message is what makes custom resources slower to read than
    # built-in ones (a protobuf parse is native code). A key's value at a revision never
    # changes, so each object is parsed once: the watch cache's decode of an event serves
    # the lists from etcd that follow. Bounded; the oldest entries go first.
    DECODED_MAX = 65_536

    def __init__(self, strategy: Strategy[T], api_version: str, storage_version: str,
                 keep_stored_version: bool = False) -> None:
        super().__init__(strategy)
        self.api_version = api_version
        self.storage_version = storage_version
        # by webhook conversion, an object read keeps the version it was stored in (the
        # converting views convert it); else its apiVersion is rewritten (None conversion)
        self.keep_stored_version = keep_stored_version
        self._decoded: OrderedDict[bytes, tuple[int, bytes]] = OrderedDict()

    def decode(self, kv: KV) -> T:
        hit = self._decoded.get(kv.key)
        if hit is not None and hit[0] == kv.mod_revision:
            cached: T = self._message.FromString(hit[1])
            return cached
        obj = self._parse(kv)
        self._decoded[kv.key] = (kv.mod_revision, obj.SerializeToString())
        self._decoded.move_to_end(kv.key)
        if len(self._decoded) > self.DECODED_MAX:
            self._decoded.popitem(last=False)
        return obj

    def _parse(self, kv: KV) -> T:
        try:
            data = json.loads(self.plaintext(kv))
            obj: Any = from_json(data, self._message, ignore=frozenset()).message
        except (ValueError, errors.ApiError) as err:
            # Not ours to guess at: say which key holds what, rather than serve garbage.
            raise errors.InternalError(f"{self.resource}: the value stored at {kv.key!r} is not a JSON object "
                                       f"of this resource: {err}") from None
        if not self.keep_stored_version or not obj.apiVersion:
            obj.apiVersion = self.api_version
        obj.metadata.resourceVersion = str(kv.mod_revision)
        self._strategy.from_storage(obj)
        return obj

    def serialize(self, obj: T) -> bytes:
        stored: Any = self._message()
        stored.CopyFrom(obj)
        stored.apiVersion = self.storage_version
        return json.dumps(to_json(stored), separators=(",", ":"), ensure_ascii=False).encode()


def codec_for(strategy: Strategy[T]) -> StrategyCodec[T]:
    if not strategy.resource.custom:
        return StrategyCodec(strategy)
    return JsonCodec(strategy, strategy.resource.api_version, strategy.storage_version,
                     keep_stored_version=strategy.stored_versions_vary)
