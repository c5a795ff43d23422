"""The CSR signing controller (upstream's pkg/controller/certificates/signer, "csrsigning"):
an approved CertificateSigningRequest for one of kubernetes.io's signers gets its
certificate from the cluster CA (--cluster-signing-cert-file/--cluster-signing-key-file):

- kubernetes.io/kube-apiserver-client: any subject but system:masters (admission refuses
  those), `client auth` and optionally the two key usages;
- kubernetes.io/kube-apiserver-client-kubelet: a node's client certificate (O=system:nodes,
  CN=system:node:<name>, no SANs);
- kubernetes.io/kubelet-serving: a node's serving certificate (DNS or IP SANs).

A request that does not fit its signer gets a Failed condition (SignerValidationFailure)
instead. The lifetime is --cluster-signing-duration, or the request's shorter
expirationSeconds (at least 10 minutes); the start is backdated 5 minutes for clocks that
lag, as upstream's authority does."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

from kubeling import csr, errors
from kubeling.client import Client
from kubeling.dynamic import content_of, set_content
from kubeling.informer import Informer
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import custom_pb2

__all__ = ["CSRSigningController", "Authority", "SIGNERS", "has_condition"]

log = logging.getLogger(__name__)

SIGNERS = (csr.KUBE_APISERVER_CLIENT, csr.KUBE_APISERVER_CLIENT_KUBELET, csr.KUBELET_SERVING)
BACKDATE = 5 * 60  # seconds: upstream's
SHORT = 8 * 3600  # a certificate shorter than this is not backdated at its end
MIN_DURATION = 10 * 60

_KEY_USAGES = {"signing": "digital_signature", "digital signature": "digital_signature",
               "content commitment": "content_commitment", "key encipherment": "key_encipherment",
               "key agreement": "key_agreement", "data encipherment": "data_encipherment",
               "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
               "decipher only": "decipher_only"}
_EXT_USAGES = {
    "any": x509.ObjectIdentifier("2.5.29.37.0"), "server auth": x509.ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": x509.ExtendedKeyUsageOID.CLIENT_AUTH, "code signing": x509.ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": x509.ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "s/mime": x509.ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "ipsec end system": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    "ipsec tunnel": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
    "ipsec user": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
    "timestamping": x509.ExtendedKeyUsageOID.TIME_STAMPING, "ocsp signing": x509.ExtendedKeyUsageOID.OCSP_SIGNING,
    "microsoft sgc": x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    "netscape sgc": x509.ObjectIdentifier("2.16.840.1.113730.4.1")}


def has_condition(content: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (content.get("status") or {}).get("conditions") or [])


@dataclass
class Authority:
    """The CA that signs (upstream's authority.CertificateAuthority)."""

    certificate: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    @classmethod
    def from_files(cls, cert: Path, key: Path) -> Authority:
        loaded = serialization.load_pem_private_key(key.read_bytes(), None)
        return cls(x509.load_pem_x509_certificate(cert.read_bytes()), loaded)  # type: ignore[arg-type]

    def sign(self, request: x509.CertificateSigningRequest, usages: list[str], seconds: float,
             now: float | None = None) -> bytes:
        """A certificate (PEM) for the request's subject, names and key, with `usages`, valid
        `seconds` from now (backdated BACKDATE), never past the CA's own end."""
        start = time.time() if now is None else now
        not_before = start - BACKDATE
        not_after = start + seconds if seconds < SHORT else not_before + seconds
        ca_end = self.certificate.not_valid_after_utc.timestamp()
        builder = x509.CertificateBuilder().subject_name(request.subject).issuer_name(self.certificate.subject) \
            .public_key(request.public_key()).serial_number(x509.random_serial_number()) \
            .not_valid_before(dt.datetime.fromtimestamp(not_before, dt.timezone.utc)) \
            .not_valid_after(dt.datetime.fromtimestamp(min(not_after, ca_end), dt.timezone.utc)) \
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True) \
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False)
        flags = {name: False for name in set(_KEY_USAGES.values())}
        for usage in usages:
            if usage in _KEY_USAGES:
                flags[_KEY_USAGES[usage]] = True
        if any(flags.values()):
            builder = builder.add_extension(x509.KeyUsage(**flags), critical=True)
        extended = list(dict.fromkeys(_EXT_USAGES[u] for u in usages if u in _EXT_USAGES))
        if extended:
            builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
        try:
            sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            builder = builder.add_extension(sans, critical=False)
        except x509.ExtensionNotFound:
            pass
        return builder.sign(self.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def signer_problem(signer: str, request: x509.CertificateSigningRequest, usages: list[str]) -> str:
    """Why the request does not fit its signer (upstream's isKubeletServing, isKubeletClient,
    isKubeAPIServerClient); "" when it does."""
    if signer == csr.KUBELET_SERVING:
        return csr.kubelet_serving_problem(request, usages)
    if signer == csr.KUBE_APISERVER_CLIENT_KUBELET:
        return csr.kubelet_client_problem(request, usages)
    return csr.apiserver_client_problem(usages)


class CSRSigningController:
    def __init__(self, client: Client, requests: Informer[custom_pb2.CustomResource], authority: Authority,
                 duration: float, workers: int = 1, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.requests = requests
        self.authority = authority
        self.duration = duration
        self.clock = clock
        self.queue = WorkQueue("csrsigning")
        self.workers = Workers(self.queue, self.sync, workers)
        requests.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new))

    def _changed(self, request: custom_pb2.CustomResource) -> None:
        self.queue.add(request.metadata.name)

    def _seconds(self, requested: int | None) -> float:
        """upstream's signer.duration: the request's, within [10 min, --cluster-signing-duration]."""
        if requested is None:
            return self.duration
        return max(MIN_DURATION, min(float(requested), self.duration))

    async def sync(self, name: str) -> None:
        current = self.requests.store.get(name)
        if current is None:
            return
        content = content_of(current)
        spec, status = content.get("spec") or {}, content.get("status") or {}
        if spec.get("signerName") not in SIGNERS or status.get("certificate") or \
                not has_condition(content, "Approved") or has_condition(content, "Failed"):
            return
        try:
            request = csr.parse_request(csr.request_bytes(spec.get("request", "")))
        except ValueError as err:
            raise RuntimeError(f"unable to parse csr {name!r}: {err}") from None
        usages = list(spec.get("usages") or [])
        problem = signer_problem(spec["signerName"], request, usages)
        updated = custom_pb2.CustomResource()
        updated.CopyFrom(current)
        written = content_of(updated)
        if problem:
            written.setdefault("status", {}).setdefault("conditions", []).append({
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": problem})
            log.info("csr %s: not signed for %s: %s", name, spec["signerName"], problem)
        else:
            pem = self.authority.sign(request, usages, self._seconds(spec.get("expirationSeconds")), self.clock())
            written.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
        set_content(updated, written)
        try:
            await self.client.certificatesigningrequests.update_status(updated)
        except errors.NotFound:
            return
        if not problem:
            log.info("csr %s: signed for %s (requested by %s)", name, spec["signerName"], spec.get("username", ""))
