"""The streaming server's parts on their own: SPDY framing and header compression, the
token cache, WebSocket handshakes, resize decoding and exec statuses."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
import zlib

import pytest

from cri.streaming import remotecommand, spdy
from cri.streaming import spdyframes as wire
from cri.streaming.request_cache import CacheFull, RequestCache
from cri.streaming.websocket import HandshakeError, accept_response, choose_protocol, is_websocket_request
from protos.runtime.v1 import api_pb2


def test_spdy_dictionary_is_the_specs() -> None:
    # SPDY/3's dictionary, byte for byte as client-go's spdystream has it (1423 bytes).
    assert len(wire.DICTIONARY) == 1423
    assert hashlib.sha256(wire.DICTIONARY).hexdigest() == \
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_header_blocks_share_one_context_per_direction() -> None:
    out, back = wire.HeaderCompressor(), wire.HeaderDecompressor()
    first = {"streamtype": ["stdout"], "port": ["80"]}
    second = {"streamtype": ["error"], "x": ["a", "b"]}
    block1, block2 = out.compress(first), out.compress(second)
    assert back.decompress(block1) == first
    assert back.decompress(block2) == second  # decodes only in order: the context moves on
    assert wire.decode_header_block(wire.encode_header_block(second)) == second


@pytest.mark.parametrize(("block", "words"), [
    (struct.pack(">I", 1) + struct.pack(">I", 4) + b"Name" + struct.pack(">I", 0), "not lowercase"),
    (struct.pack(">I", 2) + (struct.pack(">I", 1) + b"a" + struct.pack(">I", 0)) * 2, "appears twice"),
    (struct.pack(">I", 1) + struct.pack(">I", 100) + b"short", "truncated"),
    (struct.pack(">I", 5000), "headers in one block"),
])
def test_malformed_header_blocks(block: bytes, words: str) -> None:
    with pytest.raises(wire.ProtocolError, match=words):
        wire.decode_header_block(block)


def test_header_block_that_is_not_zlib() -> None:
    with pytest.raises(wire.ProtocolError, match="does not decompress"):
        wire.HeaderDecompressor().decompress(b"plain text")
    bomb = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, wire.DICTIONARY)
    huge = bomb.compress(b"\0" * (wire.MAX_HEADER_BLOCK + 10)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    with pytest.raises(wire.ProtocolError, match="larger than"):
        wire.HeaderDecompressor().decompress(huge)


async def _frames(data: bytes) -> list[wire.Frame | None]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    out: list[wire.Frame | None] = []
    while (frame := await wire.read_frame(reader)) is not None:
        out.append(frame)
    return out


async def test_frames_round_trip_and_bad_frames() -> None:
    frames = await _frames(wire.data_frame(3, wire.FLAG_FIN, b"abc") +
                           wire.control_frame(wire.PING, 0, struct.pack(">I", 1)))
    assert frames[0] == wire.Frame(False, 0, wire.FLAG_FIN, b"abc", stream_id=3)
    assert frames[1] == wire.Frame(True, wire.PING, 0, struct.pack(">I", 1))
    for bad, words in ((struct.pack(">HHI", 0x8002, wire.PING, 4) + b"\0" * 4, "version 2"),
                       (wire.control_frame(42, 0, b""), "unknown control frame type 42"),
                       (wire.data_frame(1, 0, b"full")[:-2], "inside a frame"),
                       (b"\x80\x03", "inside a frame header"),
                       (struct.pack(">HHI", 0x8003, wire.SETTINGS, wire.MAX_CONTROL_PAYLOAD + 1), "limit")):
        with pytest.raises(wire.ProtocolError, match=words):
            await _frames(bad)


async def test_inbound_ends_without_waiting() -> None:
    inbound = spdy.Inbound(limit=1)
    await inbound.put(b"one")
    blocked = asyncio.ensure_future(inbound.put(b"two"))  # full: waits for the reader
    await asyncio.sleep(0)
    assert not blocked.done()
    inbound.end()  # never waits, and frees the writer
    await blocked
    assert await inbound.get() == b"one" and await inbound.get() == b""


def test_tokens_single_use_expiry_and_capacity() -> None:
    now = [100.0]
    cache = RequestCache(ttl=60, max_in_flight=3, clock=lambda: now[0])
    request = api_pb2.ExecRequest(container_id="c", cmd=["sh"], stdout=True)
    token = cache.insert(request)
    assert len(token) >= 22 and token.isascii()  # 128 random bits, URL-safe
    assert cache.consume(token) == request
    assert cache.consume(token) is None  # single use
    assert cache.consume("never-issued") is None
    stale = cache.insert(request)
    now[0] += 61
    assert cache.consume(stale) is None  # expired
    for _ in range(3):
        cache.insert(request)
    with pytest.raises(CacheFull, match="maximum number of in-flight requests exceeded"):
        cache.insert(request)
    now[0] += 61  # all expired: room again
    cache.insert(request)
    assert len(cache) == 1


def test_websocket_handshake() -> None:
    key = base64.b64encode(b"0123456789abcdef").decode()
    headers = {"upgrade": "websocket", "connection": "keep-alive, Upgrade", "sec-websocket-version": "13",
               "sec-websocket-key": key, "sec-websocket-protocol": "v5.channel.k8s.io, v4.channel.k8s.io"}
    assert is_websocket_request(headers)
    assert choose_protocol(headers, remotecommand.WEBSOCKET_PROTOCOLS) == "v5.channel.k8s.io"
    assert choose_protocol({**headers, "sec-websocket-protocol": "v4.channel.k8s.io"},
                           remotecommand.WEBSOCKET_PROTOCOLS) == "v4.channel.k8s.io"
    assert choose_protocol({}, remotecommand.WEBSOCKET_PROTOCOLS) == ""
    response = accept_response(headers, "v5.channel.k8s.io").decode()
    # RFC 6455's accept value: base64(sha1(key + GUID)).
    expected = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    assert f"Sec-WebSocket-Accept: {expected.decode()}" in response
    assert "Sec-WebSocket-Protocol: v5.channel.k8s.io" in response
    with pytest.raises(HandshakeError, match="not supported"):
        choose_protocol({**headers, "sec-websocket-protocol": "v9.channel.k8s.io"},
                        remotecommand.WEBSOCKET_PROTOCOLS)
    with pytest.raises(HandshakeError, match="Sec-WebSocket-Key"):
        accept_response({**headers, "sec-websocket-key": "short"}, "")
    with pytest.raises(HandshakeError, match="Version must be 13"):
        accept_response({**headers, "sec-websocket-version": "8"}, "")


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def read(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


async def test_resize_events_split_anywhere() -> None:
    queue: asyncio.Queue[remotecommand.TerminalSize | None] = asyncio.Queue()
    stream = _Chunks([b'{"Width":80,"He', b'ight":24}\n{"Width":100,', b'"Height":40}{"junk": true}',
                      b'{"Width":70000,"Height":1}'])
    await remotecommand.read_resizes(stream, queue)
    got = []
    while (size := queue.get_nowait()) is not None:
        got.append((size.width, size.height))
    # A value without sizes reads as 0x0 (ignored by terminals); out-of-range values are dropped.
    assert got == [(80, 24), (100, 40), (0, 0)]


def test_statuses() -> None:
    assert remotecommand.success_status() == {"metadata": {}, "status": "Success"}
    failed = remotecommand.exit_code_status(["sh", "-c", "exit 3"], 3)
    assert failed["reason"] == "NonZeroExitCode" and failed["details"]["causes"] == [
        {"reason": "ExitCode", "message": "3"}]
    assert failed["message"] == "command terminated with non-zero exit code: error executing command " \
                                "[sh -c exit 3], exit code 3"
    internal = remotecommand.internal_error_status("boom")
    assert internal["code"] == 500 and internal["reason"] == "InternalError"
    options = remotecommand.Options.of(stdin=True, stdout=True, stderr=True, tty=True)
    assert not options.stderr  # a terminal carries stderr in stdout
