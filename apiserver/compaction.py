"""Periodic compaction of etcd history, as kube-apiserver's compactor.

Every interval, apiservers race on a shared marker key (compare on its version);
the winner compacts to the revision observed at the previous interval, so at least
one interval of history is always kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from apiserver.storage.etcd import Storage

__all__ = ["Compactor"]

log = logging.getLogger(__name__)

MARKER_KEY = b"compact_rev_key"  # upstream's key, shared by every apiserver of one etcd


class Compactor:
    def __init__(self, storage: Storage, interval: float, on_compacted: Callable[[int], None]) -> None:
        self.storage = storage
        self.interval = interval
        self.on_compacted = on_compacted
        self._version = 0
        self._revision = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval > 0:
            self._task = asyncio.create_task(self._loop(), name="compactor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("compaction failed: %s", err)

    async def tick(self) -> None:
        previous = self._revision
        current = await self.storage.revision()
        won, kv = await self.storage.put_if_version(MARKER_KEY, str(current).encode(), self._version)
        if not won:
            # Another apiserver compacted this round; follow its marker.
            self._version = 0 if kv is None else kv.version
            self._revision = current
            return
        self._version += 1
        self._revision = current
        if previous:
            await self.storage.compact(previous)
            log.info("compacted etcd history up to revision %d", previous)
            self.on_compacted(previous)
