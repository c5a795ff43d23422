"""Pseudo-terminals made by runc, and unix sockets in deep directories.

With `--console-socket PATH`, runc creates the pty of a `terminal: true` process
and sends its master end over that socket (SCM_RIGHTS); whoever holds the master
is the terminal: what it reads is the process's output, what it writes is typed
input, and TIOCSWINSZ on it resizes the window.

A unix socket path has at most 107 bytes; state directories can be deeper, so
sockets are bound and reached through `/proc/self/fd/<dir fd>/<name>`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import struct
import termios
from collections.abc import Iterator
from pathlib import Path

EOT = b"\x04"  # what a terminal's user types to end input (Ctrl-D)


@contextlib.contextmanager
def short_path(directory: Path, name: str) -> Iterator[str]:
    """A short path naming directory/name, valid while the context lasts."""
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def listen_unix(directory: Path, name: str, backlog: int = 16) -> socket.socket:
    """A listening unix socket at directory/name (replacing a stale one), mode 0600."""
    target = directory / name
    if target.is_socket():
        target.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with short_path(directory, name) as path:
            sock.bind(path)
        os.chmod(target, 0o600)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def connect_unix(directory: Path, name: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with short_path(directory, name) as path:
            sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


class ConsoleSocket:
    """A socket for runc's --console-socket; receive() gives the pty master's fd."""

    def __init__(self, directory: Path, name: str = "console.sock") -> None:
        self.directory = Path(directory)
        self.name = name
        self._sock = listen_unix(self.directory, name, backlog=1)
        self._fd = os.open(self.directory, os.O_PATH | os.O_DIRECTORY)

    @property
    def path(self) -> str:
        """What to pass to runc: through our own /proc entry, short and valid while we hold it."""
        return f"/proc/{os.getpid()}/fd/{self._fd}/{self.name}"

    def receive(self, timeout: float = 30.0) -> int:
        """Wait for runc to send the master; raise TimeoutError or OSError."""
        self._sock.settimeout(timeout)
        conn, _ = self._sock.accept()
        with conn:
            conn.settimeout(timeout)
            _, fds, _, _ = socket.recv_fds(conn, 4096, 1)
        if not fds:
            raise OSError(errno.EPROTO, "runc sent no terminal over the console socket")
        return fds[0]

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a receive() blocked in accept
        except OSError:
            pass
        self._sock.close()
        os.close(self._fd)
        (self.directory / self.name).unlink(missing_ok=True)


def set_size(fd: int, width: int, height: int) -> None:
    """Resize the terminal whose master is fd (the process gets SIGWINCH)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def read_master(fd: int, size: int = 64 * 1024) -> bytes:
    """Output from the terminal; b"" once the process side is closed (EIO on Linux)."""
    try:
        return os.read(fd, size)
    except OSError as exc:
        if exc.errno == errno.EIO:
            return b""
        raise
