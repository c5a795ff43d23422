"""The CSR approving controller (upstream's pkg/controller/certificates/approver,
"csrapproving"): a request for a kubelet's client certificate
(kubernetes.io/kube-apiserver-client-kubelet, O=system:nodes, CN=system:node:<name>) is
approved when its requester may have it, as a SubjectAccessReview says:

- `create certificatesigningrequests/selfnodeclient` when the requester is that node (a
  kubelet renewing its own certificate; kubeling binds it to system:nodes);
- `create certificatesigningrequests/nodeclient` for another requester (a bootstrap token
  asking for a new node's first certificate; bound to system:bootstrappers).

Nothing else is approved here: serving certificates and other signers wait for a person
(`kubectl certificate approve`) or another approver, as upstream's."""

from __future__ import annotations

import logging
from typing import Any

from kubeling import csr
from kubeling.client import Client
from kubeling.dynamic import content_of, set_content
from kubeling.informer import Informer
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import authorization_pb2, custom_pb2

__all__ = ["CSRApprovingController"]

log = logging.getLogger(__name__)

_SELF = ("selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview.")
_OTHER = ("nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.")


class CSRApprovingController:
    def __init__(self, client: Client, requests: Informer[custom_pb2.CustomResource], workers: int = 1) -> None:
        self.client = client
        self.requests = requests
        self.queue = WorkQueue("csrapproving")
        self.workers = Workers(self.queue, self.sync, workers)
        requests.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new))

    def _changed(self, request: custom_pb2.CustomResource) -> None:
        self.queue.add(request.metadata.name)

    async def _allowed(self, spec: dict[str, Any], subresource: str) -> bool:
        review = authorization_pb2.SubjectAccessReview()
        review.spec.user, review.spec.uid = spec.get("username", ""), spec.get("uid", "")
        review.spec.groups[:] = spec.get("groups") or []
        for key, values in (spec.get("extra") or {}).items():
            review.spec.extra[key].items[:] = values
        attrs = review.spec.resourceAttributes
        attrs.group, attrs.resource, attrs.subresource = "certificates.k8s.io", "certificatesigningrequests", \
            subresource
        attrs.verb, attrs.version = "create", "*"
        return (await self.client.subject_access_review(review)).status.allowed

    async def sync(self, name: str) -> None:
        current = self.requests.store.get(name)
        if current is None:
            return
        content = content_of(current)
        spec, status = content.get("spec") or {}, content.get("status") or {}
        kinds = {c.get("type") for c in status.get("conditions") or []}
        if status.get("certificate") or kinds & {"Approved", "Denied"} or \
                spec.get("signerName") != csr.KUBE_APISERVER_CLIENT_KUBELET:
            return
        try:
            request = csr.parse_request(csr.request_bytes(spec.get("request", "")))
        except ValueError as err:
            raise RuntimeError(f"unable to parse csr {name!r}: {err}") from None
        if csr.kubelet_client_problem(request, spec.get("usages") or []):
            return  # not a node's client request: not this approver's
        recognizers = ([_SELF] if spec.get("username") == csr.common_name(request) else []) + [_OTHER]
        for subresource, message in recognizers:
            if await self._allowed(spec, subresource):
                updated = custom_pb2.CustomResource()
                updated.CopyFrom(current)
                written = content_of(updated)
                written.setdefault("status", {}).setdefault("conditions", []).append({
                    "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message})
                set_content(updated, written)
                await self.client.certificatesigningrequests.update_approval(updated)
                log.info("csr %s: approved for %s (%s)", name, spec.get("username", ""), subresource)
                return
        log.info("csr %s: recognized as %s but the SubjectAccessReview did not allow %s", name,
                 [s for s, _ in recognizers], spec.get("username", ""))
