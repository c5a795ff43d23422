"""Single-use tokens for streaming URLs (upstream's requestCache): Exec, Attach and
PortForward store their request under a fresh random token; the URL consumes it once.
Unused tokens expire after a minute; at most 1000 are outstanding, and only
expired ones are dropped to make room."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from protos.runtime.v1 import api_pb2

CACHE_TTL = 60.0
MAX_IN_FLIGHT = 1000
# 128 random bits: the server has no other authentication (upstream uses 48).
TOKEN_BYTES = 16

CachedRequest = api_pb2.ExecRequest | api_pb2.AttachRequest | api_pb2.PortForwardRequest


class CacheFull(Exception):
    """Too many tokens are outstanding (gRPC RESOURCE_EXHAUSTED, HTTP 429)."""


@dataclass
class RequestCache:
    ttl: float = CACHE_TTL
    max_in_flight: int = MAX_IN_FLIGHT
    clock: Callable[[], float] = time.monotonic
    # token -> (expiry, request), oldest first
    _entries: OrderedDict[str, tuple[float, CachedRequest]] = field(default_factory=OrderedDict)

    def __len__(self) -> int:
        return len(self._entries)

    def _gc(self) -> None:
        now = self.clock()
        while self._entries:
            token, (expiry, _) = next(iter(self._entries.items()))
            if expiry > now:
                return
            del self._entries[token]

    def insert(self, request: CachedRequest) -> str:
        self._gc()
        if len(self._entries) >= self.max_in_flight:
            raise CacheFull("maximum number of in-flight requests exceeded")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._entries[token] = (self.clock() + self.ttl, request)
        return token

    def consume(self, token: str) -> CachedRequest | None:
        """The request stored under token, once; None when unknown, used or expired."""
        entry = self._entries.pop(token, None)
        if entry is None or entry[0] <= self.clock():
            return None
        return entry[1]
