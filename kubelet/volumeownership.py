"""A volume's files given to the pod's fsGroup (upstream's pkg/volume/volume_linux.go
SetVolumeOwnership): every file and directory's group becomes fsGroup, files gain group
read (and write, for a writable volume), directories group access and the setgid bit (so
what the pod creates later belongs to the group too). Symlinks are regrouped, not
followed. With fsGroupChangePolicy OnRootMismatch a volume whose root already has the
group and the bits is left alone (large volumes are not walked at every start)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["set_volume_ownership", "ON_ROOT_MISMATCH"]

ON_ROOT_MISMATCH = "OnRootMismatch"
_RW, _RO, _EXEC = 0o660, 0o440, 0o110


def _mask(mode: int, readonly: bool) -> int:
    mask = _RO if readonly else _RW
    if stat.S_ISDIR(mode):
        mask |= stat.S_ISGID | _EXEC
    return mask


def _root_matches(path: Path, gid: int, readonly: bool) -> bool:
    st = os.stat(path)
    mask = _mask(st.st_mode, readonly)
    return st.st_gid == gid and st.st_mode & mask == mask


def set_volume_ownership(path: Path, gid: int, *, readonly: bool = False, policy: str = "Always") -> None:
    if policy == ON_ROOT_MISMATCH and _root_matches(path, gid, readonly):
        return
    for directory, dirs, files in os.walk(path):
        for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            st = os.lstat(name)
            os.lchown(name, -1, gid)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(name, stat.S_IMODE(st.st_mode) | _mask(st.st_mode, readonly))
