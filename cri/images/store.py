"""An OCI image layout on disk: content-addressed blobs, an index of named images,
and unpacked layers shared by every container that uses them.

    ROOT/oci-layout                  {"imageLayoutVersion": "1.0.0"}
    ROOT/index.json                  one manifest descriptor per image name
    ROOT/blobs/sha256/<hex>          manifests, configs, layers (verified on write)
    ROOT/layers/sha256/<diff id hex> unpacked layers (overlay lowerdirs)

The name of each index entry is the normalised reference in the
`io.containerd.image.name` annotation (with the tag alone in
`org.opencontainers.image.ref.name`), as containerd exports images, so the
layout can be read by other OCI tools. The image id is the config digest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from cri.fsusage import disk_usage
from cri.images import reference
from cri.images.unpack import unpack_layer
from kubeling.atomicfile import replace_file

NAME_ANNOTATION = "io.containerd.image.name"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
MANIFEST_LISTS = (OCI_INDEX, "application/vnd.docker.distribution.manifest.list.v2+json")


class ImageStoreError(Exception):
    """The store refuses the content: bad digest, missing blob, malformed manifest."""


@dataclass(frozen=True)
class Layer:
    digest: str
    media_type: str
    size: int
    diff_id: str


@dataclass
class ImageRecord:
    """One image (one config digest) and every name it is known by."""

    id: str
    manifest_digest: str
    layers: list[Layer]
    config: dict[str, Any]
    size: int
    names: list[str] = field(default_factory=list)

    @property
    def repo_tags(self) -> list[str]:
        return [n for n in self.names if "@" not in n]

    @property
    def repo_digests(self) -> list[str]:
        out: list[str] = []
        for name in self.names:
            digested = reference.parse(name).with_digest(self.manifest_digest)
            if digested not in out:
                out.append(digested)
        return out

    @property
    def run_config(self) -> dict[str, Any]:
        """The image config's `config` section: Env, Entrypoint, Cmd, WorkingDir, User."""
        return dict(self.config.get("config") or {})


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hex(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ImageStoreError(f"unsupported or malformed digest {digest!r}")
    return value


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._lock = threading.RLock()
        self._held = 0  # depth of locked() in this process: the file lock is taken once
        self._lock_file: int = -1
        self._layer_locks: dict[str, threading.Lock] = {}
        self._parsed: dict[str, ImageRecord] = {}
        # index.json as last read, by the file's identity: every lookup (each container
        # start has three) would otherwise read and parse it again.
        self._index: tuple[tuple[int, int, int], list[dict[str, Any]]] | None = None
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (self.root / "layers" / "sha256").mkdir(parents=True, exist_ok=True)
        layout = self.root / "oci-layout"
        if not layout.exists():
            replace_file(layout, b'{"imageLayoutVersion": "1.0.0"}', durable=True)
        if not (self.root / "index.json").exists():
            self._write_index([])

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The store's index for this thread and process alone: the CRI runtime pulling or
        collecting, and `kubeling image load` importing, are separate processes."""
        with self._lock:
            if self._held == 0:
                self._lock_file = os.open(self.root / "index.lock", os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
                if self._held == 0:
                    os.close(self._lock_file)  # closing releases the flock
                    self._lock_file = -1

    # ---- blobs ----

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / "sha256" / _hex(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).exists()

    def read_blob(self, digest: str) -> bytes:
        try:
            return self.blob_path(digest).read_bytes()
        except FileNotFoundError:
            raise ImageStoreError(f"blob {digest} is not in the store") from None

    def put_blob(self, data: bytes, expected: str | None = None) -> str:
        digest = sha256_digest(data)
        if expected is not None and digest != expected:
            raise ImageStoreError(f"digest mismatch: expected {expected}, content is {digest}")
        path = self.blob_path(digest)
        if not path.exists():
            replace_file(path, data, durable=True)
        return digest

    def put_blob_stream(self, stream: BinaryIO, expected: str, expected_size: int | None = None) -> str:
        """Copy a stream into the store, refusing it unless it hashes to expected."""
        path = self.blob_path(expected)
        if path.exists():
            return expected
        sha = hashlib.sha256()
        size = 0
        fd, tmp = tempfile.mkstemp(prefix=".blob.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(1 << 20):
                    sha.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            got = "sha256:" + sha.hexdigest()
            if got != expected:
                raise ImageStoreError(f"digest mismatch: expected {expected}, content is {got}")
            if expected_size is not None and size != expected_size:
                raise ImageStoreError(f"size mismatch for {expected}: expected {expected_size}, got {size}")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return expected

    # ---- index ----

    def _read_index(self) -> list[dict[str, Any]]:
        path = self.root / "index.json"
        # Stat before reading: a write in between gives newer content under the older
        # identity, so the next call reads again (writes replace the file: a new inode).
        st = os.stat(path)
        identity = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._index is None or self._index[0] != identity:
            data = json.loads(path.read_bytes())
            self._index = identity, list(data.get("manifests") or [])
        return list(self._index[1])  # the entries are never changed in place

    def _write_index(self, manifests: list[dict[str, Any]]) -> None:
        body = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
        replace_file(self.root / "index.json", json.dumps(body, indent=1, sort_keys=True).encode(), durable=True)

    def _load(self, manifest_digest: str) -> ImageRecord:
        """The image a manifest describes, without names. Parsed once per digest: a
        manifest and its config are content-addressed, so they never change."""
        parsed = self._parsed.get(manifest_digest)
        if parsed is None:
            parsed = self._parse(manifest_digest)
            self._parsed[manifest_digest] = parsed
        return dataclasses.replace(parsed, names=[])

    def _parse(self, manifest_digest: str) -> ImageRecord:
        manifest_bytes = self.read_blob(manifest_digest)
        try:
            manifest = json.loads(manifest_bytes)
            media_type = manifest.get("mediaType") or OCI_MANIFEST
            if media_type not in MANIFEST_TYPES:
                raise ImageStoreError(f"manifest {manifest_digest} has media type {media_type!r}, "
                                      "not an image manifest")
            config_desc = manifest["config"]
            config = json.loads(self.read_blob(config_desc["digest"]))
            diff_ids = list(config["rootfs"]["diff_ids"])
            layer_descs = list(manifest["layers"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ImageStoreError(f"manifest {manifest_digest} or its config is malformed: {exc}") from exc
        if len(diff_ids) != len(layer_descs):
            raise ImageStoreError(
                f"manifest {manifest_digest} has {len(layer_descs)} layers but its config {len(diff_ids)} diff ids")
        layers = [Layer(digest=d["digest"], media_type=d["mediaType"], size=int(d["size"]), diff_id=diff)
                  for d, diff in zip(layer_descs, diff_ids, strict=True)]
        size = len(manifest_bytes) + int(config_desc["size"]) + sum(layer.size for layer in layers)
        return ImageRecord(id=config_desc["digest"], manifest_digest=manifest_digest, layers=layers,
                           config=config, size=size)

    def tag(self, name: str, manifest_digest: str) -> ImageRecord:
        """Name an image whose manifest, config and layers are all in the store."""
        ref = reference.parse(name)
        record = self._load(manifest_digest)
        for layer in record.layers:
            if not self.has_blob(layer.digest):
                raise ImageStoreError(f"layer {layer.digest} of {ref} is not in the store")
        with self.locked():
            manifests = [m for m in self._read_index()
                         if (m.get("annotations") or {}).get(NAME_ANNOTATION) != str(ref)]
            manifests.append({
                "mediaType": json.loads(self.read_blob(manifest_digest)).get("mediaType") or OCI_MANIFEST,
                "digest": manifest_digest,
                "size": self.blob_path(manifest_digest).stat().st_size,
                "annotations": {NAME_ANNOTATION: str(ref), REF_NAME_ANNOTATION: ref.tag or ref.digest},
            })
            self._write_index(manifests)
        found = self.get(str(ref))
        assert found is not None
        return found

    def images(self) -> list[ImageRecord]:
        # No lock: the index is replaced whole (rename), so a read sees one version or the
        # next; and lookups run on the CRI server's event loop, which must not wait for a
        # pull's durable index write under the lock.
        entries = self._read_index()
        by_id: dict[str, ImageRecord] = {}
        for entry in entries:
            name = (entry.get("annotations") or {}).get(NAME_ANNOTATION)
            if not name:
                continue
            record = self._load(entry["digest"])
            existing = by_id.setdefault(record.id, record)
            existing.names.append(name)
        return sorted(by_id.values(), key=lambda r: r.id)

    def get(self, ref_or_id: str) -> ImageRecord | None:
        """Find an image by name (normalised), `name@digest`, or image id."""
        if reference.is_image_id(ref_or_id):
            return next((r for r in self.images() if r.id == ref_or_id), None)
        ref = reference.parse(ref_or_id)
        for record in self.images():
            if str(ref) in record.names:
                return record
            if ref.digest and ref.with_digest(ref.digest) in record.repo_digests:
                return record
        return None

    def remove(self, ref_or_id: str) -> bool:
        """Remove the image and every name it has (CRI RemoveImage); drop unreferenced blobs."""
        with self.locked():
            record = self.get(ref_or_id)
            if record is None:
                return False
            manifests = [m for m in self._read_index()
                         if (m.get("annotations") or {}).get(NAME_ANNOTATION) not in record.names]
            self._write_index(manifests)
            self._collect_blobs()
            return True

    def _collect_blobs(self) -> None:
        keep: set[str] = set()
        for record in self.images():
            keep.update({record.manifest_digest, record.id, *(layer.digest for layer in record.layers)})
        for blob in (self.root / "blobs" / "sha256").iterdir():
            if not blob.name.startswith(".") and f"sha256:{blob.name}" not in keep:
                blob.unlink(missing_ok=True)
                self._parsed.pop(f"sha256:{blob.name}", None)
        # Unpacked layers stay: a running container's overlay may still use them.

    # ---- layers ----

    def layer_dir(self, diff_id: str) -> Path:
        return self.root / "layers" / "sha256" / _hex(diff_id)

    def unpacked(self, record: ImageRecord) -> list[Path] | None:
        """The image's layer directories, bottom layer first, if all are unpacked already
        (a check cheap enough for the event loop); else None."""
        dirs = [self.layer_dir(layer.diff_id) for layer in record.layers]
        return dirs if all(d.is_dir() for d in dirs) else None

    def unpack(self, record: ImageRecord) -> list[Path]:
        """Unpack the image's layers (each once); return them bottom layer first."""
        dirs: list[Path] = []
        for layer in record.layers:
            dest = self.layer_dir(layer.diff_id)
            with self._lock:
                lock = self._layer_locks.setdefault(layer.diff_id, threading.Lock())
            with lock:
                unpack_layer(self.blob_path(layer.digest), layer.media_type, layer.diff_id, dest)
            dirs.append(dest)
        return dirs

    def usage(self) -> tuple[int, int]:
        """Bytes and inodes used by the store (CRI ImageFsInfo)."""
        return disk_usage(self.root)
