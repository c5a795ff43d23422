"""Container log rotation (pkg/kubelet/logs/container_log_manager.go): a running
container's log file larger than `containerLogMaxSize` is renamed to
`<log>.<YYYYMMDD-HHMMSS>` and the runtime told to reopen it (CRI ReopenContainerLog);
at most `containerLogMaxFiles` files are kept per container (the live one included),
the oldest rotated ones removed, and the rotated ones but the latest gzip-compressed,
as upstream's. `kubectl logs` reads the live file."""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubelet.runtime import RUNNING, CRICallError, Runtime

__all__ = ["ContainerLogManager"]

log = logging.getLogger(__name__)


def _rotated(path: Path) -> list[Path]:
    """The rotated files of a log, oldest first (their timestamps sort)."""
    return sorted(p for p in path.parent.glob(f"{path.name}.*") if not p.name.endswith(".tmp"))


def _compress(path: Path) -> None:
    target = path.with_name(path.name + ".gz")
    tmp = target.with_name(target.name + ".tmp")
    with open(path, "rb") as source, gzip.open(tmp, "wb") as sink:
        shutil.copyfileobj(source, sink)
    os.replace(tmp, target)
    path.unlink()


@dataclass
class ContainerLogManager:
    runtime: Runtime
    max_size: int = 10 * 1024 * 1024
    max_files: int = 5
    clock: Callable[[], float] = time.time

    async def rotate_all(self) -> None:
        for container in await self.runtime.list_containers():
            if container.state != RUNNING:
                continue
            try:
                status = await self.runtime.container_status(container.id)
            except CRICallError:
                continue  # gone meanwhile
            if status.log_path:
                await self.rotate(container.id, Path(status.log_path))

    async def rotate(self, container_id: str, path: Path) -> bool:
        """Rotate the log when it has outgrown max_size; True when it was."""
        try:
            if path.stat().st_size < self.max_size:
                return False
        except FileNotFoundError:
            return False
        await asyncio.to_thread(self._make_room, path)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.clock()))
        rotated = path.with_name(f"{path.name}.{stamp}")
        if rotated.exists() or rotated.with_name(rotated.name + ".gz").exists():
            return False  # rotated this very second: the next pass does it
        path.rename(rotated)
        try:
            await self.runtime.reopen_container_log(container_id)
        except CRICallError as exc:
            # the runtime writes on into the renamed file: give it its name back, as upstream
            log.warning("container %s: log not reopened, rotation undone: %s", container_id[:13], exc)
            rotated.rename(path)
            return False
        log.info("container %s: log rotated to %s", container_id[:13], rotated.name)
        return True

    def _make_room(self, path: Path) -> None:
        """Before one more rotated file: keep max_files - 2 rotated ones, and compress all
        but the newest (it may still be read)."""
        for stale in path.parent.glob(f"{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)
        rotated = _rotated(path)
        for old in rotated[:max(0, len(rotated) - max(0, self.max_files - 2))]:
            old.unlink(missing_ok=True)
        rotated = _rotated(path)
        for older in rotated[:-1]:
            if not older.name.endswith(".gz"):
                _compress(older)
