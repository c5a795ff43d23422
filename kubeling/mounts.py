"""Mounts as the volume code needs them: bind mounts (read-only too), tmpfs, unmount, and
the mount table (upstream's mount-utils, on mount(2) and /proc/self/mountinfo).

A bind mount of a directory on the same filesystem keeps its device number, so
`os.path.ismount` cannot see it: the mount table is read instead.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

__all__ = ["MountError", "bind", "tmpfs", "unmount", "is_mount_point", "mount_points", "MOUNTINFO"]

MOUNTINFO = Path("/proc/self/mountinfo")
_libc = ctypes.CDLL(None, use_errno=True)
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC = 0x1, 0x20, 0x1000, 0x4000
_MNT_DETACH = 0x2
_EINVAL, _ENOENT = 22, 2
_ESCAPE = re.compile(r"\\([0-7]{3})")


class MountError(OSError):
    """A mount or unmount the kernel refused (the message names the paths)."""


def _call(what: str, result: int) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise MountError(error, f"{what}: {os.strerror(error)}")


def bind(source: Path, target: Path, *, readonly: bool = False) -> None:
    """Bind source at target (target exists); read-only takes a second call, as mount(8) does it."""
    _call(f"bind {source} at {target}",
          _libc.mount(os.fsencode(source), os.fsencode(target), None, _MS_BIND | _MS_REC, None))
    if readonly:
        try:
            _call(f"remount {target} read-only",
                  _libc.mount(None, os.fsencode(target), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None))
        except MountError:
            unmount(target)
            raise


def tmpfs(target: Path, *, size_bytes: int = 0, mode: int = 0o777) -> None:
    """A tmpfs at target, at most size_bytes large (0: the kernel's default, half of RAM)."""
    options = f"mode={mode:o}" + (f",size={size_bytes}" if size_bytes else "")
    _call(f"mount tmpfs at {target}", _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", 0, options.encode()))


def unmount(target: Path, *, lazy: bool = False) -> None:
    """Unmount target; a path that is not a mount point (EINVAL) or is gone (ENOENT) is no error."""
    if _libc.umount2(os.fsencode(target), _MNT_DETACH if lazy else 0) != 0:
        error = ctypes.get_errno()
        if error in (_EINVAL, _ENOENT):
            return
        raise MountError(error, f"unmount {target}: {os.strerror(error)}")


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_points(under: Path | None = None, mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Every mount point (under `under`, itself included), in the order they were mounted."""
    prefix = os.path.realpath(under) if under is not None else None
    out = []
    for line in mountinfo.read_text().splitlines():
        point = _unescape(line.split(" ", 5)[4])
        if prefix is None or point == prefix or point.startswith(prefix.rstrip("/") + "/"):
            out.append(Path(point))
    return out


def is_mount_point(path: Path, mountinfo: Path = MOUNTINFO) -> bool:
    real = Path(os.path.realpath(path))
    return real in mount_points(real, mountinfo)
