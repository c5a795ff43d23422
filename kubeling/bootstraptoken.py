"""Bootstrap tokens as upstream's k8s.io/cluster-bootstrap has them: `<id>.<secret>` (6 and
16 of [a-z0-9]), kept as Secrets `kube-system/bootstrap-token-<id>` of type
`bootstrap.kubernetes.io/token`; the detached JWS (HS256 keyed by the token's secret) with
which the bootstrap signer signs the `kube-public/cluster-info` kubeconfig, so a machine
that knows a token can tell that the cluster it reached knows it too; and the hash of the
CA's public key that pins the cluster (kubeadm's --discovery-token-ca-cert-hash). Shared
by the apiserver (authentication), the controller manager (signer, cleaner) and
`kubeling token`/`kubeling join`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Mapping

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubeling.timestamps import parse_rfc3339

__all__ = ["SECRET_TYPE", "SECRET_PREFIX", "NAMESPACE", "USER_PREFIX", "GROUP", "DEFAULT_GROUP", "TOKEN",
           "parse", "generate", "expiration", "expired", "groups", "detached_signature", "signature_valid",
           "ca_cert_hash",
           "CLUSTER_INFO", "CLUSTER_INFO_NAMESPACE", "JWS_PREFIX"]

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NAMESPACE = "kube-system"
USER_PREFIX = "system:bootstrap:"
GROUP = "system:bootstrappers"
DEFAULT_GROUP = "system:bootstrappers:kubeadm:default-node-token"  # kubeadm's, for its RBAC to match
TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_EXTRA_GROUP = re.compile(r"^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$")
CLUSTER_INFO, CLUSTER_INFO_NAMESPACE = "cluster-info", "kube-public"
JWS_PREFIX = "jws-kubeconfig-"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def parse(token: str) -> tuple[str, str] | None:
    """(id, secret) of a token of the right form, else None."""
    found = TOKEN.match(token)
    return (found.group(1), found.group(2)) if found else None


def generate() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(6)) + "." + \
        "".join(secrets.choice(_ALPHABET) for _ in range(16))


def _value(data: Mapping[str, bytes], key: str) -> str:
    return data.get(key, b"").decode(errors="replace")


def expiration(data: Mapping[str, bytes]) -> float | None:
    """When the token expires (seconds since the epoch): None never, 0 when unreadable."""
    text = _value(data, "expiration")
    if not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        return 0.0  # upstream's HasExpired: an unreadable expiration is expired


def expired(data: Mapping[str, bytes], now: float | None = None) -> bool:
    """upstream's HasExpired: an `expiration` (RFC 3339) in the past."""
    when = expiration(data)
    return when is not None and (time.time() if now is None else now) >= when


def groups(data: Mapping[str, bytes]) -> list[str] | None:
    """system:bootstrappers and the token's auth-extra-groups; None when one is malformed."""
    out = [GROUP]
    for group in filter(None, (g.strip() for g in _value(data, "auth-extra-groups").split(","))):
        if not _EXTRA_GROUP.match(group):
            return None
        if group not in out:
            out.append(group)
    return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_signature(content: str, token_id: str, token_secret: str) -> str:
    """cluster-bootstrap's ComputeDetachedSignature: a compact JWS (HS256, kid = the id)
    with its payload left out: `<header>..<signature>`."""
    header = _b64(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{_b64(content.encode())}".encode()
    return f"{header}..{_b64(hmac.new(token_secret.encode(), signing_input, hashlib.sha256).digest())}"


def signature_valid(signature: str, content: str, token_id: str, token_secret: str) -> bool:
    return hmac.compare_digest(signature, detached_signature(content, token_id, token_secret))


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's pin: sha256:<hex> of the CA certificate's Subject Public Key Info."""
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()
