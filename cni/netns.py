"""Named network namespaces (/run/netns/<name>), through iproute2's `ip netns`, which
takes care of /run/netns being a shared bind mount of itself (see MACHINE-FACTS)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
from pathlib import Path

__all__ = ["NETNS_DIR", "NetnsError", "create", "delete", "exists", "list_names", "path_of", "socket_in"]

NETNS_DIR = Path("/run/netns")


class NetnsError(RuntimeError):
    pass


def path_of(name: str) -> str:
    return str(NETNS_DIR / name)


def exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def list_names(prefix: str = "") -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix))


async def _ip(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("ip", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    out, err = await proc.communicate()
    return proc.returncode or 0, (err or out).decode(errors="replace").strip()


async def create(name: str) -> str:
    """Create the namespace (with its loopback down, as a new netns is) and return its path."""
    if "/" in name or not name:
        raise NetnsError(f"invalid network namespace name {name!r}")
    code, msg = await _ip("netns", "add", name)
    if code != 0:
        raise NetnsError(f"ip netns add {name}: {msg}")
    return path_of(name)


async def delete(name: str) -> None:
    """Delete the namespace; a namespace that is already gone is fine."""
    if not exists(name):
        return
    code, msg = await _ip("netns", "del", name)
    if code != 0 and exists(name):
        raise NetnsError(f"ip netns del {name}: {msg}")


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def socket_in(netns_path: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket that lives in the namespace at netns_path (a socket belongs to the namespace
    it was made in). The calling thread enters the namespace and comes back; a thread that
    could not come back raises SystemExit rather than serve others from the wrong namespace,
    so call this from a thread of its own (or a dedicated executor)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
            try:
                return socket.socket(family, kind)
            finally:
                try:
                    _setns(home)
                except OSError as exc:  # cannot happen with the fd we hold; never carry on if it does
                    raise SystemExit(f"thread stuck in network namespace {netns_path}: {exc}") from exc
        finally:
            os.close(target)
    finally:
        os.close(home)
