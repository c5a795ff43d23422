"""Overlay root filesystems: image layers (read-only, shared) under a per-container upper dir."""

from __future__ import annotations

import asyncio
import ctypes
import os
from pathlib import Path

# mount(2) and umount2(2) directly: exec'ing mount(8) costs a few ms per container.
_libc = ctypes.CDLL(None, use_errno=True)


class MountError(RuntimeError):
    pass


def is_mounted(path: Path) -> bool:
    """Whether an overlay (or any other filesystem) is mounted at path: its device differs
    from its parent's. Two stats, where scanning mountinfo grew with every container."""
    return os.path.ismount(path)


def _mount(target: Path, lower: list[Path], upper: Path, work: Path) -> None:
    """The directories go in as /proc/self/fd/N of descriptors held for the call: the
    kernel resolves them at mount time, and /proc/self/mountinfo shows the short strings
    as given. Every runc call reads mountinfo (several times), and with a hundred pods
    the overlays' long layer, upper and work paths made most of what it read."""
    fds: list[int] = []
    try:
        for directory in (*lower, upper, work):
            fds.append(os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        *lower_fds, upper_fd, work_fd = fds
        options = (f"lowerdir={':'.join(f'/proc/self/fd/{fd}' for fd in lower_fds)},"
                   f"upperdir=/proc/self/fd/{upper_fd},workdir=/proc/self/fd/{work_fd}")
        if _libc.mount(b"overlay", os.fsencode(target), b"overlay", 0, options.encode()) != 0:
            error = ctypes.get_errno()
            raise MountError(f"mount overlay at {target}: {os.strerror(error)} "
                             f"(lowerdir={':'.join(map(str, lower))},upperdir={upper},workdir={work})")
    except FileNotFoundError as exc:
        raise MountError(f"mount overlay at {target}: {exc}") from exc
    finally:
        for fd in fds:
            os.close(fd)


def _umount(target: Path) -> None:
    if _libc.umount2(os.fsencode(target), 0) != 0:
        error = ctypes.get_errno()
        raise MountError(f"umount {target}: {os.strerror(error)}")


async def mount_overlay(layers: list[Path], directory: Path) -> Path:
    """Mount layers (bottom first) at directory/rootfs with directory/upper as the
    writable layer; return the rootfs path. Mounting again is a no-op."""
    rootfs, upper, work = directory / "rootfs", directory / "upper", directory / "work"
    for d in (rootfs, upper, work):
        d.mkdir(parents=True, exist_ok=True)
    if is_mounted(rootfs):
        return rootfs
    if not layers:
        raise MountError("an image needs at least one layer")
    await asyncio.to_thread(_mount, rootfs, list(reversed(layers)), upper, work)  # overlay lists the top layer first
    return rootfs


async def unmount(directory: Path) -> None:
    """Unmount directory/rootfs if mounted (idempotent)."""
    rootfs = directory / "rootfs"
    if rootfs.exists() and is_mounted(rootfs):
        await asyncio.to_thread(_umount, rootfs)
