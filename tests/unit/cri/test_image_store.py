"""The OCI-layout image store, layer unpacking and the built-in images."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from cri.images.builtin import BUSYBOX_IMAGE, PAUSE_IMAGE, BuiltinError, build_builtins
from cri.images.store import OCI_CONFIG, OCI_MANIFEST, ImageStore, ImageStoreError
from cri.images.unpack import LayerError

LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "images")


def make_tar(entries: list[tuple[str, str, str | bytes]]) -> bytes:
    """entries: (kind, name, data-or-target) with kind in file/dir/symlink/hardlink."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for kind, name, payload in entries:
            info = tarfile.TarInfo(name)
            data = payload if isinstance(payload, bytes) else b""
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(payload)
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, str(payload)
            else:
                info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return buf.getvalue()


def add_image(store: ImageStore, name: str, layers: list[bytes], *, diff_ids: list[str] | None = None,
              cmd: list[str] | None = None) -> str:
    """Write an uncompressed-layer image into the store; return the manifest digest."""
    descs = [{"mediaType": LAYER_TAR, "digest": store.put_blob(layer), "size": len(layer)} for layer in layers]
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "config": {"Cmd": cmd or ["true"]},
        "rootfs": {"type": "layers",
                   "diff_ids": diff_ids or ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": store.put_blob(config), "size": len(config)},
        "layers": descs,
    }).encode()
    digest = store.put_blob(manifest)
    store.tag(name, digest)
    return digest


def test_blobs_are_verified(store: ImageStore) -> None:
    with pytest.raises(ImageStoreError, match="digest mismatch"):
        store.put_blob(b"content", expected="sha256:" + "0" * 64)
    wrong = "sha256:" + hashlib.sha256(b"other").hexdigest()
    with pytest.raises(ImageStoreError, match="digest mismatch"):
        store.put_blob_stream(io.BytesIO(b"content"), expected=wrong)
    assert not store.has_blob(wrong)
    assert [p.name for p in (store.root / "blobs" / "sha256").iterdir()] == []  # no temp file left
    good = store.put_blob_stream(io.BytesIO(b"content"), expected="sha256:" + hashlib.sha256(b"content").hexdigest())
    assert store.read_blob(good) == b"content"


def test_tag_refuses_an_image_with_missing_layers(store: ImageStore) -> None:
    layer = make_tar([("file", "a", b"1")])
    digest = add_image(store, "app:v1", [layer])
    store.blob_path(store.get("app:v1").layers[0].digest).unlink()
    with pytest.raises(ImageStoreError, match="is not in the store"):
        store.tag("app:v2", digest)


def test_names_ids_and_digests(store: ImageStore) -> None:
    digest = add_image(store, "app:v1", [make_tar([("file", "a", b"1")])])
    store.tag("localhost:5000/app:v1", digest)
    [image] = store.images()
    assert image.repo_tags == ["docker.io/library/app:v1", "localhost:5000/app:v1"]
    assert image.repo_digests == [f"docker.io/library/app@{digest}", f"localhost:5000/app@{digest}"]
    assert image.id.startswith("sha256:") and image.size > 0
    for lookup in ("app:v1", "docker.io/library/app:v1", image.id, f"app@{digest}", f"localhost:5000/app@{digest}"):
        found = store.get(lookup)
        assert found is not None and found.id == image.id, lookup
    assert store.get("app:v2") is None
    assert store.get(f"other@{digest}") is None
    # A new store on the same directory (a restart) sees the same images.
    again = ImageStore(store.root).get("app:v1")
    assert again is not None and again.names == image.names


def test_retag_moves_the_name(store: ImageStore) -> None:
    add_image(store, "app:latest", [make_tar([("file", "a", b"1")])])
    add_image(store, "app:latest", [make_tar([("file", "a", b"2")])], cmd=["other"])
    [image] = store.images()
    assert image.run_config["Cmd"] == ["other"]


def test_remove_drops_every_name_and_unshared_blobs(store: ImageStore) -> None:
    shared = make_tar([("file", "shared", b"s")])
    own = make_tar([("file", "own", b"o")])
    digest = add_image(store, "app:v1", [shared, own])
    store.tag("app:also", digest)
    add_image(store, "keep:v1", [shared])
    before = store.get("app:v1")
    assert before is not None
    assert store.remove("app:also")
    assert store.get("app:v1") is None and store.get("app:also") is None
    assert not store.has_blob(before.layers[1].digest) and not store.has_blob(before.id)
    assert store.has_blob(before.layers[0].digest)  # still used by keep:v1
    kept = store.get("keep:v1")
    assert kept is not None and store.unpack(kept)
    assert not store.remove("app:v1")  # already gone: no error, nothing removed


def test_unpack_layers_with_whiteouts(store: ImageStore) -> None:
    lower = make_tar([("dir", "etc", ""), ("file", "etc/gone", b"x"), ("dir", "data", ""),
                      ("file", "data/old", b"x"), ("file", "bin/tool", b"t"), ("hardlink", "bin/alias", "bin/tool")])
    upper = make_tar([("file", "etc/.wh.gone", b""), ("dir", "data", ""), ("file", "data/.wh..wh..opq", b""),
                      ("file", "data/new", b"n"), ("symlink", "etc/link", "/etc/passwd")])
    add_image(store, "layered", [lower, upper])
    image = store.get("layered")
    assert image is not None
    bottom, top = store.unpack(image)
    assert (bottom / "bin/alias").read_bytes() == b"t" and os.stat(bottom / "bin/alias").st_nlink == 2
    gone = os.lstat(top / "etc/gone")
    assert stat.S_ISCHR(gone.st_mode) and gone.st_rdev == os.makedev(0, 0)
    assert os.getxattr(top / "data", "trusted.overlay.opaque") == b"y"
    assert not (top / "data/.wh..wh..opq").exists() and (top / "data/new").read_bytes() == b"n"
    assert os.readlink(top / "etc/link") == "/etc/passwd"  # absolute symlinks are the image's own
    # Unpacked once: a second unpack reuses the directories.
    marker = top / "marker"
    marker.write_text("kept")
    assert store.unpack(image)[1] == top and marker.exists()


@pytest.mark.parametrize("entries", [
    [("file", "../escape", b"x")],
    [("symlink", "evil", "/tmp"), ("file", "evil/escape", b"x")],
    [("hardlink", "passwd", "../../../../etc/passwd")],
])
def test_unpack_refuses_entries_outside_the_layer(store: ImageStore, tmp_path: Path,
                                                  entries: list[tuple[str, str, str | bytes]]) -> None:
    add_image(store, "evil", [make_tar(entries)])
    image = store.get("evil")
    assert image is not None
    with pytest.raises(LayerError):
        store.unpack(image)
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape").exists()
    assert [p.name for p in (store.root / "layers" / "sha256").iterdir()] == []


def test_unpack_refuses_a_layer_that_does_not_match_its_diff_id(store: ImageStore) -> None:
    layer = make_tar([("file", "a", b"1")])
    add_image(store, "lying", [layer], diff_ids=["sha256:" + "1" * 64])
    image = store.get("lying")
    assert image is not None
    with pytest.raises(LayerError, match="does not match diff id"):
        store.unpack(image)
    assert [p.name for p in (store.root / "layers" / "sha256").iterdir()] == []


def test_gzip_layers(store: ImageStore) -> None:
    raw = make_tar([("file", "hello", b"world")])
    packed = gzip.compress(raw)
    descs_store = store.put_blob(packed)
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
                         "config": {}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": OCI_CONFIG, "digest": store.put_blob(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": descs_store, "size": len(packed)}]}).encode()
    image = store.tag("gz", store.put_blob(manifest))
    [layer_dir] = store.unpack(image)
    assert (layer_dir / "hello").read_bytes() == b"world"


def test_builtin_images(store: ImageStore, tmp_path: Path) -> None:
    built = build_builtins(store)
    assert {b.repo_tags[0] for b in built} == {BUSYBOX_IMAGE, PAUSE_IMAGE}
    busybox, pause = store.get("busybox"), store.get(PAUSE_IMAGE)
    assert busybox is not None and pause is not None
    assert busybox.run_config["Cmd"] == ["sh"]
    assert pause.run_config["Entrypoint"] == ["/pause", "-P"]  # catatonit's pause mode
    [pause_root] = store.unpack(pause)
    assert sorted(p.name for p in pause_root.iterdir()) == ["pause"]
    assert (pause_root / "pause").read_bytes() == Path("/usr/bin/catatonit").read_bytes()
    [root] = store.unpack(busybox)
    assert os.readlink(root / "bin/sh") == "/bin/busybox"
    assert (root / "bin/busybox").read_bytes() == Path("/bin/busybox").read_bytes()
    assert stat.S_IMODE(os.stat(root / "tmp").st_mode) == 0o1777
    assert (root / "etc/passwd").read_text().startswith("root:x:0:0:")
    # Present images are kept; the build is reproducible (same binary, same ids).
    assert build_builtins(store) == []
    with pytest.raises(BuiltinError, match="catatonit"):
        build_builtins(ImageStore(tmp_path / "none"), pause=tmp_path / "absent")
    other = build_builtins(ImageStore(tmp_path / "other"))
    assert sorted(b.id for b in other) == sorted(b.id for b in built)


def test_unpack_keeps_owners_by_number_and_special_modes(store: ImageStore) -> None:
    """An image's uid 33 named "root" stays 33 (the host's names mean nothing inside the
    image), and modes a data filter would clear (setuid, sticky) stay."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, uid, mode in (("srv", 33, 0o1777), ("srv/tool", 4242, 0o4755)):
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.uname, info.gname, info.mode = uid, uid, "root", "root", mode
            if name == "srv":
                info.type = tarfile.DIRTYPE
            tar.addfile(info, io.BytesIO(b"") if name != "srv" else None)
    add_image(store, "owned", [buf.getvalue()])
    image = store.get("owned")
    assert image is not None
    [root] = store.unpack(image)
    assert (os.stat(root / "srv").st_uid, stat.S_IMODE(os.stat(root / "srv").st_mode)) == (33, 0o1777)
    assert (os.stat(root / "srv/tool").st_uid, stat.S_IMODE(os.stat(root / "srv/tool").st_mode)) == (4242, 0o4755)
