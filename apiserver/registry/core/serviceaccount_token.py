"""The serviceaccounts/token subresource (upstream's pkg/registry/core/serviceaccount/
storage/token.go): a TokenRequest for an existing ServiceAccount, optionally bound to a
pod of the same namespace that runs as that ServiceAccount, answered with a signed token.
"""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.admission.chain import CREATE
from apiserver.auth.tokens import TokenIssuer
from apiserver.registry.generic.store import Registry
from kubeling import errors
from protos.kubeling.v1 import authentication_pb2, core_pb2

__all__ = ["TokenRequests"]


@dataclass
class TokenRequests:
    issuer: TokenIssuer
    service_accounts: Registry[core_pb2.ServiceAccount]
    pods: Registry[core_pb2.Pod]

    async def create(self, req: authentication_pb2.TokenRequest) -> authentication_pb2.TokenRequest:
        meta = req.metadata
        meta.namespace = meta.namespace or "default"
        sa = await self.service_accounts.get(meta.namespace, meta.name)
        pod = None
        ref = req.spec.boundObjectRef
        if req.spec.HasField("boundObjectRef") and (ref.kind or ref.name):
            if ref.kind != "Pod":
                raise errors.BadRequest(f"cannot bind token against a resource of kind {ref.kind!r}: only Pod")
            pod = await self.pods.get(meta.namespace, ref.name)
            if ref.uid and ref.uid != pod.metadata.uid:
                raise errors.Conflict(f'Operation cannot be fulfilled on Pod "{ref.name}": the UID in the bound '
                                      f"object reference ({ref.uid}) does not match the UID in record. The object "
                                      "might have been deleted and then recreated")
            if pod.spec.serviceAccountName != meta.name:
                raise errors.BadRequest(f'cannot bind token for serviceaccount "{meta.name}" to pod running with '
                                        "different serviceaccount name.")
        if self.service_accounts.admission is not None:
            await self.service_accounts.admission.admit(CREATE, "serviceaccounts", req, None, subresource="token")
        return self.issuer.issue(sa, req, pod)
