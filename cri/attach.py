"""Attach, the CRI server's side: connect to the container's shim (attach_hub.py) and
wire the client's streams to it."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from pathlib import Path

from cri.attach_hub import ATTACH_SOCKET, HEADER, RESIZE, STDERR, STDIN, STDIN_CLOSE, STDOUT, frame
from cri.console import connect_unix
from cri.streaming.runtime import ExecError, Streams

log = logging.getLogger(__name__)


async def attach(state: Path, streams: Streams) -> None:
    """Wire the client's streams to the container's stdio until the container exits
    (the shim hangs up) or the caller is cancelled (the client left)."""
    try:
        sock = connect_unix(state, ATTACH_SOCKET)
    except OSError as exc:
        raise ExecError(f"the container's shim does not answer on {state / ATTACH_SOCKET}: {exc}") from None
    sock.setblocking(False)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    hello = {"stdin": streams.stdin is not None, "stdout": streams.stdout is not None,
             "stderr": streams.stderr is not None}
    lock = asyncio.Lock()

    async def send(data: bytes) -> None:
        async with lock:
            writer.write(data)
            await writer.drain()

    async def pump_stdin() -> None:
        assert streams.stdin is not None
        while data := await streams.stdin.read():
            await send(frame(STDIN, data))
        await send(frame(STDIN_CLOSE))

    async def pump_resize() -> None:
        assert streams.resize is not None
        while (size := await streams.resize.get()) is not None:
            await send(frame(RESIZE, struct.pack(">HH", size.width, size.height)))

    async def pump_output() -> None:
        while True:
            try:
                kind, length = HEADER.unpack(await reader.readexactly(HEADER.size))
                payload = await reader.readexactly(length)
            except asyncio.IncompleteReadError:
                return  # the container exited
            target = streams.stdout if kind == STDOUT else streams.stderr if kind == STDERR else None
            if target is not None:
                await target.write(payload)

    helpers: list[asyncio.Task[None]] = []
    try:
        await send(json.dumps(hello).encode() + b"\n")
        if streams.stdin is not None:
            helpers.append(asyncio.create_task(pump_stdin()))
        if streams.resize is not None:
            helpers.append(asyncio.create_task(pump_resize()))
        await pump_output()
    except (ConnectionError, OSError) as exc:
        log.debug("attach session ended: %s", exc)
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        writer.close()
