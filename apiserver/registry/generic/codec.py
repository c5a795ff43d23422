"""A resource's storage codec, from its Strategy: what the storage layer (watch cache,
etcd watches, lists) may know of its objects, and nothing else."""

from __future__ import annotations

from typing import Any, Generic

from apiserver.registry.generic.strategy import Strategy, T
from apiserver.storage.etcd import KV
from apiserver.storage.selection import Attrs

__all__ = ["StrategyCodec"]


class StrategyCodec(Generic[T]):
    """apiserver.storage.codec.Codec for one resource's protobuf messages."""

    def __init__(self, strategy: Strategy[T]) -> None:
        self._strategy = strategy
        self._message = strategy.message
        self._event = strategy.event_message
        self.resource = strategy.plural
        self.index_field = strategy.index_field

    def decode(self, kv: KV) -> T:
        obj: T = self._message.FromString(kv.value)
        obj.metadata.resourceVersion = str(kv.mod_revision)
        return obj

    def attrs(self, obj: T) -> Attrs:
        fields = self._strategy.fields(obj)
        idx = self.index_field
        return Attrs(obj.metadata.namespace, dict(obj.metadata.labels), fields, fields.get(idx) if idx else None)

    def event(self, typ: str, obj: Any) -> bytes:
        data: bytes = self._event(type=typ, object=obj).SerializeToString()
        return data

    def new(self) -> T:
        return self._message()
