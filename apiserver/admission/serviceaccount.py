"""The ServiceAccount admission plugin, as upstream's plugin/pkg/admission/serviceaccount
(mutating, on pod creation): a pod without `serviceAccountName` runs as `default`; the
ServiceAccount must exist; and unless the pod or its ServiceAccount says
`automountServiceAccountToken: false`, every container gets upstream's projected volume
`kube-api-access-<random>` at /var/run/secrets/kubernetes.io/serviceaccount: a bound
token (3607 s, refreshed by the kubelet), the cluster CA (`kube-root-ca.crt`) and the
namespace. Mirror pods are left alone.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver.admission.chain import CREATE, AdmissionAttributes, forbidden
from apiserver.admission.noderestriction import MIRROR_POD_ANNOTATION
from kubeling import errors
from protos.kubeling.v1 import core_pb2

__all__ = ["ServiceAccountAdmission", "TOKEN_MOUNT_PATH", "API_ACCESS_PREFIX"]

TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
API_ACCESS_PREFIX = "kube-api-access-"
TOKEN_EXPIRATION = 3607  # upstream's: a little more than an hour, to tell these tokens apart
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The default ServiceAccount of a new namespace is made by a controller a moment later:
# look again a few times before refusing (upstream retries its live lookup the same way).
_RETRIES, _RETRY_INTERVAL = 10, 0.2

Lookup = Callable[[str, str], Awaitable[core_pb2.ServiceAccount | None]]


def api_access_volume(name: str) -> core_pb2.Volume:
    return core_pb2.Volume(name=name, projected=core_pb2.ProjectedVolumeSource(defaultMode=0o644, sources=[
        core_pb2.VolumeProjection(serviceAccountToken=core_pb2.ServiceAccountTokenProjection(
            expirationSeconds=TOKEN_EXPIRATION, path="token")),
        core_pb2.VolumeProjection(configMap=core_pb2.ConfigMapProjection(
            name=ROOT_CA_CONFIGMAP, items=[core_pb2.KeyToPath(key="ca.crt", path="ca.crt")])),
        core_pb2.VolumeProjection(downwardAPI=core_pb2.DownwardAPIProjection(items=[core_pb2.DownwardAPIVolumeFile(
            path="namespace", fieldRef=core_pb2.ObjectFieldSelector(apiVersion="v1",
                                                                    fieldPath="metadata.namespace"))]))]))


@dataclass
class ServiceAccountAdmission:
    lookup: Lookup  # (namespace, name) -> the ServiceAccount, None when there is none
    resources: frozenset[str] = frozenset({"pods"})

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        if MIRROR_POD_ANNOTATION in pod.metadata.annotations:
            return
        spec = pod.spec
        spec.serviceAccountName = spec.serviceAccountName or "default"
        sa = await self._find(attrs.namespace or "default", spec.serviceAccountName)
        if sa is None:
            raise forbidden(attrs, "pods", f"error looking up service account {attrs.namespace or 'default'}/"
                                           f'{spec.serviceAccountName}: serviceaccount "{spec.serviceAccountName}" '
                                           "not found")
        automount = spec.automountServiceAccountToken if spec.HasField("automountServiceAccountToken") \
            else sa.automountServiceAccountToken if sa.HasField("automountServiceAccountToken") else True
        if not automount:
            return
        containers = [*spec.initContainers, *spec.containers]
        if any(m.mountPath == TOKEN_MOUNT_PATH for c in containers for m in c.volumeMounts):
            return  # the pod mounts something of its own there
        taken = {v.name for v in spec.volumes}
        name = ""
        while not name or name in taken:
            name = API_ACCESS_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(5))
        spec.volumes.append(api_access_volume(name))
        for c in containers:
            c.volumeMounts.add(name=name, readOnly=True, mountPath=TOKEN_MOUNT_PATH)

    async def _find(self, namespace: str, name: str) -> core_pb2.ServiceAccount | None:
        for attempt in range(_RETRIES if name == "default" else 1):
            if attempt:
                await asyncio.sleep(_RETRY_INTERVAL)
            try:
                found = await self.lookup(namespace, name)
            except errors.NotFound:
                found = None
            if found is not None:
                return found
        return None
