"""Overlay rootfs mounts from the image store's unpacked layers (real overlayfs)."""

from __future__ import annotations

from pathlib import Path

from kubelet.cri.images.builtin import build_builtins
from kubelet.cri.images.store import ImageStore
from kubelet.cri.rootfs import is_mounted, mount_overlay, unmount


async def test_mount_write_and_unmount(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    build_builtins(store)
    record = store.get("busybox")
    assert record is not None
    layers = store.unpack(record)
    directory = tmp_path / "c1"
    try:
        rootfs = await mount_overlay(layers, directory)
        assert is_mounted(rootfs) and (rootfs / "bin" / "busybox").exists()
        assert await mount_overlay(layers, directory) == rootfs  # already mounted: no second mount
        (rootfs / "tmp" / "new").write_text("x")
        assert (directory / "upper" / "tmp" / "new").exists()
        assert not (layers[0] / "tmp" / "new").exists()
    finally:
        await unmount(directory)
    assert not is_mounted(directory / "rootfs")
    await unmount(directory)  # idempotent
    await unmount(tmp_path / "never-mounted")
