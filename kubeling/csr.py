"""CertificateSigningRequests as upstream reads them (pkg/apis/certificates/helpers.go and
the signer's and approver's checks): the PKCS#10 request parsed from its PEM, the known
signers, and what makes a request a kubelet's client or serving request. Shared by the
apiserver (validation, admission), the controller manager (signer, approver) and the
kubelet (which asks for its certificates)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["KUBE_APISERVER_CLIENT", "KUBE_APISERVER_CLIENT_KUBELET", "KUBELET_SERVING", "LEGACY_UNKNOWN",
           "KNOWN_USAGES", "parse_request", "request_bytes", "kubelet_client_problem", "kubelet_serving_problem",
           "apiserver_client_problem", "organizations", "common_name", "make_request", "NODES_GROUP", "NODE_PREFIX"]

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
NODES_GROUP = "system:nodes"
NODE_PREFIX = "system:node:"

# upstream's allValidUsages (certificates.KeyUsage values)
KNOWN_USAGES = ("any", "cert sign", "client auth", "code signing", "content commitment", "crl sign",
                "data encipherment", "decipher only", "digital signature", "email protection", "encipher only",
                "ipsec end system", "ipsec tunnel", "ipsec user", "key agreement", "key encipherment",
                "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", "server auth", "signing",
                "timestamping")


def request_bytes(value: str) -> bytes:
    """spec.request as JSON carries it (base64 of the PEM); ValueError when it is not base64."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("illegal base64 data") from None


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """The PKCS#10 request in `pem` with a valid signature, else ValueError in upstream's words."""
    marker = b"-----BEGIN CERTIFICATE REQUEST-----"
    if marker not in pem:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        request = x509.load_pem_x509_csr(pem[pem.index(marker):])
    except ValueError as err:
        raise ValueError(f"x509: malformed certificate request ({err})") from None
    if not request.is_signature_valid:
        elliptic = isinstance(request.public_key(), ec.EllipticCurvePublicKey)
        raise ValueError("x509: ECDSA verification failure" if elliptic else "crypto/rsa: verification error")
    return request


def common_name(request: x509.CertificateSigningRequest) -> str:
    names = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def organizations(request: x509.CertificateSigningRequest) -> list[str]:
    return [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _sans(request: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _san_kinds(request: x509.CertificateSigningRequest) -> dict[str, int]:
    sans = _sans(request)
    if sans is None:
        return {"dns": 0, "ip": 0, "email": 0, "uri": 0}
    return {"dns": len(sans.get_values_for_type(x509.DNSName)),
            "ip": len(sans.get_values_for_type(x509.IPAddress)),
            "email": len(sans.get_values_for_type(x509.RFC822Name)),
            "uri": len(sans.get_values_for_type(x509.UniformResourceIdentifier))}


_CLIENT_USAGES = ({"digital signature", "key encipherment", "client auth"}, {"digital signature", "client auth"})
_SERVING_USAGES = ({"digital signature", "key encipherment", "server auth"}, {"digital signature", "server auth"})


def kubelet_client_problem(request: x509.CertificateSigningRequest, usages: Iterable[str]) -> str:
    """Why this is not a kubelet's client request (upstream's ValidateKubeletClientCSR); "" when it is."""
    kinds = _san_kinds(request)
    if organizations(request) != [NODES_GROUP]:
        return "subject organization is not system:nodes"
    for kind, label in (("dns", "DNS"), ("email", "Email"), ("ip", "IP"), ("uri", "URI")):
        if kinds[kind]:
            return f"{label} subjectAltNames are not allowed"
    if not common_name(request).startswith(NODE_PREFIX):
        return "subject common name does not begin with system:node:"
    if set(usages) not in _CLIENT_USAGES:
        return "usages did not match [client auth digital signature key encipherment]"
    return ""


def kubelet_serving_problem(request: x509.CertificateSigningRequest, usages: Iterable[str]) -> str:
    """Why this is not a kubelet's serving request (upstream's ValidateKubeletServingCSR); "" when it is."""
    kinds = _san_kinds(request)
    if organizations(request) != [NODES_GROUP]:
        return "subject organization is not system:nodes"
    if not kinds["dns"] and not kinds["ip"]:
        return "DNS or IP subjectAltName is required"
    if kinds["email"]:
        return "Email subjectAltNames are not allowed"
    if kinds["uri"]:
        return "URI subjectAltNames are not allowed"
    if set(usages) not in _SERVING_USAGES:
        return "usages did not match [digital signature key encipherment server auth]"
    if not common_name(request).startswith(NODE_PREFIX):
        return "subject common name does not begin with system:node:"
    return ""


def apiserver_client_problem(usages: Iterable[str]) -> str:
    """upstream's validAPIServerClientUsages: client auth, optionally the two key usages."""
    has_client_auth = False
    for usage in usages:
        if usage == "client auth":
            has_client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            return f"invalid usage for client certificate: {usage}"
    return "" if has_client_auth else "missing required usage for client certificate: client auth"


def make_request(common: str, orgs: Iterable[str] = (), *, dns_names: Iterable[str] = (),
                 ips: Iterable[str] = ()) -> tuple[bytes, bytes]:
    """A new EC P-256 key and a PKCS#10 request for it (the kubelet's): (request PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common)]))
    alt: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    request = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return request.public_bytes(serialization.Encoding.PEM), key_pem
