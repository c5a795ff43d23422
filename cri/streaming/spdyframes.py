"""SPDY/3.1's wire format (moby/spdystream's spdy/types.go, read.go, write.go): frame
header layout, control frame types and flags, the zlib header-block compression with
SPDY/3's dictionary, and reading one frame with the limits the server enforces.
The session that uses them is spdy.py.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from dataclasses import dataclass

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN, FLAG_UNIDIRECTIONAL = 0x01, 0x02
# RST_STREAM status codes
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR, STREAM_IN_USE = 1, 2, 3, 5, 6, 8
# GOAWAY status codes
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR, GOAWAY_INTERNAL_ERROR = 0, 1, 2

MAX_CONTROL_PAYLOAD = 1 << 20  # header blocks of exec/port-forward are a few hundred bytes
MAX_HEADER_BLOCK = 1 << 20
MAX_HEADER_COUNT = 1000
DATA_CHUNK = 64 * 1024  # a DATA frame may carry 16 MiB; smaller frames keep streams interleaved

_KNOWN_CONTROL = {SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE}


def _dictionary() -> bytes:
    """SPDY/3's header compression dictionary (draft-mbelshe-httpbis-spdy-00, 2.6.10.1):
    length-prefixed header names and values, then common value fragments."""
    words = (
        "options head post put delete trace accept accept-charset accept-encoding accept-language "
        "accept-ranges age allow authorization cache-control connection content-base content-encoding "
        "content-language content-length content-location content-md5 content-range content-type date etag "
        "expect expires from host if-match if-modified-since if-none-match if-range if-unmodified-since "
        "last-modified location max-forwards pragma proxy-authenticate proxy-authorization range referer "
        "retry-after server te trailer transfer-encoding upgrade user-agent vary via warning www-authenticate "
        "method get status"
    ).split() + ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
    tail = (
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
        "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
        "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
        "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
        "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
        "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
    )
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + tail.encode()


DICTIONARY = _dictionary()


class ProtocolError(Exception):
    """The peer broke SPDY's framing: the connection cannot continue."""


Headers = dict[str, list[str]]


def encode_header_block(headers: Headers) -> bytes:
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        raw_name, raw_value = name.lower().encode(), "\x00".join(values).encode()
        out += [struct.pack(">I", len(raw_name)), raw_name, struct.pack(">I", len(raw_value)), raw_value]
    return b"".join(out)


def decode_header_block(block: bytes) -> Headers:
    view = memoryview(block)
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(view):
            raise ProtocolError("header block truncated")
        piece = bytes(view[pos:pos + n])
        pos += n
        return piece

    (count,) = struct.unpack(">I", take(4))
    if count > MAX_HEADER_COUNT:
        raise ProtocolError(f"{count} headers in one block (limit {MAX_HEADER_COUNT})")
    headers: Headers = {}
    for _ in range(count):
        name = take(struct.unpack(">I", take(4))[0]).decode("latin-1")
        value = take(struct.unpack(">I", take(4))[0]).decode("latin-1")
        if name != name.lower() or not name:
            raise ProtocolError(f"header name {name!r} is empty or not lowercase")
        if name in headers:
            raise ProtocolError(f"header {name!r} appears twice")
        headers[name] = value.split("\x00")
    if pos != len(view):
        raise ProtocolError("trailing bytes after the header block")
    return headers


class HeaderCompressor:
    """One direction's zlib context: every block is flushed (Z_SYNC_FLUSH), never finished."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)

    def compress(self, headers: Headers) -> bytes:
        return self._deflate.compress(encode_header_block(headers)) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(15, DICTIONARY)

    def decompress(self, payload: bytes) -> Headers:
        try:
            block = self._inflate.decompress(payload, MAX_HEADER_BLOCK)
        except zlib.error as exc:
            raise ProtocolError(f"header block does not decompress: {exc}") from None
        if self._inflate.unconsumed_tail:
            raise ProtocolError(f"header block larger than {MAX_HEADER_BLOCK} bytes")
        return decode_header_block(block)


def control_frame(frame_type: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, frame_type, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, data: bytes) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data


@dataclass(frozen=True)
class Frame:
    control: bool
    frame_type: int  # control frames only
    flags: int
    payload: bytes
    stream_id: int = 0  # data frames only


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame, or None at a clean end of the connection."""
    try:
        head = await reader.readexactly(8)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("connection ended inside a frame header") from None
        return None
    first, second = struct.unpack(">II", head)
    flags, length = second >> 24, second & 0xFFFFFF
    control = bool(first & 0x80000000)
    if control:
        version, frame_type = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} (only 3 is spoken)")
        if frame_type not in _KNOWN_CONTROL:
            raise ProtocolError(f"unknown control frame type {frame_type}")
        if length > MAX_CONTROL_PAYLOAD:
            raise ProtocolError(f"control frame of {length} bytes (limit {MAX_CONTROL_PAYLOAD})")
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection ended inside a frame") from None
    if control:
        return Frame(True, frame_type, flags, payload)
    return Frame(False, 0, flags, payload, stream_id=first & 0x7FFFFFFF)
