"""Files replaced whole: written under a temporary name in the same directory, then
renamed over the old one, so a crash leaves the old content or the new, never half.

Cheaper than tempfile.mkstemp where it runs per pod start (checkpoints, CNI results):
the temporary name is this process's and a counter's (no random names, no retries),
and the directory is only created when the write finds it missing. No fsync: these
files describe state (runc's on tmpfs, processes) that does not survive a reboot either."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

__all__ = ["replace_file"]

_sequence = itertools.count()


def replace_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_sequence)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
