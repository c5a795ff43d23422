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


def _mount(target: Path, options: str) -> None:
    if _libc.mount(b"overlay", os.fsencode(target), b"overlay", 0, options.encode()) != 0:
        error = ctypes.get_errno()
        raise MountError(f"mount overlay at {target}: {os.strerror(error)} ({options})")


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
    lowerdir = ":".join(str(p) for p in reversed(layers))  # overlay lists the top layer first
    await asyncio.to_thread(_mount, rootfs, f"lowerdir={lowerdir},upperdir={upper},workdir={work}")
    return rootfs


async def unmount(directory: Path) -> None:
    """Unmount directory/rootfs if mounted (idempotent)."""
    rootfs = directory / "rootfs"
    if rootfs.exists() and is_mounted(rootfs):
        await asyncio.to_thread(_umount, rootfs)
