"""Unpack one image layer into its own directory, ready to be an overlay lowerdir.

Each layer is unpacked once, into a directory keyed by its diff id, and the
layers of an image are stacked by overlayfs, so containers share them. OCI
whiteouts become overlay's own markers, as containerd's overlay snapshotter
does it: `.wh.NAME` a 0/0 character device at NAME, `.wh..wh..opq` the
`trusted.overlay.opaque` xattr on its directory.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO, BinaryIO

WHITEOUT_PREFIX = ".wh."
OPAQUE_MARKER = ".wh..wh..opq"
GZIP_TYPES = ("application/vnd.oci.image.layer.v1.tar+gzip",
              "application/vnd.docker.image.rootfs.diff.tar.gzip")
TAR_TYPES = ("application/vnd.oci.image.layer.v1.tar",)


class LayerError(Exception):
    """A layer that cannot be unpacked safely or does not match its diff id."""


class _HashingReader:
    """Hash the uncompressed stream as tarfile reads it, to check the diff id."""

    def __init__(self, inner: IO[bytes] | gzip.GzipFile) -> None:
        self._inner = inner
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self.sha.update(data)
        return data

    def drain(self) -> None:
        # tar streams may carry zero padding past the end-of-archive marker.
        while self.read(1 << 20):
            pass


def _inside(dest: Path, name: str) -> Path:
    target = Path(os.path.realpath(dest / name))
    if os.path.commonpath([target, dest]) != str(dest):
        raise LayerError(f"layer entry {name!r} points outside the layer")
    return target


def _apply_whiteout(dest: Path, member: tarfile.TarInfo) -> None:
    parent, base = os.path.split(member.name)
    directory = _inside(dest, parent or ".")
    directory.mkdir(parents=True, exist_ok=True)
    if base == OPAQUE_MARKER:
        os.setxattr(directory, "trusted.overlay.opaque", b"y")
        return
    hidden = directory / base[len(WHITEOUT_PREFIX):]
    if hidden.is_dir() and not hidden.is_symlink():
        shutil.rmtree(hidden)
    elif hidden.exists() or hidden.is_symlink():
        hidden.unlink()
    os.mknod(hidden, 0o600 | 0o020000, os.makedev(0, 0))


# Python 3.12 (and 3.11.4+) warn unless extract() is told which filter to use; Debian 12's
# 3.11.2 has no filters at all. Our own checks below do what tar_filter would refuse.
_EXTRACT_OPTIONS: dict[str, str] = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def _extract(stream: BinaryIO, dest: Path) -> None:
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            member.name = member.name.lstrip("/")
            if os.path.basename(member.name).startswith(WHITEOUT_PREFIX):
                _apply_whiteout(dest, member)
                continue
            # What tarfile's tar_filter refuses (names resolving outside the layer, through
            # symlinks already unpacked), we refuse; the modes it would clear (/tmp is 1777)
            # we keep, and owners go by number (an image's uid 33 is not the host's www-data).
            _inside(dest, member.name)
            if member.islnk():
                # Hard link targets are paths inside the layer, absolute or not.
                member.linkname = member.linkname.lstrip("/")
                _inside(dest, member.linkname)
            tar.extract(member, dest, set_attrs=True, numeric_owner=True, **_EXTRACT_OPTIONS)  # type: ignore[arg-type]


def unpack_layer(blob: Path, media_type: str, diff_id: str, dest: Path) -> None:
    """Unpack blob into dest (created atomically); verify the uncompressed digest."""
    if dest.exists():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        with open(blob, "rb") as raw:
            if media_type in GZIP_TYPES:
                inner: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=raw, mode="rb")
            elif media_type in TAR_TYPES:
                inner = raw
            else:
                raise LayerError(f"layer media type {media_type!r} is not supported")
            reader = _HashingReader(inner)
            _extract(reader, work.resolve())  # type: ignore[arg-type]
            reader.drain()
        got = "sha256:" + reader.sha.hexdigest()
        if got != diff_id:
            raise LayerError(f"layer {blob.name}: uncompressed digest {got} does not match diff id {diff_id}")
        os.chmod(work, 0o755)
        os.rename(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
