"""Exec and attach over SPDY or WebSocket, as upstream's
kubelet/pkg/cri/streaming/remotecommand serves them.

SPDY: the client opens one stream per standard stream it wants, plus `error` (and
`resize` with a TTY from v3 on), each named by its `streamtype` header; the server
waits for all of them before it starts the command. WebSocket: fixed channels 0
stdin, 1 stdout, 2 stderr, 3 error, 4 resize. When the command ends, the error
stream carries a Status: from v4 on a JSON metav1.Status (NonZeroExitCode with the
ExitCode cause for a non-zero exit), before v4 a text message on failure only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cri.streaming.runtime import ExecError, InputStream, OutputStream, StreamingRuntime, Streams, TerminalSize
from cri.streaming.spdy import SpdySession, SpdyStream
from cri.streaming.websocket import ChannelConnection

log = logging.getLogger(__name__)

# What the server speaks over SPDY, in its order of preference (X-Stream-Protocol-Version).
SPDY_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io",
                  "channel.k8s.io")
WEBSOCKET_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io", "channel.k8s.io",
                       "base64.channel.k8s.io")
STREAM_TYPE = "streamtype"
STDIN, STDOUT, STDERR, ERROR, RESIZE = "stdin", "stdout", "stderr", "error", "resize"
STDIN_CHANNEL, STDOUT_CHANNEL, STDERR_CHANNEL, ERROR_CHANNEL, RESIZE_CHANNEL = range(5)
NON_ZERO_EXIT_CODE, EXIT_CODE_CAUSE = "NonZeroExitCode", "ExitCode"

Status = dict[str, Any]


@dataclass(frozen=True)
class Options:
    """Which streams the client asked for (the CRI request's flags); a TTY merges stderr
    into stdout, so stderr is dropped then, as upstream."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def of(cls, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Options:
        return cls(stdin, stdout, stderr and not tty, tty)


def success_status() -> Status:
    return {"metadata": {}, "status": "Success"}


def exit_code_status(cmd: list[str], code: int) -> Status:
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[{' '.join(cmd)}], exit code {code}",
            "reason": NON_ZERO_EXIT_CODE, "details": {"causes": [{"reason": EXIT_CODE_CAUSE, "message": str(code)}]}}


def internal_error_status(message: str) -> Status:
    return {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
            "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}


def _versioned(protocol: str) -> bool:
    """v4 and later carry the Status as JSON; earlier ones a text message on failure."""
    return protocol.startswith(("v4.", "v5."))


async def _write_status(stream: OutputStream, protocol: str, status: Status) -> None:
    if _versioned(protocol):
        data = json.dumps(status, separators=(",", ":")).encode()
    elif status["status"] != "Success":
        data = status["message"].encode()
    else:
        return
    await stream.write(data)


async def read_resizes(stream: InputStream, queue: asyncio.Queue[TerminalSize | None]) -> None:
    """Decode the resize stream's JSON values ({"Width":w,"Height":h}) into the queue;
    None when the stream ends or stops making sense."""
    decoder = json.JSONDecoder()
    buffer = ""
    try:
        while data := await stream.read():
            buffer += data.decode(errors="replace")
            while True:
                buffer = buffer.lstrip()
                if not buffer:
                    break
                try:
                    value, end = decoder.raw_decode(buffer)
                except ValueError:
                    break  # an incomplete value: wait for more
                buffer = buffer[end:]
                if isinstance(value, dict):
                    try:
                        width, height = int(value.get("Width", 0)), int(value.get("Height", 0))
                    except (TypeError, ValueError):
                        continue
                    if 0 <= width <= 0xFFFF and 0 <= height <= 0xFFFF:
                        await queue.put(TerminalSize(width, height))
    finally:
        await queue.put(None)


@dataclass
class Connection:
    """A client's streams, ready for the command, and how to answer and hang up."""

    streams: Streams
    write_status: Callable[[Status], Awaitable[None]]
    hang_up: Callable[[], Awaitable[None]]
    gone: asyncio.Event  # the connection to the client is lost
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


# ---- SPDY ----

def validate_spdy_stream(stream: SpdyStream) -> str | None:
    kind = stream.header(STREAM_TYPE)
    if kind not in (STDIN, STDOUT, STDERR, ERROR, RESIZE):
        return f"unexpected stream type {kind!r}"
    return None


async def spdy_connection(session: SpdySession, protocol: str, options: Options,
                          creation_timeout: float) -> Connection | None:
    """Wait for every stream the options call for; None if the client does not open them in time."""
    expected = {ERROR}
    if options.stdin:
        expected.add(STDIN)
    if options.stdout:
        expected.add(STDOUT)
    if options.stderr:
        expected.add(STDERR)
    if options.tty and protocol not in ("v2.channel.k8s.io", "channel.k8s.io"):
        expected.add(RESIZE)
    got: dict[str, SpdyStream] = {}

    async def collect() -> None:
        while not expected <= got.keys():
            stream = await session.streams.get()
            got[stream.header(STREAM_TYPE)] = stream

    try:
        async with asyncio.timeout(creation_timeout):
            await collect()
    except asyncio.TimeoutError:
        log.warning("%s: timed out waiting for client to create streams (have %s, want %s)", session.name,
                    sorted(got), sorted(expected))
        return None
    if protocol == "channel.k8s.io" and STDIN in got:
        await got[STDIN].reset()  # v1 closes stdin at once: it cannot tell when stdin ends

    async def write_status(status: Status) -> None:
        await _write_status(got[ERROR], protocol, status)
        await got[ERROR].close()

    async def hang_up() -> None:
        for stream in got.values():
            await stream.close()
        await session.close()

    connection = Connection(Streams(stdin=got.get(STDIN), stdout=got.get(STDOUT), stderr=got.get(STDERR),
                                    tty=options.tty), write_status, hang_up, session.closed)
    if RESIZE in got:
        connection.streams.resize = asyncio.Queue()
        connection.tasks.append(asyncio.create_task(read_resizes(got[RESIZE], connection.streams.resize)))
    return connection


# ---- WebSocket ----

async def websocket_connection(channels: ChannelConnection, options: Options) -> Connection:
    ch = channels.channels
    # An empty message on the lowest writable channel tells the client the streams are up.
    first = STDOUT_CHANNEL if options.stdout else STDERR_CHANNEL if options.stderr else ERROR_CHANNEL
    await channels.write(first, b"")
    protocol = channels.protocol

    async def write_status(status: Status) -> None:
        await _write_status(ch[ERROR_CHANNEL], protocol, status)

    async def hang_up() -> None:
        await channels.ws.close()

    connection = Connection(Streams(stdin=ch[STDIN_CHANNEL] if options.stdin else None,
                                    stdout=ch[STDOUT_CHANNEL] if options.stdout else None,
                                    stderr=ch[STDERR_CHANNEL] if options.stderr else None, tty=options.tty),
                            write_status, hang_up, channels.ws.closed)
    if options.tty:
        connection.streams.resize = asyncio.Queue()
        connection.tasks.append(asyncio.create_task(read_resizes(ch[RESIZE_CHANNEL], connection.streams.resize)))
    return connection


# ---- serving ----

async def _finish(connection: Connection, status: Status) -> None:
    try:
        for out in (connection.streams.stdout, connection.streams.stderr):
            if out is not None:
                await out.close()
        await connection.write_status(status)
    except (ConnectionError, OSError, RuntimeError) as exc:
        log.debug("the client left before the status: %s", exc)
    finally:
        for task in connection.tasks:
            task.cancel()
        await asyncio.gather(*connection.tasks, return_exceptions=True)
        await connection.hang_up()


async def _until_gone(connection: Connection, work: Awaitable[Any]) -> tuple[bool, Any]:
    """Run work unless the client goes first (then cancel it: an exec'd process is killed)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(connection.gone.wait())
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, gone, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def _abandon(connection: Connection) -> None:
    for task in connection.tasks:
        task.cancel()
    await asyncio.gather(*connection.tasks, return_exceptions=True)
    await connection.hang_up()


async def serve_exec(connection: Connection, runtime: StreamingRuntime, container_id: str, cmd: list[str]) -> None:
    try:
        finished, code = await _until_gone(connection, runtime.exec(container_id, cmd, connection.streams))
    except ExecError as exc:
        log.warning("exec %s in container %s: %s", cmd, container_id[:13], exc)
        await _finish(connection, internal_error_status(f"error executing command in container: {exc}"))
        return
    if not finished:
        log.info("exec %s in container %s: the client left; the command was killed", cmd, container_id[:13])
        await _abandon(connection)
        return
    await _finish(connection, success_status() if code == 0 else exit_code_status(cmd, code))


async def serve_attach(connection: Connection, runtime: StreamingRuntime, container_id: str) -> None:
    try:
        finished, _ = await _until_gone(connection, runtime.attach(container_id, connection.streams))
    except ExecError as exc:
        log.warning("attach to container %s: %s", container_id[:13], exc)
        await _finish(connection, internal_error_status(f"error attaching to container: {exc}"))
        return
    if not finished:
        await _abandon(connection)
        return
    await _finish(connection, success_status())
