"""The files of a pod's volumes that come from the API (upstream's pkg/volume/configmap,
secret, downwardapi and projected, with the kubelet's token manager pkg/kubelet/token),
and the ConfigMap and Secret values its containers' environment names.

Written under the pod's volume directory before its containers start and rewritten at
every sync of the pod (at least every sync period), so that a ConfigMap or Secret updated
under a running pod reaches its files; each write swaps the whole set at once
(`kubelet.atomicwriter`). A missing ConfigMap or Secret that is not `optional` keeps the
pod in ContainerCreating (FailedMount), as upstream.

- serviceAccountToken: a TokenRequest for the pod's ServiceAccount, bound to the pod;
  asked again once 80% of its lifetime has passed or it is older than 24 h, as upstream.
- configMap `kube-root-ca.crt` (what the ServiceAccount admission plugin projects): as
  published by the controller manager's root-CA publisher; until it is, the
  cluster CA this kubelet trusts the apiserver by.
- downwardAPI: metadata.name, namespace, uid, labels and annotations.

Secret values are never logged: errors name the Secret and the key only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubelet.atomicwriter import Payload, write_atomically
from kubelet.node import machine_capacity
from kubelet.podconfig import API_VOLUMES, PodPaths
from kubelet.resourcefield import ResourceFieldError, resource_field_value
from kubelet.volumeownership import set_volume_ownership
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2

__all__ = ["PodVolumes", "MountError", "EnvSources", "PLUGINS"]

log = logging.getLogger(__name__)

PLUGINS = API_VOLUMES
ROOT_CA = "kube-root-ca.crt"
DEFAULT_MODE = 0o644
_REFRESH_AT = 0.8
_MAX_AGE = 24 * 3600

# (kind, name) -> the object's data as text, None when it does not exist.
EnvSources = Mapping[tuple[str, str], Mapping[str, str] | None]


class MountError(Exception):
    """A volume cannot be made (the pod waits in ContainerCreating, as upstream's FailedMount)."""


@dataclass
class _Token:
    token: str
    issued: float
    expires: float

    def stale(self, now: float) -> bool:
        return now >= self.issued + _REFRESH_AT * (self.expires - self.issued) or now - self.issued > _MAX_AGE


def _downward_file(pod: core_pb2.Pod, item: core_pb2.DownwardAPIVolumeFile, allocatable: Mapping[str, str]) -> bytes:
    if item.HasField("resourceFieldRef"):
        try:
            return resource_field_value(pod, "", item.resourceFieldRef, allocatable).encode()
        except ResourceFieldError as exc:
            raise MountError(f"downwardAPI {item.path!r}: {exc}") from None
    return _downward(pod, item.fieldRef.fieldPath)


def _downward(pod: core_pb2.Pod, path: str) -> bytes:
    meta = pod.metadata
    simple = {"metadata.name": meta.name, "metadata.namespace": meta.namespace, "metadata.uid": meta.uid}
    if path in simple:
        return simple[path].encode()
    for prefix, mapping in (("metadata.labels", meta.labels), ("metadata.annotations", meta.annotations)):
        if path == prefix:  # every entry, key="value" per line, sorted (upstream's FormatMap)
            return "\n".join(f'{k}="{v}"' for k, v in sorted(mapping.items())).encode()
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str(mapping.get(path[len(prefix) + 2:-2], "")).encode()
    raise MountError(f"downwardAPI {path!r} is not supported")


@dataclass
class PodVolumes:
    client: Client
    paths: PodPaths
    ca: bytes  # the cluster CA (empty: this kubelet talks plain text and has none)
    allocatable: Mapping[str, str] = field(default_factory=lambda: machine_capacity(0))  # the node's
    _tokens: dict[tuple[str, str, str], _Token] = field(default_factory=dict)  # (pod uid, volume, path)

    async def ensure(self, pod: core_pb2.Pod) -> None:
        security = pod.spec.securityContext
        fs_group = security.fsGroup if security.HasField("fsGroup") else None
        for volume in pod.spec.volumes:
            kind = next((k for k in PLUGINS if volume.HasField(k)), None)
            if kind is None:
                continue
            payload = await self._payload(pod, volume, kind)
            if fs_group is not None:  # the group may read them (the volumes are read-only), as upstream
                payload = {rel: (content, mode | 0o440) for rel, (content, mode) in payload.items()}
            target = self.paths.volume_dir(pod, PLUGINS[kind], volume.name)
            if write_atomically(target, payload):
                if fs_group is not None:
                    set_volume_ownership(target, fs_group, readonly=True)
                log.info("pod %s/%s: volume %s written (%d files)", pod.metadata.namespace, pod.metadata.name,
                         volume.name, len(payload))

    def forget(self, uid: str) -> None:
        for key in [k for k in self._tokens if k[0] == uid]:
            del self._tokens[key]

    # ---------------------------------------------------------------- payloads

    async def _payload(self, pod: core_pb2.Pod, volume: core_pb2.Volume, kind: str) -> Payload:
        namespace = pod.metadata.namespace
        if kind == "configMap":
            source = volume.configMap
            mode = source.defaultMode if source.HasField("defaultMode") else DEFAULT_MODE
            return await self._keys(namespace, "configmaps", source.name, list(source.items), mode, source.optional)
        if kind == "secret":
            secret = volume.secret
            mode = secret.defaultMode if secret.HasField("defaultMode") else DEFAULT_MODE
            return await self._keys(namespace, "secrets", secret.secretName, list(secret.items), mode, secret.optional)
        if kind == "downwardAPI":
            mode = volume.downwardAPI.defaultMode if volume.downwardAPI.HasField("defaultMode") else DEFAULT_MODE
            return {f.path: (_downward_file(pod, f, self.allocatable), f.mode if f.HasField("mode") else mode)
                    for f in volume.downwardAPI.items}
        return await self._projected(pod, volume)

    async def _keys(self, namespace: str, resource: str, name: str, items: list[core_pb2.KeyToPath], mode: int,
                    optional: bool) -> dict[str, tuple[bytes, int]]:
        return self._keys_of(await self._data(namespace, resource, name), namespace, resource, name, items, mode,
                             optional)

    @staticmethod
    def _keys_of(data: dict[str, bytes] | None, namespace: str, resource: str, name: str,
                 items: list[core_pb2.KeyToPath], mode: int, optional: bool) -> dict[str, tuple[bytes, int]]:
        kind = resource[:-1]
        if data is None:
            if optional:
                return {}
            raise MountError(f'{kind} "{name}" not found')
        if not items:
            return {key: (value, mode) for key, value in data.items()}
        out = {}
        for item in items:
            if item.key not in data:
                if optional:
                    continue
                raise MountError(f"{kind} {namespace}/{name}: references non-existent key: {item.key}")
            out[item.path] = (data[item.key], item.mode if item.HasField("mode") else mode)
        return out

    async def _data(self, namespace: str, resource: str, name: str) -> dict[str, bytes] | None:
        try:
            if resource == "configmaps":
                cm = await self.client.configmaps.get(name, namespace)
                return {**{k: v.encode() for k, v in cm.data.items()}, **dict(cm.binaryData)}
            secret = await self.client.secrets.get(name, namespace)
            return dict(secret.data)
        except errors.NotFound:
            return None
        except errors.ApiError as err:
            raise MountError(f"{resource[:-1]} {namespace}/{name}: {err.message}") from None

    async def _projected(self, pod: core_pb2.Pod, volume: core_pb2.Volume) -> Payload:
        mode = volume.projected.defaultMode if volume.projected.HasField("defaultMode") else DEFAULT_MODE
        namespace = pod.metadata.namespace
        out: dict[str, tuple[bytes, int]] = {}
        for source in volume.projected.sources:
            if source.HasField("serviceAccountToken"):
                projection = source.serviceAccountToken
                token = await self._token(pod, volume.name, projection)
                out[projection.path] = (token.encode(), mode)
            elif source.HasField("configMap"):
                ref = source.configMap
                published = await self._data(namespace, "configmaps", ref.name)
                if ref.name == ROOT_CA and published is None:
                    # Not published (yet, or a cluster without the controller manager's root-CA
                    # publisher): the CA this kubelet trusts the apiserver by, rather than a pod
                    # that cannot start.
                    published = {"ca.crt": self.ca}
                out.update(self._keys_of(published, namespace, "configmaps", ref.name, list(ref.items), mode,
                                         ref.optional))
            elif source.HasField("secret"):
                ref = source.secret
                out.update(await self._keys(namespace, "secrets", ref.name, list(ref.items), mode, ref.optional))
            elif source.HasField("downwardAPI"):
                for f in source.downwardAPI.items:
                    out[f.path] = (_downward_file(pod, f, self.allocatable), f.mode if f.HasField("mode") else mode)
        return out

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

    # ---------------------------------------------------------------- environment

    async def env_sources(self, pod: core_pb2.Pod) -> dict[tuple[str, str], dict[str, str] | None]:
        """The ConfigMaps and Secrets the containers' env and envFrom name, as text."""
        wanted: set[tuple[str, str]] = set()
        for c in [*pod.spec.initContainers, *pod.spec.containers]:
            for env in c.env:
                if env.valueFrom.HasField("configMapKeyRef"):
                    wanted.add(("configmaps", env.valueFrom.configMapKeyRef.name))
                if env.valueFrom.HasField("secretKeyRef"):
                    wanted.add(("secrets", env.valueFrom.secretKeyRef.name))
            for source in c.envFrom:
                if source.HasField("configMapRef"):
                    wanted.add(("configmaps", source.configMapRef.name))
                if source.HasField("secretRef"):
                    wanted.add(("secrets", source.secretRef.name))
        out: dict[tuple[str, str], dict[str, str] | None] = {}
        for resource, name in wanted:
            try:
                data = await self._data(pod.metadata.namespace, resource, name)
            except MountError:
                data = None
            out[(resource, name)] = None if data is None else \
                {k: v.decode(errors="replace") for k, v in data.items()}
        return out
