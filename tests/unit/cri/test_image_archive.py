"""`kubeling image import`: OCI image archives into the store, and the CLI around it."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from cluster.__main__ import main
from cri.images.archive import export_archive, import_archive
from cri.images.builtin import BUSYBOX_IMAGE, PAUSE_IMAGE, build_builtins
from cri.images.platforms import this_platform
from cri.images.store import OCI_INDEX, REF_NAME_ANNOTATION, ImageStore, ImageStoreError


def export(store: ImageStore, out: Path, index: dict[str, object] | None = None,
           tamper: str | None = None) -> Path:
    """Write store's OCI layout as an archive (the store is one), optionally with another
    index.json or one blob's content replaced."""
    with tarfile.open(out, "w") as tar:
        tar.add(store.root / "oci-layout", "oci-layout")
        body = json.dumps(index).encode() if index else (store.root / "index.json").read_bytes()
        info = tarfile.TarInfo("index.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for blob in sorted((store.root / "blobs" / "sha256").iterdir()):
            data = blob.read_bytes()
            if tamper is not None and blob.name == tamper.removeprefix("sha256:"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            info = tarfile.TarInfo(f"blobs/sha256/{blob.name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


@pytest.fixture
def source(tmp_path: Path) -> ImageStore:
    store = ImageStore(tmp_path / "source")
    build_builtins(store)
    return store


def test_round_trip_keeps_names_and_ids(source: ImageStore, tmp_path: Path) -> None:
    archive = export(source, tmp_path / "images.tar")
    target = ImageStore(tmp_path / "target")
    imported = import_archive(target, archive)
    assert sorted(i.names[0] for i in imported) == sorted([BUSYBOX_IMAGE, PAUSE_IMAGE])
    assert [i.id for i in target.images()] == [i.id for i in source.images()]
    busybox = target.get("busybox")
    assert busybox is not None and target.unpack(busybox)


def test_export_writes_only_the_named_images(source: ImageStore, tmp_path: Path) -> None:
    archive = export_archive(source, tmp_path / "pause.tar", [PAUSE_IMAGE])
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        blobs = [n for n in tar.getnames() if n.startswith("blobs/")]
    assert [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]] == [PAUSE_IMAGE]
    assert len(blobs) == 3  # manifest, config, the one layer: nothing of busybox
    target = ImageStore(tmp_path / "target")
    (imported,) = import_archive(target, archive)
    assert imported.id == source.get(PAUSE_IMAGE).id and imported.names == [PAUSE_IMAGE]
    with pytest.raises(ImageStoreError, match="not in the store"):
        export_archive(target, tmp_path / "none.tar", [BUSYBOX_IMAGE])


def test_manifest_list_resolves_this_platform(source: ImageStore, tmp_path: Path) -> None:
    busybox = source.get("busybox")
    assert busybox is not None
    os_name, arch = this_platform()
    manifest_size = source.blob_path(busybox.manifest_digest).stat().st_size
    listing = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "e" * 64, "size": 1,
         "platform": {"os": "linux", "architecture": "s390x"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": busybox.manifest_digest,
         "size": manifest_size, "platform": {"os": os_name, "architecture": arch}},
    ]}).encode()
    list_digest = source.put_blob(listing)
    index = {"schemaVersion": 2, "manifests": [{"mediaType": OCI_INDEX, "digest": list_digest, "size": len(listing),
                                                 "annotations": {REF_NAME_ANNOTATION: "example.com/multi:1"}}]}
    target = ImageStore(tmp_path / "target")
    [image] = import_archive(target, export(source, tmp_path / "multi.tar", index=index))
    assert image.names == ["example.com/multi:1"] and image.id == busybox.id


def test_tampered_blob_is_refused(source: ImageStore, tmp_path: Path) -> None:
    busybox = source.get("busybox")
    assert busybox is not None
    archive = export(source, tmp_path / "bad.tar", tamper=busybox.layers[0].digest)
    target = ImageStore(tmp_path / "target")
    with pytest.raises(ImageStoreError, match="digest mismatch"):
        import_archive(target, archive)
    assert target.images() == []


def test_an_unnamed_image_needs_a_name(source: ImageStore, tmp_path: Path) -> None:
    busybox = source.get("busybox")
    assert busybox is not None
    size = source.blob_path(busybox.manifest_digest).stat().st_size
    index = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                 "digest": busybox.manifest_digest, "size": size}]}
    archive = export(source, tmp_path / "unnamed.tar", index=index)
    target = ImageStore(tmp_path / "target")
    with pytest.raises(ImageStoreError, match="--name"):
        import_archive(target, archive)
    [image] = import_archive(target, archive, name="mine/tool:v1")
    assert image.names == ["docker.io/mine/tool:v1"]


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "store")
    assert main(["image", "--root", root, "build-builtins"]) == 0
    assert main(["image", "--root", root, "build-builtins"]) == 0
    assert "already present" in capsys.readouterr().out
    assert main(["image", "--root", root, "ls"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split() == ["IMAGE", "TAG", "IMAGE", "ID", "SIZE"]
    assert {tuple(line.split()[:2]) for line in listing[1:]} == {
        ("docker.io/library/busybox", "latest"), ("registry.k8s.io/pause", "3.10.1")}
    assert main(["image", "--root", root, "import", str(tmp_path / "missing.tar")]) == 1
    assert "missing.tar" in capsys.readouterr().err
