"""Short garbage-collection pauses for processes with big, long-lived heaps.

CPython's full (oldest-generation) collection walks every tracked object while the
process holds the GIL: an apiserver caching 5,000 Nodes and Leases with 5,000 watches
stopped its event loop for ~350 ms each time, every ~25 s, and every call in flight waited
(the p99 of each verb, measured by bench.scale). Go's collector, which upstream's
components run on, is concurrent; this is the closest Python comes: after each full
collection its survivors are frozen (`gc.freeze`), so the next one walks only what
survived since — a pause that scales with what is new, not with the heap.

Objects frozen are still freed when their last reference goes; only garbage *cycles* among
them wait, until the next thaw: every `thaw_every` seconds the frozen objects go back to
the oldest generation and the next full collection (one long pause) walks them all.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FreezeAfterFull", "DEFAULT_THAW_SECONDS"]

DEFAULT_THAW_SECONDS = 600.0
_OLDEST = 2


@dataclass
class FreezeAfterFull:
    thaw_every: float = DEFAULT_THAW_SECONDS
    clock: Callable[[], float] = time.monotonic
    full_collections: int = 0
    thaws: int = 0
    _thawed_at: float = field(default=0.0, init=False)
    _installed: bool = field(default=False, init=False)

    def install(self) -> FreezeAfterFull:
        if not self._installed:
            self._thawed_at = self.clock()
            gc.callbacks.append(self._after)
            self._installed = True
        return self

    def uninstall(self) -> None:
        """Stop freezing, and give back what is frozen to the collector."""
        if self._installed:
            gc.callbacks.remove(self._after)
            self._installed = False
            gc.unfreeze()

    def _after(self, phase: str, info: dict[str, Any]) -> None:
        # Called by the collector in whatever thread triggered it, with the GIL held; the
        # generations' lists are whole again at "stop".
        if phase != "stop" or info.get("generation") != _OLDEST:
            return
        self.full_collections += 1
        now = self.clock()
        if now - self._thawed_at >= self.thaw_every:
            self._thawed_at = now
            self.thaws += 1
            gc.unfreeze()  # the next full collection walks everything, cycles among old objects included
        else:
            gc.freeze()
