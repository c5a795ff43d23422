"""Built-in images made from the host's own binaries: no registry needed.

`docker.io/library/busybox:latest` is one layer: /bin/busybox (Debian's
busybox-static), a symlink per applet, a minimal /etc/passwd and /etc/group.
`registry.k8s.io/pause:3.10.1` is one file, /pause: Debian's static `catatonit`,
run as `/pause -P`, its pause mode. Like upstream's pause it holds the sandbox's
namespaces, reaps the zombies of a shared PID namespace, exits on SIGTERM and is
named `pause` (a `sleep` there would show up in the containers' `pgrep sleep`).

Layers are built deterministically (sorted entries, zero mtimes, gzip without a
timestamp), so the same busybox binary always gives the same image id.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cri.images.platforms import this_platform
from cri.images.store import OCI_CONFIG, OCI_MANIFEST, ImageRecord, ImageStore

BUSYBOX_IMAGE = "docker.io/library/busybox:latest"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
DEFAULT_BUSYBOX = Path("/bin/busybox")
DEFAULT_PAUSE = Path("/usr/bin/catatonit")
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"


class BuiltinError(RuntimeError):
    """A binary a built-in image is made of is missing."""


@dataclass(frozen=True)
class BuiltinImage:
    name: str
    entrypoint: list[str] | None
    cmd: list[str] | None


BUSYBOX = BuiltinImage(BUSYBOX_IMAGE, entrypoint=None, cmd=["sh"])
PAUSE = BuiltinImage(PAUSE_IMAGE, entrypoint=["/pause", "-P"], cmd=None)
BUILTINS = (BUSYBOX, PAUSE)


def _applets(busybox: Path) -> list[str]:
    out = subprocess.run([str(busybox), "--list-full"], check=True, capture_output=True, text=True).stdout
    return sorted({line.strip() for line in out.splitlines() if "/" in line.strip()} - {"bin/busybox"})


def _add(tar: tarfile.TarFile, name: str, *, kind: bytes = tarfile.REGTYPE, mode: int = 0o644,
         data: bytes = b"", target: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
    info.uname = info.gname = "root"
    if kind == tarfile.SYMTYPE:
        info.linkname = target
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def busybox_layer(busybox: Path = DEFAULT_BUSYBOX) -> bytes:
    """The uncompressed tar of the busybox root filesystem."""
    applets = _applets(busybox)
    dirs = {"bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "usr", "var"}
    for applet in applets:
        parts = applet.split("/")[:-1]
        dirs.update("/".join(parts[:i + 1]) for i in range(len(parts)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            _add(tar, d + "/", kind=tarfile.DIRTYPE,
                 mode={"tmp": 0o1777, "root": 0o700}.get(d, 0o755))
        _add(tar, "bin/busybox", mode=0o755, data=busybox.read_bytes())
        _add(tar, "etc/passwd", data=PASSWD)
        _add(tar, "etc/group", data=GROUP)
        for applet in applets:
            _add(tar, applet, kind=tarfile.SYMTYPE, mode=0o777, target="/bin/busybox")
    return buf.getvalue()


def pause_layer(pause: Path = DEFAULT_PAUSE) -> bytes:
    """The uncompressed tar of the pause image: /pause and nothing else."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "pause", mode=0o755, data=pause.read_bytes())
    return buf.getvalue()


def _gzip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(data)
    return buf.getvalue()


def _put_json(store: ImageStore, body: dict[str, object]) -> tuple[str, int]:
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return store.put_blob(data), len(data)


def build_builtins(store: ImageStore, busybox: Path = DEFAULT_BUSYBOX, pause: Path = DEFAULT_PAUSE,
                   only_missing: bool = True) -> list[ImageRecord]:
    """Build the built-in images into store; with only_missing, keep ones already there."""
    wanted = [b for b in BUILTINS if not (only_missing and store.get(b.name) is not None)]
    sources = {BUSYBOX.name: (busybox, "busybox-static", busybox_layer),
               PAUSE.name: (pause, "catatonit", pause_layer)}
    built: list[ImageRecord] = []
    for image in wanted:
        binary, package, make_layer = sources[image.name]
        built.append(build_image(store, image, binary, package, make_layer))
    return built


def build_image(store: ImageStore, image: BuiltinImage, binary: Path, package: str,
                make_layer: Callable[[Path], bytes]) -> ImageRecord:
    """One image of one layer made from a binary of the node (busybox_layer, pause_layer),
    with the image's entrypoint and command, tagged in the store."""
    if not binary.is_file():
        raise BuiltinError(f"{image.name} is made from {binary} (Debian package {package}), which is missing")
    layer = make_layer(binary)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    compressed = _gzip(layer)
    layer_digest = store.put_blob(compressed)
    run_config: dict[str, object] = {"Env": [DEFAULT_PATH], "WorkingDir": "/"}
    if image.entrypoint:
        run_config["Entrypoint"] = image.entrypoint
    if image.cmd:
        run_config["Cmd"] = image.cmd
    config_digest, config_size = _put_json(store, {
        "architecture": this_platform()[1], "os": this_platform()[0], "config": run_config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": f"kubeling image build-builtins from {binary}"}],
    })
    manifest_digest, _ = _put_json(store, {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": LAYER_GZIP, "digest": layer_digest, "size": len(compressed)}],
    })
    return store.tag(image.name, manifest_digest)
