"""The mount table as kubeling.mounts reads it (/proc/self/mountinfo's escapes included)."""

from __future__ import annotations

from pathlib import Path

from kubeling import mounts


def test_mount_points_under_a_prefix_with_escaped_names(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "90 22 8:1 /vol /var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv\\040a/mount rw - ext4 /dev/sda1 rw\n"
        "91 22 0:50 / /var/lib/kubelet-other rw - tmpfs tmpfs rw\n"
        "92 22 0:51 / /var/lib/kubelet rw - tmpfs tmpfs rw\n")
    under = mounts.mount_points(Path("/var/lib/kubelet"), info)
    assert under == [Path("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv a/mount"), Path("/var/lib/kubelet")]
    assert mounts.is_mount_point(Path("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv a/mount"), info)
    assert not mounts.is_mount_point(Path("/var/lib/kubelet/pods"), info)
    assert len(mounts.mount_points(None, info)) == 4

