"""The images the CRI validation suite (critest 1.36) pulls by name, made here from
Debian's busybox-static: it names them in pkg/validate/consts.go and its image tests,
and none of their registries is reachable from these machines.

Every image is a busybox layer (applets as hard links, as in the official busybox
image: masking /bin/ls must not mask busybox itself) plus a small layer of its own
(users and groups, a web page, a marker that makes each image's id its own). The
suite's expectations shape them: users by uid, by name, uid:group, name:group; a user
in a group the image defines; tags that share one image and tags that do not; the
same pause image under two registries; web servers (busybox httpd) on port 80, and
on 12003 for the host-network one; an nginx look-alike (a process named nginx whose
title says "master process", with /var/run/nginx.pid); `pgrep` and `ipcs`, which
Debian's busybox lacks; and a setuid-root program printing its effective uid for the
no_new_privs specs (compiled here: it needs gcc with a static libc).
`gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700…` cannot be made: its
digest pins content from upstream's registry.

The suite's default test image uses Debian's regular busybox (fetched with `apt-get
download`; it conflicts with busybox-static, so it is not installed), with the libraries
it links copied from this machine: its shell runs commands from PATH as the upstream
test image's does, where busybox-static's runs its applets in-process (so masking
/bin/ls could not be seen). Without apt, busybox-static stands in.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import platform
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

REGISTRY = "gcr.io/k8s-staging-cri-tools"
E2E = "registry.k8s.io/e2e-test-images"
DEFAULT_IMAGE = f"{E2E}/busybox:1.29-2"
WEB_SERVER_IMAGE = f"{E2E}/nginx:1.14-2"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())

PASSWD = (b"root:x:0:0:root:/root:/bin/sh\n"
          b"www-data:x:33:33:www-data:/var/www:/bin/false\n"
          b"default-user:x:1000:1000:default user:/home/default-user:/bin/sh\n"
          b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
GROUP = (b"root:x:0:\n"
         b"www-data:x:33:\n"
         b"users:x:100:\n"
         b"default-user:x:1000:\n"
         b"group-defined-in-image:x:50000:default-user\n"
         b"nogroup:x:65534:\n")
# pgrep matches process names; busybox's pidof does that much (the suite runs `pgrep sleep`).
PGREP = b"#!/bin/sh\n# pgrep for the CRI validation images: busybox-static has pidof, not pgrep\nexec pidof \"$@\"\n"
SERVE = (b"#!/bin/sh\n# A web server for the CRI validation images: busybox httpd on port $1.\n"
         b"echo \"httpd: serving /www on port $1\"\nexec httpd -f -v -p \"$1\" -h /www\n")
INDEX = b"<html><body><h1>kubeling critest web server</h1></body></html>\n"
# nginx as the suite probes it: `pidof nginx` finds it (a script's process is named after
# the script), /proc/<pid>/cmdline says "master process", the pid file names it.
NGINX = (b"#!/bin/sh\n# An nginx look-alike for the CRI validation images: busybox httpd on port 80.\n"
         b"echo $$ > /var/run/nginx.pid\necho \"nginx: serving /www on port 80\"\n"
         b"httpd -f -v -p 80 -h /www & child=$!\ntrap 'kill $child; exit 0' TERM INT\nwait $child\n")
IPCS = (b"#!/bin/sh\n# ipcs -m for the CRI validation images: the shared memory segments of this IPC namespace\n"
        b"echo '------ Shared Memory Segments --------'\necho 'key        shmid      owner      perms      bytes'\n"
        b"awk 'NR > 1 {print $1, $2, $8, $3, $4}' /proc/sysvipc/shm\n")
NONEWPRIVS_C = b"""#include <stdio.h>
#include <unistd.h>
/* Installed setuid root: without no_new_privs it runs as root. */
int main(void) { printf("Effective uid: %d\\n", (int)geteuid()); return 0; }
"""


@dataclass(frozen=True)
class TestImage:
    names: tuple[str, ...]  # every reference it is pushed under
    marker: str  # /etc/critest-image: makes the image (and its id) distinct
    config: dict[str, object] = field(default_factory=dict)


def _web(port: int) -> dict[str, object]:
    return {"Entrypoint": ["/usr/local/bin/serve", str(port)], "ExposedPorts": {f"{port}/tcp": {}}}


NGINX_CONFIG: dict[str, object] = {"Entrypoint": ["/usr/sbin/nginx", "nginx: master process nginx -g daemon off;"],
                                   "ExposedPorts": {"80/tcp": {}}, "StopSignal": "SIGTERM"}
NONEWPRIVS_IMAGE = f"{E2E}/nonewprivs:1.3"


IMAGES = (
    TestImage((DEFAULT_IMAGE,), "default test image", {"Cmd": ["sh"]}),
    TestImage((WEB_SERVER_IMAGE,), "web server", NGINX_CONFIG),
    TestImage((f"{E2E}/httpd:2.4.39-4",), "httpd", _web(80)),
    TestImage((f"{REGISTRY}/hostnet-nginx-{GOARCH}",), "host network web server", _web(12003)),
    TestImage((f"{REGISTRY}/test-image-user-uid",), "user uid", {"Cmd": ["sh"], "User": "1002"}),
    TestImage((f"{REGISTRY}/test-image-user-username",), "user name", {"Cmd": ["sh"], "User": "www-data"}),
    TestImage((f"{REGISTRY}/test-image-user-uid-group",), "user uid:group", {"Cmd": ["sh"], "User": "1003:users"}),
    TestImage((f"{REGISTRY}/test-image-user-username-group",), "user name:group",
              {"Cmd": ["sh"], "User": "www-data:www-data"}),
    TestImage((f"{REGISTRY}/test-image-predefined-group",), "predefined group", {"Cmd": ["sh"], "User": "1000"}),
    TestImage((f"{REGISTRY}/test-image-latest:latest",), "latest", {"Cmd": ["sh"]}),
    TestImage((f"{REGISTRY}/test-image-tag:test",), "tag test", {"Cmd": ["sh"]}),
    TestImage((f"{REGISTRY}/test-image-tag:all",), "tag all", {"Cmd": ["sh"]}),
    TestImage((f"{REGISTRY}/test-image-1:latest",), "one", {"Cmd": ["sh"]}),
    TestImage((f"{REGISTRY}/test-image-2:latest",), "two", {"Cmd": ["sh"]}),
    TestImage((f"{REGISTRY}/test-image-3:latest",), "three", {"Cmd": ["sh"]}),
    TestImage(tuple(f"{REGISTRY}/test-image-tags:{i}" for i in (1, 2, 3)), "three tags", {"Cmd": ["sh"]}),
    TestImage(("registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"), "pause 3.9",
              {"Entrypoint": ["/bin/sleep", "infinity"]}),
    TestImage((NONEWPRIVS_IMAGE,), "no new privileges", {"Entrypoint": ["/usr/local/bin/nnp"]}),
)
REGISTRIES = sorted({name.split("/", 1)[0] for image in IMAGES for name in image.names})


def _tar(files: dict[str, tuple[int, bytes]], links: dict[str, str] | None = None,
         symlinks: dict[str, str] | None = None) -> bytes:
    """A layer: files (mode, content), owned by root; hard links and symlinks (name -> target)."""
    buf = io.BytesIO()
    names = [*files, *(links or {}), *(symlinks or {})]
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({"/".join(name.split("/")[:i]) for name in names for i in range(1, name.count("/") + 1)})
        for directory in dirs:
            info = tarfile.TarInfo(directory + "/")
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        for name, (mode, data) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.mode, info.size = mode, len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in sorted((links or {}).items()):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = tarfile.LNKTYPE, target, 0o755
            tar.addfile(info)
        for name, target in sorted((symlinks or {}).items()):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            tar.addfile(info)
    return buf.getvalue()


def busybox_layer(busybox: Path, libraries: list[Path] | None = None) -> bytes:
    """busybox with every applet a hard link to it, as the official busybox image has them
    (and, for a dynamic one, the libraries it links, at their paths)."""
    listing = subprocess.run([str(busybox), "--list-full"], check=True, capture_output=True, text=True).stdout
    applets = sorted({line.strip() for line in listing.splitlines() if "/" in line} - {"bin/busybox"})
    extra = {str(lib.resolve()).lstrip("/"): (0o755, lib.resolve().read_bytes()) for lib in libraries or []}
    symlinks = {str(lib).lstrip("/"): str(lib.resolve()) for lib in libraries or [] if lib.resolve() != lib}
    files = {**extra, "bin/busybox": (0o755, busybox.read_bytes()), "etc/passwd": (0o644, PASSWD),
             "etc/group": (0o644, GROUP), "tmp/.keep": (0o644, b""), "var/run/.keep": (0o644, b""),
             "root/.keep": (0o644, b""), "proc/.keep": (0o644, b""), "sys/.keep": (0o644, b""),
             "dev/.keep": (0o644, b"")}
    return _tar(files, {applet: "bin/busybox" for applet in applets}, symlinks)


def dynamic_busybox(work: Path) -> tuple[Path, list[Path]] | None:
    """Debian's non-static busybox and the host libraries it needs, or None without apt."""
    try:
        subprocess.run(["apt-get", "download", "busybox"], cwd=work, check=True, capture_output=True, timeout=120)
        [deb] = work.glob("busybox_*.deb")
        subprocess.run(["dpkg", "-x", str(deb), str(work / "busybox-deb")], check=True, capture_output=True)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    binary = work / "busybox-deb" / "bin" / "busybox"
    listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    libraries = [Path(part) for line in listing.splitlines() for part in line.split() if part.startswith("/")]
    return binary, libraries


def nonewprivs_program(work: Path) -> bytes:
    """The setuid program of the no_new_privs image, compiled statically with gcc."""
    source, binary = work / "nnp.c", work / "nnp"
    source.write_bytes(NONEWPRIVS_C)
    try:
        subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(source)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeError(f"the nonewprivs image needs gcc and a static libc (apt-get install gcc libc6-dev): "
                           f"{exc}") from None
    return binary.read_bytes()


class Layout:
    """An OCI image layout (what skopeo copies from: `oci:DIR:REF`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        self.manifests: list[dict[str, object]] = []

    def blob(self, data: bytes) -> tuple[str, int]:
        digest = hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / "sha256" / digest).write_bytes(data)
        return f"sha256:{digest}", len(data)

    def add(self, ref: str, layers: list[bytes], config: dict[str, object]) -> None:
        described = []
        diff_ids = []
        for layer in layers:
            diff_ids.append("sha256:" + hashlib.sha256(layer).hexdigest())
            buf = io.BytesIO()
            with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
                gz.write(layer)
            digest, size = self.blob(buf.getvalue())
            described.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest,
                              "size": size})
        config_digest, config_size = self.blob(json.dumps({
            "architecture": GOARCH, "os": "linux", "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids}}, sort_keys=True).encode())
        manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                          "digest": config_digest, "size": config_size},
                               "layers": described}, sort_keys=True).encode()
        digest, size = self.blob(manifest)
        self.manifests.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
                               "size": size, "annotations": {"org.opencontainers.image.ref.name": ref}})
        (self.root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": self.manifests}))


def build(root: Path, busybox: Path = Path("/bin/busybox")) -> dict[str, tuple[str, ...]]:
    """Every test image into an OCI layout at root: {layout ref: the names to push it as}."""
    layout = Layout(root)
    base = busybox_layer(busybox)
    dynamic = dynamic_busybox(root.parent)
    default_base = busybox_layer(*dynamic) if dynamic else base
    nnp = nonewprivs_program(root.parent)
    refs: dict[str, tuple[str, ...]] = {}
    for index, image in enumerate(IMAGES):
        files = {"etc/passwd": (0o644, PASSWD), "etc/group": (0o644, GROUP), "bin/pgrep": (0o755, PGREP),
                 "usr/bin/ipcs": (0o755, IPCS), "usr/sbin/nginx": (0o755, NGINX),
                 "usr/local/bin/serve": (0o755, SERVE), "www/index.html": (0o644, INDEX),
                 "etc/critest-image": (0o644, image.marker.encode() + b"\n")}
        if image.names[0] == NONEWPRIVS_IMAGE:
            files["usr/local/bin/nnp"] = (0o4755, nnp)  # setuid root
        ref = f"image-{index}"
        layers = [default_base if image.names[0] == DEFAULT_IMAGE else base, _tar(files)]
        layout.add(ref, layers, {"Env": [PATH_ENV], "WorkingDir": "/", **image.config})
        refs[ref] = image.names
    return refs
