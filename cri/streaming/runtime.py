"""What the streaming server asks of the runtime, and the streams it hands over
(upstream's streaming.Runtime: Exec, Attach, PortForward)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol


class InputStream(Protocol):
    async def read(self) -> bytes:
        """The next chunk; b"" once the client closed the stream."""
        ...


class OutputStream(Protocol):
    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class DuplexStream(InputStream, OutputStream, Protocol):
    pass


@dataclass(frozen=True)
class TerminalSize:
    width: int
    height: int


@dataclass
class Streams:
    """The client's side of an exec or attach: only the streams it asked for are set.
    `resize` yields terminal sizes, then None when the client stops sending them."""

    stdin: InputStream | None
    stdout: OutputStream | None
    stderr: OutputStream | None
    tty: bool
    resize: asyncio.Queue[TerminalSize | None] | None = None


class ExecError(Exception):
    """The command could not be run at all (not a non-zero exit): an internal error."""


class StreamingRuntime(Protocol):
    async def exec(self, container_id: str, cmd: list[str], streams: Streams) -> int:
        """Run cmd in the container wired to the streams; its exit code."""
        ...

    async def attach(self, container_id: str, streams: Streams) -> None:
        """Wire the streams to the container's own stdio until it exits or the client leaves."""
        ...

    async def port_forward(self, sandbox_id: str, port: int, stream: DuplexStream) -> None:
        """Copy between the stream and a TCP connection to port in the pod's network namespace;
        raise OSError when the connection cannot be made or breaks."""
        ...
