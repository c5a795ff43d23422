"""The CSR approving controller (upstream's pkg/controller/certificates/approver,
"csrapproving"): a request for a kubelet's client certificate
(kubernetes.io/kube-apiserver-client-kubelet, O=system:nodes, CN=system:node:<name>) is
approved when its requester may have it, as a SubjectAccessReview says:

- `create certificatesigningrequests/selfnodeclient` when the requester is that node (a
  kubelet renewing its own certificate; kubeling binds it to system:nodes);
- `create certificatesigningrequests/nodeclient` for another requester (a bootstrap token
  asking for a new node's first certificate; bound to system:bootstrappers).

Serving certificates (kubernetes.io/kubelet-serving) wait for a person (`kubectl certificate
approve`), as upstream's — unless kubeling's own policy is on (--approve-kubelet-serving-
certificates CIDR,...; `kubeling up` turns it on for its node network): a node's request
for its own name (username = CN = system:node:<name>, in system:nodes) whose DNS names are
that name and whose addresses all lie in those networks is approved, as the community's
kubelet-csr-approver does. Other signers are never approved here."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from cryptography import x509

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
    def __init__(self, client: Client, requests: Informer[custom_pb2.CustomResource], workers: int = 1,
                 serving_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()) -> None:
        self.client = client
        self.requests = requests
        self.serving_networks = serving_networks
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

    def _serving_problem(self, spec: dict[str, Any], request: x509.CertificateSigningRequest) -> str:
        """Why kubeling's policy leaves this serving request to a person; "" to approve it."""
        if not self.serving_networks:
            return "no --approve-kubelet-serving-certificates networks"
        common = csr.common_name(request)
        if spec.get("username") != common or csr.NODES_GROUP not in (spec.get("groups") or []):
            return "not the node's own request"
        problem = csr.kubelet_serving_problem(request, spec.get("usages") or [])
        if problem:
            return problem
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        if any(d != common.removeprefix(csr.NODE_PREFIX) for d in sans.get_values_for_type(x509.DNSName)):
            return "a DNS name other than the node's"
        if not all(any(ip in n for n in self.serving_networks) for ip in sans.get_values_for_type(x509.IPAddress)):
            return "an address outside the node networks"
        return ""

    async def _approve(self, current: custom_pb2.CustomResource, message: str) -> None:
        updated = custom_pb2.CustomResource()
        updated.CopyFrom(current)
        written = content_of(updated)
        written.setdefault("status", {}).setdefault("conditions", []).append({
            "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message})
        set_content(updated, written)
        await self.client.certificatesigningrequests.update_approval(updated)

    async def sync(self, name: str) -> None:
        current = self.requests.store.get(name)
        if current is None:
            return
        content = content_of(current)
        spec, status = content.get("spec") or {}, content.get("status") or {}
        kinds = {c.get("type") for c in status.get("conditions") or []}
        if status.get("certificate") or kinds & {"Approved", "Denied"} or \
                spec.get("signerName") not in (csr.KUBE_APISERVER_CLIENT_KUBELET, csr.KUBELET_SERVING):
            return
        try:
            request = csr.parse_request(csr.request_bytes(spec.get("request", "")))
        except ValueError as err:
            raise RuntimeError(f"unable to parse csr {name!r}: {err}") from None
        if spec["signerName"] == csr.KUBELET_SERVING:
            problem = self._serving_problem(spec, request)
            if problem:
                log.debug("csr %s: serving certificate left to a person: %s", name, problem)
                return
            await self._approve(current, "Auto approving the kubelet serving certificate of the node's own name "
                                         "and addresses.")
            log.info("csr %s: serving certificate approved for %s", name, spec.get("username", ""))
            return
        if csr.kubelet_client_problem(request, spec.get("usages") or []):
            return  # not a node's client request: not this approver's
        recognizers = ([_SELF] if spec.get("username") == csr.common_name(request) else []) + [_OTHER]
        for subresource, message in recognizers:
            if await self._allowed(spec, subresource):
                await self._approve(current, message)
                log.info("csr %s: approved for %s (%s)", name, spec.get("username", ""), subresource)
                return
        log.info("csr %s: recognized as %s but the SubjectAccessReview did not allow %s", name,
                 [s for s, _ in recognizers], spec.get("username", ""))
