"""fsGroup ownership of a volume's files (kubelet.volumeownership), as upstream's SetVolumeOwnership."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kubelet.volumeownership import set_volume_ownership


def test_files_and_directories_get_the_group_and_its_bits(tmp_path: Path) -> None:
    root = tmp_path / "vol"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("x")
    (root / "sub" / "f").chmod(0o600)
    (root / "link").symlink_to("/etc/hostname")
    os.chmod(root, 0o700)
    set_volume_ownership(root, 4321)
    for path in (root, root / "sub", root / "sub" / "f"):
        assert os.lstat(path).st_gid == 4321
    assert stat.S_IMODE(os.stat(root / "sub" / "f").st_mode) == 0o660
    assert stat.S_IMODE(os.stat(root / "sub").st_mode) & (stat.S_ISGID | 0o070) == stat.S_ISGID | 0o070
    assert os.lstat(root / "link").st_gid == 4321 and os.stat("/etc/hostname").st_gid != 4321  # not followed
    read_only = tmp_path / "ro"
    read_only.mkdir()
    (read_only / "key").write_text("v")
    (read_only / "key").chmod(0o400)
    set_volume_ownership(read_only, 4321, readonly=True)
    assert stat.S_IMODE(os.stat(read_only / "key").st_mode) == 0o440


def test_on_root_mismatch_leaves_a_volume_whose_root_is_right(tmp_path: Path) -> None:
    root = tmp_path / "vol"
    root.mkdir()
    set_volume_ownership(root, 4321)
    (root / "later").write_text("x")
    os.chown(root / "later", -1, 0)  # (the setgid root would have given it the group)
    set_volume_ownership(root, 4321, policy="OnRootMismatch")  # the root is right: not walked
    assert os.stat(root / "later").st_gid != 4321
    set_volume_ownership(root, 4321)
    assert os.stat(root / "later").st_gid == 4321
