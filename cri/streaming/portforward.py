"""Port-forward over SPDY, over WebSocket channels, and over SPDY tunnelled in a
WebSocket, as upstream's kubelet/pkg/cri/streaming/portforward serves it.

SPDY (`portforward.k8s.io`): for every local connection the client opens an `error`
and a `data` stream carrying the same `port` and `requestid` headers; each complete
pair becomes one TCP connection to that port in the pod. A failure is reported on
the pair's error stream, and the connection serves other pairs on.

WebSocket (`v4.channel.k8s.io`): two channels per port (data 2i, error 2i+1), each
opened by the server with the port as 2 little-endian bytes; one TCP connection per
port for the life of the WebSocket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from cri.streaming.runtime import StreamingRuntime
from cri.streaming.spdy import SpdySession, SpdyStream, StreamError
from cri.streaming.websocket import ChannelConnection

log = logging.getLogger(__name__)

PROTOCOL = "portforward.k8s.io"
WEBSOCKET_PROTOCOLS = ("v4.channel.k8s.io", "v4.base64.channel.k8s.io")
TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
PORT_HEADER, REQUEST_ID_HEADER, STREAM_TYPE = "port", "requestid", "streamtype"
DATA, ERROR = "data", "error"


def parse_port(value: str) -> int:
    """A port as the client sends it (header or query): 1-65535; ValueError naming the value."""
    if not value.isdigit() or not 0 < int(value) <= 0xFFFF:
        raise ValueError(f"unable to parse {value!r} as a port: must be an integer within 1-65535")
    return int(value)


def validate_spdy_stream(stream: SpdyStream) -> str | None:
    if not stream.header(PORT_HEADER):
        return f"{PORT_HEADER!r} header is required"
    try:
        parse_port(stream.header(PORT_HEADER))
    except ValueError as exc:
        return str(exc)
    kind = stream.header(STREAM_TYPE)
    if not kind:
        return f"{STREAM_TYPE!r} header is required"
    if kind not in (DATA, ERROR):
        return f"invalid stream type {kind!r}"
    return None


def _error_message(port: int, sandbox_id: str, exc: BaseException) -> str:
    return f"error forwarding port {port} to pod {sandbox_id}, uid : {exc}"


@dataclass
class _Pair:
    request_id: str
    data: SpdyStream | None = None
    error: SpdyStream | None = None


async def _forward_pair(runtime: StreamingRuntime, sandbox_id: str, pair: _Pair) -> None:
    assert pair.data is not None and pair.error is not None
    port = parse_port(pair.data.header(PORT_HEADER))
    try:
        await runtime.port_forward(sandbox_id, port, pair.data)
    except (OSError, StreamError) as exc:
        message = _error_message(port, sandbox_id, exc)
        log.info("%s", message)
        # As upstream's kubelet: JSON telling the client whether the whole connection is lost
        # (only a reset or broken pipe from the pod's side is not).
        broken = isinstance(exc, (ConnectionResetError, BrokenPipeError))
        body = json.dumps({"closeConnection": True, "message": message} if not broken else {"message": message})
        try:
            await pair.error.write(body.encode() + b"\n")
        except StreamError:
            pass
    finally:
        await pair.data.close()
        await pair.error.close()


async def serve_spdy(session: SpdySession, runtime: StreamingRuntime, sandbox_id: str,
                     creation_timeout: float) -> None:
    """Pair the client's streams and forward each pair, until the connection ends."""
    pairs: dict[str, _Pair] = {}
    tasks: set[asyncio.Task[None]] = set()

    async def expire(pair: _Pair) -> None:
        await asyncio.sleep(creation_timeout)
        if pairs.get(pair.request_id) is pair:
            del pairs[pair.request_id]
            message = f"(conn={session.name}, request={pair.request_id}) timed out waiting for streams"
            log.warning("%s", message)
            for stream in (pair.error, pair.data):
                if stream is not None:
                    try:
                        if stream is pair.error:
                            await stream.write(message.encode())
                        await stream.close()
                    except StreamError:
                        pass

    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    closed = asyncio.ensure_future(session.closed.wait())
    try:
        while True:
            getter = asyncio.ensure_future(session.streams.get())
            done, _ = await asyncio.wait({getter, closed}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                break
            stream = getter.result()
            kind = stream.header(STREAM_TYPE)
            request_id = stream.header(REQUEST_ID_HEADER)
            if not request_id:  # old clients: error and data streams are consecutive odd ids
                request_id = str(stream.id if kind == ERROR else stream.id - 2)
            pair = pairs.get(request_id)
            if pair is None:
                pair = pairs[request_id] = _Pair(request_id)
                spawn(expire(pair))
            if (kind == DATA and pair.data is not None) or (kind == ERROR and pair.error is not None):
                message = f"error processing stream for request {request_id}: {kind} stream already assigned"
                log.warning("%s", message)
                if pair.error is not None:
                    try:
                        await pair.error.write(message.encode())
                    except StreamError:
                        pass
                await stream.reset()
                continue
            if kind == DATA:
                pair.data = stream
            else:
                pair.error = stream
            if pair.data is not None and pair.error is not None:
                del pairs[request_id]
                spawn(_forward_pair(runtime, sandbox_id, pair))
    finally:
        closed.cancel()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, closed, return_exceptions=True)
        await session.close()


async def serve_websocket(channels: ChannelConnection, runtime: StreamingRuntime, sandbox_id: str,
                          ports: list[int]) -> None:
    """One TCP connection per port, on channels 2i (data) and 2i+1 (error)."""

    async def forward(index: int, port: int) -> None:
        data, error = channels.channels[2 * index], channels.channels[2 * index + 1]
        try:
            await runtime.port_forward(sandbox_id, port, data)
        except (OSError, ConnectionError) as exc:
            message = _error_message(port, sandbox_id, exc)
            log.info("%s", message)
            try:
                await error.write(message.encode())
            except (ConnectionError, OSError):
                pass

    try:
        for index, port in enumerate(ports):
            prefix = struct.pack("<H", port)
            await channels.write(2 * index, prefix)
            await channels.write(2 * index + 1, prefix)
        await asyncio.gather(*(forward(i, p) for i, p in enumerate(ports)))
    except (ConnectionError, OSError) as exc:
        log.debug("port-forward websocket ended: %s", exc)
    finally:
        await channels.ws.close()
