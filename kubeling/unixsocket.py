"""A unix socket's path as a gRPC address. A socket address holds at most 107 bytes of path
(sun_path), and deep state directories (a test's, a user's) pass that; a longer path is
reached through /proc/self/fd/N/<name>, N a descriptor of its directory held open while the
address is in use (bind and every connect resolve the directory through it)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SocketAddress", "MAX_PATH"]

MAX_PATH = 100  # what fits sun_path (108 bytes with its NUL) with room to spare


class SocketAddress:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(str(path).removeprefix("unix://"))
        self._fd: int | None = None

    def target(self) -> str:
        """`unix://...` for grpc.aio's server.add_insecure_port and insecure_channel."""
        if len(os.fsencode(self.path)) <= MAX_PATH:
            return f"unix://{self.path}"
        if self._fd is None:
            self._fd = os.open(self.path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"unix:///proc/self/fd/{self._fd}/{self.path.name}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
