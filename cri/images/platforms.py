"""This machine's OCI platform, and choosing it from a manifest list (containerd's platform matcher)."""

from __future__ import annotations

import platform
from typing import Any

from cri.images.store import ImageStoreError

_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}


def this_platform() -> tuple[str, str]:
    """(os, architecture) in OCI's words."""
    machine = platform.machine()
    return "linux", _ARCHES.get(machine, machine)


def pick_manifest(index: dict[str, Any], where: str) -> dict[str, Any]:
    """From a manifest list, the entry for this platform."""
    os_name, arch = this_platform()
    for entry in index.get("manifests") or []:
        plat = entry.get("platform") or {}
        if plat.get("os") == os_name and plat.get("architecture") == arch:
            return dict(entry)
    raise ImageStoreError(f"{where} has no image for {os_name}/{arch}")
