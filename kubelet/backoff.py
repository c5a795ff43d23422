"""CrashLoopBackOff's clock: client-go's flowcontrol.Backoff as the kubelet uses it.

Each container (pod UID + name + spec hash) has a delay that starts at 10 s and
doubles up to 5 min; a container is in back-off while less than its delay has passed
since it last exited. An entry untouched for twice the maximum (10 min: the
container ran that long) starts again from the initial delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass
class _Entry:
    delay: float
    last_update: float


@dataclass
class Backoff:
    initial: float = 10.0
    maximum: float = 300.0
    clock: Callable[[], float] = time.time
    _entries: dict[str, _Entry] = field(default_factory=dict)

    def _expired(self, entry: _Entry, now: float) -> bool:
        return now - entry.last_update > 2 * self.maximum

    def next(self, key: str, event_time: float | None = None) -> float:
        """Record a restart of `key` at `event_time`; return its new delay."""
        now = self.clock() if event_time is None else event_time
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, now):
            entry = self._entries[key] = _Entry(self.initial, now)
        else:
            entry.delay = min(entry.delay * 2, self.maximum)
            entry.last_update = now
        return entry.delay

    def remaining(self, key: str, since: float) -> float:
        """Seconds still to wait before restarting `key`, whose last run ended at `since` (0: go)."""
        entry = self._entries.get(key)
        if entry is None:
            return 0.0
        now = self.clock()
        if self._expired(entry, now):
            return 0.0
        return max(0.0, since + entry.delay - now)

    def left(self, key: str) -> float:
        """Seconds left of the delay counted from the last recorded restart (0: go)."""
        entry = self._entries.get(key)
        return self.remaining(key, entry.last_update) if entry is not None else 0.0

    def delay(self, key: str) -> float:
        entry = self._entries.get(key)
        return entry.delay if entry else 0.0

    def forget(self, prefix: str) -> None:
        for key in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[key]

    def gc(self) -> None:
        now = self.clock()
        for key in [k for k, e in self._entries.items() if self._expired(e, now)]:
            del self._entries[key]
