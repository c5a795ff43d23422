"""A private containerd (Debian's, with its CRI plugin) for side-by-side benchmarks: its
own config, root, state, socket and CNI config under a work directory, nothing of the
machine's (no /etc/containerd, no /var/lib/containerd, no fixed port: the CRI stream
server takes a free loopback port). Our built-in busybox and pause images go in with
`ctr images import`, under the same names our runtime uses.

    async with private_containerd(work, conflist) as endpoint:  # "unix:///…/containerd.sock"

At the end: containerd stopped (by its pid), mounts left under the work directory
unmounted, the k8s.io cgroups it made removed when empty (in every hierarchy: cgroup v1
has one per controller), and the directories it makes
outside (shim sockets, runc roots, the CNI cache) removed when this run made them and
nothing is left in them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

from cri.images.archive import export_archive
from cri.images.builtin import BUSYBOX_IMAGE, PAUSE_IMAGE, build_builtins
from cri.images.store import ImageStore

__all__ = ["ContainerdError", "ensure_installed", "private_containerd"]

NAMESPACE = "k8s.io"  # the CRI plugin's containerd namespace
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Made by containerd wherever its config points: the shims' sockets and runc roots, and
# the CNI result cache of its CNI library.
FIXED_DIRS = (Path("/run/containerd"), Path("/var/lib/cni"))


class ContainerdError(RuntimeError):
    """containerd is missing or would not start."""


def ensure_installed() -> None:
    """Install Debian's containerd when it is missing (as root, from apt)."""
    if shutil.which("containerd") and shutil.which("ctr"):
        return
    result = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "containerd"],
                            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, capture_output=True, text=True)
    if result.returncode != 0 or not shutil.which("containerd"):
        raise ContainerdError(f"apt-get install containerd failed: {result.stderr.strip()[-500:]}")


def _config(work: Path, cni_conf_dir: Path) -> str:
    # restrict_oom_score_adj: this VM lacks CAP_SYS_RESOURCE, lowering a sandbox's
    # oom_score_adj fails and runc dies at sandbox start (../shared/MACHINE-FACTS.md).
    return f"""version = 2
root = "{work / 'root'}"
state = "{work / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{work / 'containerd.sock'}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{work / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf_dir}"
"""


def _mounts_under(root: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            out.append(point)
    return out


def _import_images(work: Path, socket: Path) -> None:
    store = ImageStore(work / "images")
    build_builtins(store)
    archive = export_archive(store, work / "images.tar", [PAUSE_IMAGE, BUSYBOX_IMAGE])
    result = subprocess.run(["ctr", "--address", str(socket), "--namespace", NAMESPACE, "images", "import",
                             str(archive)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise ContainerdError(f"ctr images import: {result.stderr.strip()}")


async def _wait_ready(process: subprocess.Popen[bytes], socket: Path, log: Path) -> None:
    for _ in range(300):
        if process.poll() is not None:
            raise ContainerdError(f"containerd exited ({process.returncode}): {log.read_text()[-2000:]}")
        if socket.exists():
            check = await asyncio.create_subprocess_exec("ctr", "--address", str(socket), "version",
                                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if await check.wait() == 0:
                return
        await asyncio.sleep(0.1)
    raise ContainerdError(f"containerd did not answer on {socket} within 30 s")


@contextlib.asynccontextmanager
async def private_containerd(work: Path, conflist: str) -> AsyncIterator[str]:
    """containerd on a socket under work, pods networked by conflist (a CNI conflist's
    JSON); yields the CRI endpoint."""
    ensure_installed()
    work.mkdir(parents=True, exist_ok=True)
    conf_dir = work / "net.d"
    conf_dir.mkdir()
    (conf_dir / "10-bench.conflist").write_text(conflist)
    (work / "config.toml").write_text(_config(work, conf_dir))
    socket, log = work / "containerd.sock", work / "containerd.log"
    made = [d for d in FIXED_DIRS if not d.exists()]
    cgroups_before = set(_namespace_cgroups())
    with log.open("wb") as out:
        process = subprocess.Popen(["containerd", "--config", str(work / "config.toml")], stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        await _wait_ready(process, socket, log)
        await asyncio.to_thread(_import_images, work, socket)
        yield f"unix://{socket}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for point in sorted(_mounts_under(work), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
        for cgroup in set(_namespace_cgroups()) - cgroups_before:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        for top in made:
            _remove_empty_tree(top)


def _namespace_cgroups() -> list[Path]:
    """The k8s.io cgroup directories: one under the v2 root, or one per v1 hierarchy."""
    candidates = [CGROUP_ROOT / NAMESPACE, *(d / NAMESPACE for d in CGROUP_ROOT.iterdir() if d.is_dir())]
    return [c for c in candidates if c.is_dir()]


def _remove_empty_tree(top: Path) -> None:
    """Remove top and the directories below it, deepest first, as long as they are empty."""
    if not top.is_dir():
        return
    for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()
