"""OCI image archives (a tar of an OCI image layout, as `skopeo copy ... oci-archive:`,
`ctr image export` or `docker save` with the OCI layout write it): import one into the
store, or export images from it (which `ctr images import` reads, names included)."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
from pathlib import Path
from typing import Any

from cri.images import reference
from cri.images.platforms import pick_manifest
from cri.images.store import (
    DOCKER_MANIFEST,
    MANIFEST_LISTS,
    MANIFEST_TYPES,
    NAME_ANNOTATION,
    REF_NAME_ANNOTATION,
    ImageRecord,
    ImageStore,
    ImageStoreError,
)


class _Archive:
    def __init__(self, tar: tarfile.TarFile, path: Path) -> None:
        self.tar, self.path = tar, path

    def member(self, name: str) -> tarfile.TarInfo:
        for candidate in (name, f"./{name}"):
            try:
                return self.tar.getmember(candidate)
            except KeyError:
                continue
        raise ImageStoreError(f"{self.path}: {name} is missing; is this an OCI image archive?")

    def blob_name(self, digest: str) -> str:
        algorithm, _, value = digest.partition(":")
        return f"blobs/{algorithm}/{value}"

    def read_json(self, name: str) -> dict[str, Any]:
        handle = self.tar.extractfile(self.member(name))
        if handle is None:
            raise ImageStoreError(f"{self.path}: {name} is not a file")
        return dict(json.load(handle))

    def copy_blob(self, store: ImageStore, digest: str, size: int | None) -> None:
        handle = self.tar.extractfile(self.member(self.blob_name(digest)))
        if handle is None:
            raise ImageStoreError(f"{self.path}: blob {digest} is not a file")
        store.put_blob_stream(handle, expected=digest, expected_size=size)  # type: ignore[arg-type]


def import_archive(store: ImageStore, path: Path, name: str | None = None) -> list[ImageRecord]:
    """Import every image named in the archive's index (or the one image, as name)."""
    with tarfile.open(path) as tar:
        archive = _Archive(tar, path)
        archive.member("oci-layout")
        entries = archive.read_json("index.json").get("manifests") or []
        if name is not None and len(entries) != 1:
            raise ImageStoreError(f"{path}: --name needs an archive with one image, it has {len(entries)}")
        imported: list[ImageRecord] = []
        for entry in entries:
            annotations = entry.get("annotations") or {}
            image_name = name or annotations.get(NAME_ANNOTATION) or annotations.get(REF_NAME_ANNOTATION)
            if not image_name:
                raise ImageStoreError(f"{path}: an image has no name; pass one with --name")
            try:
                ref = reference.parse(image_name)
            except reference.InvalidReference as exc:
                raise ImageStoreError(f"{path}: {exc}; pass a full name with --name") from exc
            descriptor = dict(entry)
            if descriptor.get("mediaType") in MANIFEST_LISTS:
                archive.copy_blob(store, descriptor["digest"], descriptor.get("size"))
                descriptor = pick_manifest(json.loads(store.read_blob(descriptor["digest"])), str(ref))
            if descriptor.get("mediaType", DOCKER_MANIFEST) not in MANIFEST_TYPES:
                raise ImageStoreError(f"{path}: {ref} has media type {descriptor.get('mediaType')!r}")
            archive.copy_blob(store, descriptor["digest"], descriptor.get("size"))
            manifest = json.loads(store.read_blob(descriptor["digest"]))
            for blob in (manifest["config"], *manifest["layers"]):
                archive.copy_blob(store, blob["digest"], blob.get("size"))
            imported.append(store.tag(str(ref), descriptor["digest"]))
        return imported


def export_archive(store: ImageStore, path: Path, names: list[str]) -> Path:
    """Write the named images (manifest, config, layers) as an OCI image archive at path;
    each index entry carries the image's full name, as containerd's import expects."""
    entries: list[dict[str, Any]] = []
    blobs: list[str] = []
    for name in names:
        record = store.get(name)
        if record is None:
            raise ImageStoreError(f"image {name} is not in the store")
        ref = reference.parse(name)
        manifest = json.loads(store.read_blob(record.manifest_digest))
        entries.append({"mediaType": manifest.get("mediaType") or DOCKER_MANIFEST,
                        "digest": record.manifest_digest,
                        "size": store.blob_path(record.manifest_digest).stat().st_size,
                        "annotations": {NAME_ANNOTATION: str(ref), REF_NAME_ANNOTATION: ref.tag or ref.digest}})
        layers = [layer["digest"] for layer in manifest["layers"]]
        for digest in (record.manifest_digest, manifest["config"]["digest"], *layers):
            if digest not in blobs:
                blobs.append(digest)
    with tarfile.open(path, "w") as tar:
        for member, body in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                             ("index.json", json.dumps({"schemaVersion": 2, "manifests": entries}).encode())):
            info = tarfile.TarInfo(member)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for digest in blobs:
            tar.add(store.blob_path(digest), f"blobs/sha256/{digest.removeprefix('sha256:')}")
    return path


def write_docker_archive(path: Path, name: str, files: dict[str, bytes], host_files: tuple[str, ...] = ()) -> Path:
    """What `docker save NAME` writes (manifest.json, the config, one layer) for an image of
    `host_files` (this machine's, e.g. a static busybox) and `files` (path -> content), made
    without a Docker engine: the developer's own image in tests and benchmarks, where no
    registry outside is reachable."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for host_file in host_files:
            tar.add(host_file, arcname=host_file.lstrip("/"))
        for member, body in files.items():
            info = tarfile.TarInfo(member)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    data = layer.getvalue()
    diff = hashlib.sha256(data).hexdigest()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Cmd": ["/bin/busybox", "sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]}}).encode()
    config_id = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{config_id}.json", "RepoTags": [name],
                            "Layers": [f"{diff}/layer.tar"]}]).encode()
    with tarfile.open(path, "w") as tar:
        for member, body in ((f"{diff}/layer.tar", data), (f"{config_id}.json", config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(member)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path
