"""Container log files in the CRI log format, as the kubelet reads them.

Each line is `<RFC3339Nano time> <stream> <tag> <content>\\n`: stream is stdout or
stderr, tag F for a full line and P for a piece of a line longer than the maximum
(containerd's max_container_log_line_size, 16 KiB by default); a line only ends
with the F piece. Output that ends without a newline is written as F at EOF, as
containerd does.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

STDOUT = "stdout"
STDERR = "stderr"
FULL = "F"
PARTIAL = "P"
DEFAULT_MAX_LINE = 16 * 1024


def rfc3339nano(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: fractional seconds without trailing zeros."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"


@dataclass(frozen=True)
class LogEntry:
    timestamp: str
    stream: str
    tag: str
    content: bytes


def parse_line(line: bytes) -> LogEntry:
    """Parse one CRI log line (without its newline), as the kubelet's ParseCRILog."""
    parts = line.split(b" ", 3)
    if len(parts) < 3:
        raise ValueError(f"not a CRI log line: {line[:80]!r}")
    timestamp, stream, tag = (p.decode() for p in parts[:3])
    if stream not in (STDOUT, STDERR):
        raise ValueError(f"unexpected stream {stream!r} in CRI log line")
    tags = tag.split(":")
    if tags[0] not in (FULL, PARTIAL):
        raise ValueError(f"unexpected tag {tag!r} in CRI log line")
    return LogEntry(timestamp, stream, tags[0], parts[3] if len(parts) == 4 else b"")


def read_log(path: Path) -> Iterator[tuple[str, bytes]]:
    """Whole lines (P pieces joined) per stream, in file order: what `kubectl logs` shows."""
    pending: dict[str, bytes] = {STDOUT: b"", STDERR: b""}
    with open(path, "rb") as handle:
        for raw in handle:
            entry = parse_line(raw.rstrip(b"\n"))
            pending[entry.stream] += entry.content
            if entry.tag == FULL:
                yield entry.stream, pending[entry.stream]
                pending[entry.stream] = b""
    for stream, rest in pending.items():  # a stream that ended without a newline
        if rest:
            yield stream, rest


@dataclass
class _Splitter:
    stream: str
    max_line: int
    buffer: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> Iterator[tuple[str, bytes]]:
        self.buffer += data
        while True:
            newline = self.buffer.find(b"\n")
            if newline != -1 and newline <= self.max_line:
                line = bytes(self.buffer[:newline])
                del self.buffer[:newline + 1]
                yield FULL, line
            elif len(self.buffer) > self.max_line:
                piece = bytes(self.buffer[:self.max_line])
                del self.buffer[:self.max_line]
                yield PARTIAL, piece
            else:
                return

    def close(self) -> Iterator[tuple[str, bytes]]:
        if self.buffer:
            line = bytes(self.buffer)
            self.buffer.clear()
            yield PARTIAL, line  # no newline ended it: a partial line, as containerd writes it


class CRILogWriter:
    """Writes both streams of one container to its log path; thread-safe; reopenable."""

    def __init__(self, path: Path, max_line: int = DEFAULT_MAX_LINE,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._splitters = {s: _Splitter(s, max_line) for s in (STDOUT, STDERR)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO = open(self.path, "ab")
        self._reopen_requested = False

    def _emit(self, stream: str, pieces: Iterator[tuple[str, bytes]]) -> None:
        if self._reopen_requested:  # (under the lock) the file was rotated: write to the new one
            self._reopen_requested = False
            self._file.close()
            self._file = open(self.path, "ab")
        out = bytearray()
        for tag, content in pieces:
            out += f"{rfc3339nano(self._clock())} {stream} {tag} ".encode() + content + b"\n"
        if out:
            self._file.write(out)
            self._file.flush()

    def write(self, stream: str, data: bytes) -> None:
        with self._lock:
            self._emit(stream, self._splitters[stream].feed(data))

    def close_stream(self, stream: str) -> None:
        """The stream reached EOF: write what is left, as the partial line it is (readers
        show it without a newline, as the container wrote it)."""
        with self._lock:
            self._emit(stream, self._splitters[stream].close())

    def request_reopen(self) -> None:
        """From a signal handler: reopen before the next write. (Taking the lock there
        would deadlock when the signal interrupts a write that holds it.)"""
        self._reopen_requested = True

    def reopen(self) -> None:
        """After the kubelet rotated the file (CRI ReopenContainerLog)."""
        with self._lock:
            self._file.close()
            self._file = open(self.path, "ab")

    def close(self) -> None:
        for stream in (STDOUT, STDERR):
            self.close_stream(stream)
        with self._lock:
            self._file.close()


def copy_stream(source: BinaryIO | int, writer: CRILogWriter, stream: str, chunk: int = 64 * 1024,
                on_data: Callable[[bytes], None] | None = None) -> None:
    """Copy a pipe (or a terminal's master) into the log until EOF, handing each chunk
    to on_data too (attached clients); run in a thread per stream."""
    fd = source if isinstance(source, int) else source.fileno()
    try:
        while True:
            try:
                data = os.read(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.EIO:  # EIO: a terminal whose process side is gone
                    raise
                data = b""
            if not data:
                break
            writer.write(stream, data)
            if on_data is not None:
                on_data(data)
    finally:
        writer.close_stream(stream)


def log_time(text: str) -> float:
    """An RFC 3339 time (a CRI log line's, or sinceTime) as seconds since the epoch;
    ValueError when it is not one."""
    head, dot, rest = text.partition(".")
    if dot:  # Python reads at most microseconds: cut the fraction there, keep the zone
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]}{rest[digits:]}"
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def format_entries(raw: bytes, timestamps: bool, since: float | None = None) -> list[bytes]:
    """CRI log lines -> what `kubectl logs` prints: one chunk per line, partial lines
    joined, each prefixed with its time when asked; lines older than `since` left out."""
    out: list[bytes] = []
    pending = b""
    for line in raw.splitlines():
        if not line:
            continue
        try:
            entry = parse_line(line)
            if since is not None and log_time(entry.timestamp) < since:
                continue
        except ValueError:
            continue  # a torn line at the end of a file being written
        if not pending and timestamps:
            pending = entry.timestamp.encode() + b" "
        pending += entry.content
        if entry.tag == FULL:
            out.append(pending + b"\n")
            pending = b""
    if pending:
        out.append(pending)
    return out
