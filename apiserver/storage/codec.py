"""What the storage layer knows of one resource's objects: how to decode a stored value,
what selectors see of an object, and how to encode a watch event. The registry supplies
it (upstream builds its stores with a runtime.Codec, an AttrFunc and a trigger function);
storage never sees a strategy or a registry."""

from __future__ import annotations

from typing import Any, Protocol

from apiserver.storage.etcd import KV
from apiserver.storage.selection import Attrs

__all__ = ["Codec"]


class Codec(Protocol):
    @property
    def resource(self) -> str:
        """The resource's plural, for logs and messages."""
        ...

    @property
    def index_field(self) -> str | None:
        """The field whose exact-match selectors index watchers (None: no index)."""
        ...

    def decode(self, kv: KV) -> Any:
        """The object stored in kv, with its resourceVersion (kv's mod_revision)."""
        ...

    def attrs(self, obj: Any) -> Attrs: ...

    def event(self, typ: str, obj: Any) -> bytes:
        """One watch event, encoded as the API sends it."""
        ...

    def new(self) -> Any:
        """An empty object (a bookmark's carrier)."""
        ...
