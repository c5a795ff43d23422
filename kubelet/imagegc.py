"""Image garbage collection (pkg/kubelet/images/image_gc_manager.go): when the image
filesystem is more than `--image-gc-high-threshold` percent used, images no container
uses (running or not) are removed, the least recently used first, until usage is back at
`--image-gc-low-threshold`; images younger than `--image-minimum-gc-age` and the pinned
sandbox image stay. When not enough can be freed, the node gets upstream's
FreeDiskSpaceFailed event."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubelet.runtime import CRICallError, Runtime

__all__ = ["ImageGC"]

log = logging.getLogger(__name__)


@dataclass
class ImageGC:
    runtime: Runtime
    high_percent: int = 85
    low_percent: int = 80
    minimum_age: float = 120.0
    on_failure: Callable[[str], None] = lambda message: None  # the node's FreeDiskSpaceFailed event
    clock: Callable[[], float] = time.monotonic
    _first_seen: dict[str, float] = field(default_factory=dict)  # image id -> when first listed
    _last_used: dict[str, float] = field(default_factory=dict)  # image id -> when last in use

    async def collect(self) -> int:
        """One pass; the bytes freed."""
        images = await self.runtime.list_images()
        in_use: set[str] = set()
        for c in await self.runtime.list_containers():
            in_use.update((c.image_ref, c.image.image))
        now = self.clock()
        for image in images:
            self._first_seen.setdefault(image.id, now)
            if image.id in in_use or in_use.intersection(image.repo_tags):
                self._last_used[image.id] = now
        listed = {i.id for i in images}
        for gone in set(self._first_seen) - listed:
            self._first_seen.pop(gone, None)
            self._last_used.pop(gone, None)
        filesystems = await self.runtime.image_fs_info()
        if not filesystems:
            return 0
        fs = os.statvfs(filesystems[0].fs_id.mountpoint)
        capacity, available = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
        if capacity <= 0 or (capacity - available) * 100 < self.high_percent * capacity:
            return 0
        to_free = capacity * (100 - self.low_percent) // 100 - available
        candidates = [i for i in images if self._last_used.get(i.id) != now and not i.pinned
                      and now - self._first_seen[i.id] >= self.minimum_age]
        candidates.sort(key=lambda i: (self._last_used.get(i.id, self._first_seen[i.id]), i.id))
        freed = 0
        for image in candidates:
            if freed >= to_free:
                break
            try:
                await self.runtime.remove_image(image.id)
            except CRICallError as exc:
                log.warning("image gc: removing %s failed: %s", image.id[:19], exc)
                continue
            log.info("image gc: removed %s (%s, %d bytes)", image.id[:19], ", ".join(image.repo_tags), image.size)
            freed += image.size
        if freed < to_free:
            message = (f"Failed to garbage collect required amount of images. Attempted to free {to_free} bytes, "
                       f"but only found {freed} bytes eligible to free.")
            log.warning("image gc: %s", message)
            self.on_failure(message)
        return freed
