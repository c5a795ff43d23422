"""The `extension-apiserver-authentication` ConfigMap in kube-system (upstream's
ClusterAuthenticationTrust controller): what an extension apiserver reads to trust this
apiserver's clients — the client CA, and the front-proxy CA with the names and headers of
requestheader authentication. Written when the apiserver starts."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from apiserver.registry.generic.store import Registry
from kubeling import errors
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["AuthenticationTrust", "publish_authentication_trust", "CONFIGMAP"]

log = logging.getLogger(__name__)

CONFIGMAP = "extension-apiserver-authentication"


@dataclass(frozen=True)
class AuthenticationTrust:
    client_ca_file: str = ""
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: tuple[str, ...] = ("front-proxy-client",)


async def publish_authentication_trust(configmaps: Registry[core_pb2.ConfigMap], trust: AuthenticationTrust) -> None:
    data: dict[str, str] = {}
    if trust.client_ca_file:
        data["client-ca-file"] = Path(trust.client_ca_file).read_text()
    if trust.requestheader_client_ca_file:
        data.update({
            "requestheader-client-ca-file": Path(trust.requestheader_client_ca_file).read_text(),
            "requestheader-allowed-names": json.dumps(list(trust.requestheader_allowed_names)),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"])})
    if not data:
        return
    wanted = core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=CONFIGMAP, namespace="kube-system"), data=data)
    for _ in range(5):
        try:
            current = await configmaps.get("kube-system", CONFIGMAP)
        except errors.NotFound:
            try:
                await configmaps.create(wanted)
                return
            except errors.AlreadyExists:
                continue
        if dict(current.data) == data:
            return
        current.data.clear()
        current.data.update(data)
        try:
            await configmaps.update(current)
            return
        except errors.Conflict:
            continue
    log.warning("could not publish %s: too many concurrent writers", CONFIGMAP)
