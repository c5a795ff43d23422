"""Overlay root filesystems: image layers (read-only, shared) under a per-container upper dir."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


class MountError(RuntimeError):
    pass


def is_mounted(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo") as mountinfo:
        return any(line.split()[4] == target for line in mountinfo)


async def _run(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise MountError(f"{' '.join(args[:2])} ... {args[-1]}: {err.decode(errors='replace').strip()}")


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
    await _run("mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={lowerdir},upperdir={upper},workdir={work}", str(rootfs))
    return rootfs


async def unmount(directory: Path) -> None:
    """Unmount directory/rootfs if mounted (idempotent)."""
    rootfs = directory / "rootfs"
    if rootfs.exists() and is_mounted(rootfs):
        await _run("umount", str(rootfs))
