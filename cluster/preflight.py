"""What the machine must have before `kubeling up` starts anything."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cluster.etcd import etcd_binary

__all__ = ["preflight"]


def preflight() -> str:
    """The first problem found, as a sentence for the user; "" when there is none."""
    if os.geteuid() != 0:
        return "kubeling up needs root (network namespaces, mounts, runc)"
    for binary in ("runc", "ip", "iptables"):
        if shutil.which(binary) is None:
            return f"{binary} is not installed (run `make up`, or apt-get install runc iproute2 iptables)"
    if not Path("/usr/lib/cni/bridge").exists():
        return "the CNI plugins are missing: apt-get install containernetworking-plugins"
    for path, package in (("/bin/busybox", "busybox-static"), ("/usr/bin/catatonit", "catatonit")):
        if not Path(path).exists():
            return f"{path} is missing (the built-in images are made of it): apt-get install {package}"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containers' root filesystems): modprobe overlay"
    if not Path("/proc/self/ns/net").exists():
        return "the kernel has no network namespaces"
    try:
        etcd_binary()
    except RuntimeError as exc:
        return str(exc)
    return ""
