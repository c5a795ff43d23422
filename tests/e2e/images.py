"""Images built here for the e2e tests, as a developer's own: no registry outside is reachable."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
from pathlib import Path

__all__ = ["docker_archive"]


def docker_archive(path: Path, name: str, files: dict[str, str] | None = None) -> None:
    """What `docker save NAME` writes (manifest.json, the config, one layer), for an image
    of one static busybox (the host's busybox-static) and `files` (path -> text)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        tar.add("/bin/busybox", arcname="bin/busybox")
        for member, text in (files or {}).items():
            body = text.encode()
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
