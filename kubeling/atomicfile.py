"""Files replaced whole: written under a temporary name in the same directory, then
renamed over the old one, so a crash leaves the old content or the new, never half.

The temporary name is this process's and a counter's (no random names, no retries: it
runs several times per pod start), and the directory is only created when the write
finds it missing. `durable` adds an fsync before the rename, for what must survive a
reboot (the image store); state that does not outlive the machine's processes
(checkpoints of runc state on tmpfs, CNI results, exit files) goes without."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

__all__ = ["replace_file"]

_sequence = itertools.count()


def replace_file(path: Path, data: bytes, mode: int = 0o600, *, durable: bool = False) -> None:
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
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.chmod(tmp, mode)  # as asked, whatever the umask took away
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
