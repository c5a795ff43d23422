"""The kubelet's volume manager for what is mounted rather than written (upstream's
pkg/kubelet/volumemanager with the hostPath, emptyDir, local and CSI plugins): before a
pod's containers start, every volume that needs the node's help is in place —

- hostPath: its `type` checked (Directory, File, Socket, CharDevice, BlockDevice) or made
  (DirectoryOrCreate, FileOrCreate), as upstream's hostPath type checker words it;
- emptyDir with `medium: Memory`: a tmpfs, sized by `sizeLimit` or else the pod's memory
  limit (when every container has one);
- persistentVolumeClaim: the claim must be Bound; its volume is a host path (hostPath and
  local volumes) or staged and published by its CSI driver (kubelet.csi);

and after the pod is gone everything is taken down again — CSI volumes unpublished (and
unstaged when no other pod here uses them), tmpfs unmounted — before the pod's directory
is removed. Nothing is ever deleted under a mount point. A pod directory the kubelet finds
without a pod (deleted while it was down) is cleaned the same way.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubelet.csi import CSIDrivers, CSIError
from kubelet.podconfig import EMPTY_DIR, PodPaths
from kubelet.volumeownership import set_volume_ownership
from kubelet.volumes import MountError
from kubeling import errors, mounts
from kubeling.client import Client
from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import core_pb2

__all__ = ["VolumeManager", "check_host_path", "disk_usage"]

log = logging.getLogger(__name__)

_KINDS = {"Directory": (stat.S_ISDIR, "a directory"), "File": (stat.S_ISREG, "a file"),
          "Socket": (stat.S_ISSOCK, "a socket file"), "CharDevice": (stat.S_ISCHR, "a character device"),
          "BlockDevice": (stat.S_ISBLK, "a block device")}


def check_host_path(path: str, kind: str) -> None:
    """Upstream's hostPath type checker: make what *OrCreate asks for, check the rest."""
    target = Path(path)
    if kind == "DirectoryOrCreate":
        if not target.exists():
            target.mkdir(mode=0o755, parents=True)
        kind = "Directory"
    elif kind == "FileOrCreate":
        if not target.exists():
            try:
                target.touch(mode=0o644)
            except OSError as exc:
                raise MountError(f"hostPath type check failed: {path}: {exc.strerror}") from None
        kind = "File"
    if kind not in _KINDS:
        return  # "" : no check, as upstream
    test, what = _KINDS[kind]
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise MountError(f"hostPath type check failed: {path} is not {what}") from None
    if not test(mode):
        raise MountError(f"hostPath type check failed: {path} is not {what}")


def disk_usage(path: Path) -> int:
    """Bytes the files under path take on disk (du's count: allocated blocks), symlinks not followed."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def _memory_size(pod: core_pb2.Pod, volume: core_pb2.Volume) -> int:
    try:
        if volume.emptyDir.HasField("sizeLimit"):
            return parse_quantity(volume.emptyDir.sizeLimit).int_value()
        limits = [c.resources.limits.get("memory") for c in pod.spec.containers]
        if limits and all(limits):
            return sum(parse_quantity(text).int_value() for text in limits if text)
    except QuantityError:
        pass
    return 0  # the kernel's default (half the node's memory)


@dataclass
class VolumeManager:
    client: Client
    paths: PodPaths
    csi: CSIDrivers
    _mounted: dict[str, dict[str, Path]] = field(default_factory=dict)  # pod uid -> volume -> host path
    _owned: set[tuple[str, str]] = field(default_factory=set)  # (pod uid, volume) given to the pod's fsGroup

    def host_paths(self, pod: core_pb2.Pod) -> Mapping[str, Path]:
        """The host paths of the pod's claims, once set up (podconfig mounts them)."""
        return self._mounted.get(pod.metadata.uid, {})

    async def set_up(self, pod: core_pb2.Pod) -> None:
        """Everything the pod's volumes need before its containers (MountError: not yet)."""
        uid = pod.metadata.uid
        done = self._mounted.setdefault(uid, {})
        security = pod.spec.securityContext
        fs_group = security.fsGroup if security.HasField("fsGroup") else None
        for volume in pod.spec.volumes:
            owned: Path | None = None  # the directory fsGroup applies to
            if volume.HasField("hostPath"):
                check_host_path(self.paths.host_path(volume.hostPath.path), volume.hostPath.type)
            elif volume.HasField("emptyDir"):
                owned = directory = self.paths.volume_dir(pod, EMPTY_DIR, volume.name)
                if not directory.exists():
                    directory.mkdir(parents=True)
                    directory.chmod(0o777)  # any user of the pod may write, as upstream's emptyDir
                if volume.emptyDir.medium == "Memory" and not mounts.is_mount_point(directory):
                    try:
                        mounts.tmpfs(directory, size_bytes=_memory_size(pod, volume))
                    except mounts.MountError as exc:
                        raise MountError(str(exc)) from None
            elif volume.HasField("persistentVolumeClaim"):
                if volume.name not in done:
                    done[volume.name], ownership = await self._claim(pod, volume)
                    if not ownership:
                        self._owned.add((uid, volume.name))  # not this volume's to change
                owned = done[volume.name]
            if fs_group is not None and owned is not None and (uid, volume.name) not in self._owned:
                set_volume_ownership(owned, fs_group, policy=security.fsGroupChangePolicy or "Always")
                self._owned.add((uid, volume.name))

    async def _claim(self, pod: core_pb2.Pod, volume: core_pb2.Volume) -> tuple[Path, bool]:
        """The claim's host path, and whether fsGroup may change its files (upstream: local
        volumes, and CSI volumes whose driver's fsGroupPolicy is File — or
        ReadWriteOnceWithFSType with an fsType and ReadWriteOnce — mounted writable;
        never hostPath)."""
        namespace, name = pod.metadata.namespace, volume.persistentVolumeClaim.claimName
        try:
            claim = await self.client.persistentvolumeclaims.get(name, namespace)
        except errors.NotFound:
            raise MountError(f'persistentvolumeclaim "{name}" not found') from None
        if claim.metadata.HasField("deletionTimestamp"):
            raise MountError(f"error processing PVC {namespace}/{name}: PVC is being deleted")
        if claim.status.phase != "Bound" or not claim.spec.volumeName:
            raise MountError(f'PVC {namespace}/{name} has non-bound phase ("{claim.status.phase}") or empty '
                             f'pvc.Spec.VolumeName ("{claim.spec.volumeName}")')
        try:
            pv = await self.client.persistentvolumes.get(claim.spec.volumeName)
        except errors.NotFound:
            raise MountError(f'persistentvolume "{claim.spec.volumeName}" not found') from None
        if pv.spec.claimRef.uid != claim.metadata.uid:
            raise MountError(f"error processing PVC {namespace}/{name}: PV {pv.metadata.name} is bound to another "
                             f"claim ({pv.spec.claimRef.namespace}/{pv.spec.claimRef.name})")
        read_only = volume.persistentVolumeClaim.readOnly
        ownership = False
        if pv.spec.HasField("csi"):
            try:
                path = await self.csi.set_up(pod.metadata.uid, pv, read_only)
            except CSIError as exc:
                raise MountError(str(exc)) from None
            policy = await self._fs_group_policy(pv.spec.csi.driver)
            ownership = not read_only and not pv.spec.csi.readOnly and (
                policy == "File" or (policy == "ReadWriteOnceWithFSType" and bool(pv.spec.csi.fsType)
                                     and "ReadWriteOnce" in pv.spec.accessModes))
        elif pv.spec.HasField("hostPath"):
            check_host_path(pv.spec.hostPath.path, pv.spec.hostPath.type)
            path = Path(pv.spec.hostPath.path)
        elif pv.spec.HasField("local"):
            check_host_path(pv.spec.local.path, "")
            path = Path(pv.spec.local.path)
            if not path.exists():
                raise MountError(f"local volume {pv.metadata.name}: path {path} does not exist")
            ownership = not read_only
        else:
            raise MountError(f"persistentvolume {pv.metadata.name}: no volume source this kubelet can mount")
        log.info("pod %s/%s: volume %s (claim %s, %s) at %s", namespace, pod.metadata.name, volume.name, name,
                 pv.metadata.name, path)
        return path, ownership

    async def _fs_group_policy(self, driver: str) -> str:
        """The driver's CSIDriver fsGroupPolicy (upstream's default when it has none)."""
        found = await self.csi.driver_object(driver)
        return found.spec.fsGroupPolicy if found is not None and found.spec.fsGroupPolicy else \
            "ReadWriteOnceWithFSType"

    async def tear_down(self, uid: str) -> bool:
        """Take down what the pod's volumes mounted; True when nothing is mounted under its
        directory any more (then it may be removed)."""
        pod_dir = self.paths.pods_dir / uid
        try:
            await self.csi.tear_down(uid)
        except CSIError as exc:
            log.warning("pod %s: volumes not torn down yet (retried): %s", uid, exc)
        empty = pod_dir / "volumes" / EMPTY_DIR
        for directory in sorted(empty.iterdir()) if empty.is_dir() else []:
            if mounts.is_mount_point(directory):
                try:
                    mounts.unmount(directory)
                except mounts.MountError as exc:
                    log.warning("pod %s: %s", uid, exc)
        self._mounted.pop(uid, None)
        self._owned = {o for o in self._owned if o[0] != uid}
        left = mounts.mount_points(pod_dir) if pod_dir.exists() else []
        if left:
            log.warning("pod %s: still mounted under its directory (kept): %s", uid, ", ".join(map(str, left)))
        return not left

    async def remove_pod_dir(self, uid: str) -> bool:
        """Tear down, then remove the pod's directory if nothing is mounted in it."""
        if not await self.tear_down(uid):
            return False
        shutil.rmtree(self.paths.pods_dir / uid, ignore_errors=True)
        return True

    async def clean_orphans(self, known: set[str]) -> None:
        """Pod directories of pods neither the API nor the runtime has (upstream's
        cleanupOrphanedPodDirs): volumes down, then the directory."""
        if not self.paths.pods_dir.is_dir():
            return
        for pod_dir in sorted(self.paths.pods_dir.iterdir()):
            if pod_dir.is_dir() and pod_dir.name not in known:
                if await self.remove_pod_dir(pod_dir.name):
                    log.info("orphaned pod directory %s removed", pod_dir.name)
