"""Named network namespaces (/run/netns/<name>), made as iproute2's `ip netns add` makes
them, without starting `ip` for each: /run/netns is made a shared mount (a bind mount
of itself first when it is not a mount point), so that namespaces bound under it
propagate to other mount namespaces; a thread of its own unshares a new network
namespace and bind-mounts it on the name's file, then ends (the namespace lives on in
the mount). Deleting unmounts (lazily, as `ip netns del`) and removes the file."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import socket
import threading
from pathlib import Path

__all__ = ["NETNS_DIR", "NetnsError", "create", "delete", "exists", "list_names", "path_of", "socket_in"]

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
MS_BIND, MS_REC, MS_SHARED = 0x1000, 0x4000, 1 << 20
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


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


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, flags: int) -> int:
    return int(_libc.mount(source.encode(), target.encode(), b"none", flags, None))


def _share_dir() -> None:
    """/run/netns as a shared mount, as ip netns does before its first namespace."""
    NETNS_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    if _mount("", str(NETNS_DIR), MS_SHARED | MS_REC) == 0:
        return
    if ctypes.get_errno() != errno.EINVAL:  # EINVAL: not a mount point yet
        _check(-1, f"make {NETNS_DIR} shared")
    _check(_mount(str(NETNS_DIR), str(NETNS_DIR), MS_BIND | MS_REC), f"bind {NETNS_DIR} on itself")
    _check(_mount("", str(NETNS_DIR), MS_SHARED | MS_REC), f"make {NETNS_DIR} shared")


def _bind_new_namespace(path: str) -> None:
    """In a thread that ends right after: a new network namespace for this thread, bound at path."""
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    _check(_mount(f"/proc/self/task/{threading.get_native_id()}/ns/net", path, MS_BIND), f"bind {path}")


def _create(path: str) -> None:
    _share_dir()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0)
    except FileExistsError:
        raise NetnsError(f"network namespace {os.path.basename(path)} exists already") from None
    os.close(fd)
    failure: list[OSError] = []

    def bind() -> None:
        try:
            _bind_new_namespace(path)
        except OSError as exc:
            failure.append(exc)

    # A thread of its own: the namespace it unshared into ends with it, no one else's is touched.
    thread = threading.Thread(target=bind, name=f"netns-{os.path.basename(path)}")
    thread.start()
    thread.join()
    if failure:
        os.unlink(path)
        raise NetnsError(f"create network namespace {os.path.basename(path)}: {failure[0]}")


def _delete(path: str) -> None:
    if _libc.umount2(path.encode(), MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        err = ctypes.get_errno()
        raise NetnsError(f"unmount network namespace {path}: {os.strerror(err)}")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise NetnsError(f"remove network namespace {path}: {exc}") from exc


async def create(name: str) -> str:
    """Create the namespace (with its loopback down, as a new netns is) and return its path."""
    if "/" in name or not name or name in (".", ".."):
        raise NetnsError(f"invalid network namespace name {name!r}")
    path = path_of(name)
    try:
        await asyncio.to_thread(_create, path)
    except OSError as exc:
        raise NetnsError(f"create network namespace {name}: {exc}") from exc
    return path


async def delete(name: str) -> None:
    """Delete the namespace; a namespace that is already gone is fine."""
    if not exists(name):
        return
    await asyncio.to_thread(_delete, path_of(name))


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
