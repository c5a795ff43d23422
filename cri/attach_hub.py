"""Attach, the shim's side: a client joins a running container's own stdio (CRI Attach).

The container's shim owns that stdio (the pipes, or the terminal for `tty: true`),
so it hosts `attach.sock` (mode 0600) in the container's state directory; the CRI
server connects there for each attach session. On the socket, after a one-line JSON
hello naming the streams the client wants, both sides send frames
`[kind: u8][length: u32 BE][payload]`:

    client -> shim   STDIN data, STDIN_CLOSE, RESIZE (u16 width, u16 height)
    shim -> client   STDOUT, STDERR data (a terminal's output is STDOUT)

The shim closes the socket when the container exits. With `stdin_once`, the
container's stdin is closed after the first session that had stdin ends (for a
terminal: an end-of-input character is typed), as the CRI asks.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from cri.console import EOT, listen_unix, set_size

ATTACH_SOCKET = "attach.sock"
STDIN, STDOUT, STDERR, STDIN_CLOSE, RESIZE = 0, 1, 2, 3, 4
HEADER = struct.Struct(">BI")
MAX_FRAME = 1 << 20
CLIENT_BACKLOG = 8 * 1024 * 1024  # bytes queued for one client before it is dropped as too slow


def frame(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


@dataclass(eq=False)
class _Client:
    sock: socket.socket
    wants: frozenset[int]
    stdin: bool
    _queue: deque[bytes] = field(default_factory=deque)
    _queued: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _closing: bool = False

    def enqueue(self, data: bytes) -> bool:
        """False when the client is too far behind (it is then dropped)."""
        with self._cond:
            if self._queued + len(data) > CLIENT_BACKLOG:
                return False
            self._queue.append(data)
            self._queued += len(data)
            self._cond.notify()
        return True

    def finish(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()

    def writer(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closing:
                        self._cond.wait()
                    if not self._queue:
                        return
                    data = self._queue.popleft()
                    self._queued -= len(data)
                self.sock.sendall(data)
        except OSError:
            pass
        finally:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class AttachHub:
    """In the shim: serves attach.sock, fans the container's output out to attached
    clients, and feeds their input to the container's stdin (a pipe or the terminal)."""

    def __init__(self, state: Path, stdin_fd: int | None, terminal_fd: int | None, stdin_once: bool) -> None:
        self._listener = listen_unix(state, ATTACH_SOCKET)
        self._state = state
        self._stdin_fd = stdin_fd  # the pipe's write end, the terminal, or None (no stdin)
        self._terminal_fd = terminal_fd
        self._stdin_once = stdin_once
        self._stdin_lock = threading.Lock()
        self._clients: list[_Client] = []
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        threading.Thread(target=self._accept, name="attach-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="attach-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            hello = b""
            while not hello.endswith(b"\n"):
                chunk = conn.recv(1)
                if not chunk or len(hello) > 4096:
                    conn.close()
                    return
                hello += chunk
            wanted = json.loads(hello)
            kinds = frozenset(k for k, name in ((STDOUT, "stdout"), (STDERR, "stderr")) if wanted.get(name))
            client = _Client(conn, kinds, bool(wanted.get("stdin")) and self._stdin_fd is not None)
        except (OSError, ValueError, AttributeError):
            conn.close()
            return
        with self._lock:
            if self._closed:
                conn.close()
                return
            self._clients.append(client)
        writer = threading.Thread(target=client.writer, name="attach-writer", daemon=True)
        writer.start()
        try:
            self._read_input(client)
        finally:
            if client.stdin and self._stdin_once:
                self.close_stdin()
            self._drop(client)
            writer.join(5.0)  # it shuts the socket down; closing is ours, once nobody uses it
            conn.close()

    def _read_input(self, client: _Client) -> None:
        while True:
            try:
                header = _read_exact(client.sock, HEADER.size)
            except OSError:
                return
            if header is None:
                return
            kind, length = HEADER.unpack(header)
            if length > MAX_FRAME:
                return  # garbage: drop the client
            try:
                payload = _read_exact(client.sock, length) if length else b""
            except OSError:
                return
            if payload is None:
                return
            if kind == STDIN and client.stdin:
                self._write_stdin(payload)
            elif kind == STDIN_CLOSE and client.stdin:
                if self._stdin_once:
                    self.close_stdin()
                client.stdin = False
            elif kind == RESIZE and self._terminal_fd is not None and length == 4:
                width, height = struct.unpack(">HH", payload)
                try:
                    set_size(self._terminal_fd, width, height)
                except OSError:
                    pass

    def _write_stdin(self, data: bytes) -> None:
        with self._stdin_lock:
            fd = self._stdin_fd
            if fd is None:
                return
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                pass  # the container closed its stdin (EPIPE): input goes nowhere, as on a pipe

    def close_stdin(self) -> None:
        """Close the container's stdin (a terminal gets end-of-input; it stays the output)."""
        with self._stdin_lock:
            fd, self._stdin_fd = self._stdin_fd, None
            if fd is None:
                return
            try:
                if fd == self._terminal_fd:
                    os.write(fd, EOT)
                else:
                    os.close(fd)
            except OSError:
                pass

    def _drop(self, client: _Client) -> None:
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)
        client.finish()

    def publish(self, kind: int, data: bytes) -> None:
        """Output of the container (from the shim's copy threads) to every client that wants it."""
        if not data:
            return
        payload = frame(kind, data)
        with self._lock:
            clients = [c for c in self._clients if kind in c.wants]
        for client in clients:
            if not client.enqueue(payload):
                self._drop(client)

    def close(self) -> None:
        """The container exited: let clients have what was queued, then hang up."""
        with self._lock:
            self._closed = True
            clients, self._clients = self._clients, []
        try:
            self._listener.close()
        finally:
            (self._state / ATTACH_SOCKET).unlink(missing_ok=True)
        for client in clients:
            client.finish()
