"""Bytes and inodes used under a directory (image store, writable layers)."""

from __future__ import annotations

import os
from pathlib import Path


def disk_usage(path: Path) -> tuple[int, int]:
    """Allocated bytes and inodes under path; files vanishing meanwhile are skipped."""
    used = inodes = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            inodes += 1
            try:
                used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return used, inodes
