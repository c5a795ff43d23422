"""Overlay rootfs mounts from the image store's unpacked layers (real overlayfs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cri.images.builtin import build_builtins
from cri.images.store import ImageStore
from cri.rootfs import MountError, is_mounted, mount_overlay, unmount


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
        # mountinfo (which every runc call reads) carries short options, not the long paths
        (line,) = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
                   if line.split()[4] == str(rootfs)]
        options = line.split(" - ")[1]
        assert "lowerdir=/proc/self/fd/" in options and str(tmp_path) not in options
    finally:
        await unmount(directory)
    assert not is_mounted(directory / "rootfs")
    await unmount(directory)  # idempotent
    await unmount(tmp_path / "never-mounted")


async def test_a_missing_layer_is_a_mount_error(tmp_path: Path) -> None:
    with pytest.raises(MountError, match="gone"):
        await mount_overlay([tmp_path / "gone"], tmp_path / "c2")
    assert not is_mounted(tmp_path / "c2" / "rootfs")
