"""Periodic compaction of etcd history, as kube-apiserver's compactor.

Every interval, apiservers race on a shared marker key (compare on its version);
the winner compacts to the revision observed at the previous interval, so at least
one interval of history is always kept. The winner then defragments the members whose
file is mostly free space (maintenance.Defragmenter), so etcd's db size stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from apiserver.storage.etcd import Storage
from apiserver.storage.maintenance import Defragmenter
from kubeling.periodic import Periodic

__all__ = ["Compactor"]

log = logging.getLogger(__name__)

MARKER_KEY = b"compact_rev_key"  # upstream's key, shared by every apiserver of one etcd


class Compactor:
    def __init__(self, storage: Storage, interval: float, on_compacted: Callable[[int], None],
                 defragmenter: Defragmenter | None = None,
                 on_defragmented: Callable[[list[str]], None] = lambda members: None) -> None:
        self.storage = storage
        self.on_compacted = on_compacted
        self.defragmenter = defragmenter
        self.on_defragmented = on_defragmented
        self._version = 0
        self._revision = 0
        self._loop = Periodic("compactor", interval, self.tick)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

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
            defragmenting = self.defragmenter is not None
            await self.storage.compact(previous, physical=defragmenting, timeout=60.0 if defragmenting else 0.0)
            log.info("compacted etcd history up to revision %d", previous)
            self.on_compacted(previous)
        if self.defragmenter is not None:
            self.on_defragmented(await self.defragmenter.run())
