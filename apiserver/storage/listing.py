"""Lists read from etcd: pages at one revision, filtered by selectors, continued by an
opaque token (upstream's storage/etcd3 GetList with its continue keys)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from typing import Any

from apiserver.storage.codec import Codec
from apiserver.storage.etcd import Compacted, Storage, prefix_end
from apiserver.storage.selection import Filter
from kubeling import errors
from protos.kubeling.v1 import meta_pb2

__all__ = ["list_objects"]

_DECODES_PER_TURN = 100


async def list_objects(storage: Storage, codec: Codec, prefix: bytes, flt: Filter, limit: int,
                       token: str) -> tuple[list[Any], meta_pb2.ListMeta]:
    """One page (`limit` items, 0: all) of the objects under prefix that flt selects, read
    from etcd at one revision (the continue token's, or the current one), and the ListMeta
    that leads to the next page."""
    base = prefix + (f"{flt.namespace}/".encode() if flt.namespace else b"")
    end = prefix_end(base)
    revision, start = 0, base
    if token:
        revision, start = _decode_continue(token)
        if not start.startswith(base):
            raise errors.BadRequest("continue token does not belong to this list")
        revision = max(revision, 0)  # -1: go on at the latest revision (an inconsistent continue)
    selective = not (flt.labels.empty() and flt.fields.empty())
    items: list[Any] = []
    page = limit if limit > 0 else 0
    remaining: int | None = None
    next_key: bytes | None = None
    while True:
        try:
            kvs, header, more, count = await storage.range(start, end, revision=revision, limit=page)
        except Compacted:
            # upstream's handleCompactedErrorForPaging: 410, and a token that goes on from
            # the same key at the latest revision, for a client that accepts an
            # inconsistent list
            raise errors.Expired(_INCONSISTENT_CONTINUE, metadata={
                "continue": _encode_continue(-1, start)}) from None
        revision = revision or header
        for i, kv in enumerate(kvs):
            if i and not i % _DECODES_PER_TURN:
                # thousands of objects decode for tens of milliseconds: give the event loop
                # back in between, or every other request waits for the whole list
                await asyncio.sleep(0)
            if kv.key == prefix:
                continue  # the watch cache's progress sentinel, not an object
            obj = codec.decode(kv)
            if flt.matches(codec.attrs(obj)):
                items.append(obj)
            if limit and len(items) == limit:
                if i + 1 < len(kvs) or more:
                    next_key = kv.key + b"\0"
                    if not selective:
                        remaining = count - (i + 1)
                break
        if next_key is not None or (limit and len(items) == limit) or not more or not kvs:
            break
        start = kvs[-1].key + b"\0"
        page = min(page * 2, 10_000) if page else 0  # selective lists read on in bigger pages
    meta = meta_pb2.ListMeta(resourceVersion=str(revision))
    if next_key is not None:
        setattr(meta, "continue", _encode_continue(revision, next_key))
        if remaining is not None:
            meta.remainingItemCount = remaining
    return items, meta


_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


def _encode_continue(revision: int, start: bytes) -> str:
    raw = json.dumps({"v": "kubeling/v1", "rv": revision, "start": start.decode("utf-8", "surrogateescape")})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, bytes]:
    try:
        data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token.encode()))
        if data.get("v") != "kubeling/v1":
            raise ValueError("unknown version")
        rv = int(data["rv"])
        start = str(data["start"]).encode("utf-8", "surrogateescape")
    except (ValueError, KeyError, TypeError, binascii.Error, json.JSONDecodeError):
        raise errors.BadRequest("continue: invalid value: the continue token is not valid") from None
    if rv <= 0 and rv != -1:
        raise errors.BadRequest("continue: invalid value: the continue token has no resource version")
    return rv, start
