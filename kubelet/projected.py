"""Projected volumes (upstream's pkg/volume/projected with the kubelet's token manager,
pkg/kubelet/token): the files of a pod's `projected` volumes written under its volume
directory before its containers start, and kept current while it runs.

- serviceAccountToken: a TokenRequest for the pod's ServiceAccount, bound to the pod;
  asked again once 80% of its lifetime has passed or it is older than 24 h, as upstream.
- configMap `kube-root-ca.crt` (what the ServiceAccount admission plugin projects): the
  cluster CA this kubelet trusts the apiserver by. Other ConfigMaps are not mounted yet
  (issue 20): such a pod does not start (FailedMount).
- downwardAPI: metadata.name, metadata.namespace, metadata.uid.

Files are replaced whole (written beside, then renamed), so a reader inside the
container sees the old token or the new one, never half of one.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubelet.podconfig import PodPaths
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2

__all__ = ["ProjectedVolumes", "MountError", "PLUGIN"]

log = logging.getLogger(__name__)

PLUGIN = "kubernetes.io~projected"
ROOT_CA = "kube-root-ca.crt"
_REFRESH_AT = 0.8
_MAX_AGE = 24 * 3600


class MountError(Exception):
    """A volume cannot be made (the pod waits in ContainerCreating, as upstream's FailedMount)."""


@dataclass
class _Token:
    token: str
    issued: float
    expires: float

    def stale(self, now: float) -> bool:
        return now >= self.issued + _REFRESH_AT * (self.expires - self.issued) or now - self.issued > _MAX_AGE


@dataclass
class ProjectedVolumes:
    client: Client
    paths: PodPaths
    ca: bytes  # the cluster CA (empty: this kubelet talks plain text and has none)
    _tokens: dict[tuple[str, str, str], _Token] = field(default_factory=dict)  # (pod uid, volume, path)

    async def ensure(self, pod: core_pb2.Pod) -> None:
        for volume in pod.spec.volumes:
            if volume.HasField("projected"):
                await self._volume(pod, volume)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._tokens if k[0] == uid]:
            del self._tokens[key]

    async def _volume(self, pod: core_pb2.Pod, volume: core_pb2.Volume) -> None:
        target = self.paths.volume_dir(pod, PLUGIN, volume.name)
        target.mkdir(parents=True, exist_ok=True)
        default_mode = volume.projected.defaultMode if volume.projected.HasField("defaultMode") else 0o644
        for source in volume.projected.sources:
            if source.HasField("serviceAccountToken"):
                projection = source.serviceAccountToken
                token = await self._token(pod, volume.name, projection)
                _write(target / projection.path, token.encode(), default_mode)
            elif source.HasField("configMap"):
                config_map = source.configMap
                if config_map.name != ROOT_CA:
                    if config_map.HasField("optional") and config_map.optional:
                        continue
                    raise MountError(f'configmap "{config_map.name}": ConfigMap volumes are not mounted yet')
                for item in config_map.items or [core_pb2.KeyToPath(key="ca.crt", path="ca.crt")]:
                    if item.key == "ca.crt":
                        _write(target / item.path, self.ca, item.mode if item.HasField("mode") else default_mode)
            elif source.HasField("downwardAPI"):
                for file in source.downwardAPI.items:
                    value = {"metadata.name": pod.metadata.name, "metadata.namespace": pod.metadata.namespace,
                             "metadata.uid": pod.metadata.uid}.get(file.fieldRef.fieldPath)
                    if value is None:
                        raise MountError(f"downwardAPI {file.fieldRef.fieldPath!r} is not supported")
                    _write(target / file.path, value.encode(), file.mode if file.HasField("mode") else default_mode)

    async def _token(self, pod: core_pb2.Pod, volume: str,
                     projection: core_pb2.ServiceAccountTokenProjection) -> str:
        key = (pod.metadata.uid, volume, projection.path)
        now = time.time()
        held = self._tokens.get(key)
        if held is not None and not held.stale(now):
            return held.token
        try:
            answer = await self.client.serviceaccounts.create_token(
                pod.spec.serviceAccountName or "default", pod.metadata.namespace,
                audiences=[projection.audience] if projection.audience else None,
                expiration_seconds=projection.expirationSeconds if projection.HasField("expirationSeconds") else 3600,
                bound_pod=pod)
        except errors.ApiError as err:
            if held is not None and now < held.expires:
                log.warning("pod %s/%s: token refresh failed (%s); keeping the current one",
                            pod.metadata.namespace, pod.metadata.name, err.message)
                return held.token
            raise MountError(f"failed to fetch token: {err.message}") from None
        self._tokens[key] = _Token(answer.status.token, now, float(answer.status.expirationTimestamp.seconds))
        return answer.status.token


def _write(path: Path, data: bytes, mode: int) -> None:
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode & 0o777)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode & 0o777)
    os.replace(tmp, path)
