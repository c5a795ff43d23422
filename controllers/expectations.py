"""Controller expectations, as upstream's pkg/controller (ControllerExpectations with UID
tracking): after a controller asks for N pods to be made or deleted it does not act on
that controller again until its informer has seen them (or the expectations expire),
so that a slow watch never makes it create twice."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["Expectations", "EXPECTATIONS_TIMEOUT"]

EXPECTATIONS_TIMEOUT = 300.0  # upstream's ExpectationsTimeout: 5 minutes


@dataclass
class _Expected:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)  # pod keys whose deletion is awaited
    at: float = field(default_factory=time.monotonic)


@dataclass
class Expectations:
    _by_key: dict[str, _Expected] = field(default_factory=dict)

    def satisfied(self, key: str) -> bool:
        """True when nothing is awaited for the controller `key` (or it waited too long)."""
        e = self._by_key.get(key)
        if e is None:
            return True
        if e.adds <= 0 and not e.deletes:
            return True
        return time.monotonic() - e.at > EXPECTATIONS_TIMEOUT

    def expect_creations(self, key: str, count: int) -> None:
        e = self._by_key.setdefault(key, _Expected())
        e.adds, e.at = count, time.monotonic()

    def expect_deletions(self, key: str, pod_keys: list[str]) -> None:
        e = self._by_key.setdefault(key, _Expected())
        e.deletes, e.at = set(pod_keys), time.monotonic()

    def creation_observed(self, key: str) -> None:
        e = self._by_key.get(key)
        if e is not None:
            e.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        e = self._by_key.get(key)
        if e is not None:
            e.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)
