"""ServiceAccount tokens, as upstream's pkg/serviceaccount: JWTs (ES256, signed with the
cluster's `sa.key`) issued through the TokenRequest API (serviceaccounts/token) with
upstream's claims — issuer, audiences, expiry, `sub` system:serviceaccount:<ns>:<name>,
and the `kubernetes.io` claim naming the ServiceAccount and the pod the token is bound
to — and verified as bearer tokens: signature, issuer, audience, time, and that the
ServiceAccount and the bound pod still exist with the UIDs the token names (a token dies
with its pod). The user is `system:serviceaccount:<ns>:<name>` in the groups
`system:serviceaccounts` and `system:serviceaccounts:<ns>`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from google.protobuf.timestamp_pb2 import Timestamp

from apiserver.auth.authentication import UserInfo
from kubeling import errors
from protos.kubeling.v1 import authentication_pb2, core_pb2

__all__ = ["DEFAULT_ISSUER", "TokenIssuer", "ServiceAccountTokens", "service_account_user", "load_signing_key"]

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600  # upstream: "may not specify a duration less than 10 minutes"
MAX_EXPIRATION = 2**32  # far beyond any sensible token, still a valid time
# A token bound to a pod stays valid this long after the pod's deletion started (upstream's).
DELETION_GRACE = 60
_LEEWAY = 60  # clock skew accepted on nbf and exp, as upstream's validator


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id(public: ec.EllipticCurvePublicKey) -> str:
    """Upstream's kid: the unpadded base64url SHA-256 of the DER public key."""
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def load_signing_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("the ServiceAccount signing key must be an ECDSA P-256 key (kubeling.pki's sa.key)")
    return key


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    return UserInfo(f"system:serviceaccount:{namespace}:{name}", uid,
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))


@dataclass
class TokenIssuer:
    key: ec.EllipticCurvePrivateKey
    issuer: str = DEFAULT_ISSUER
    audiences: tuple[str, ...] = (DEFAULT_ISSUER,)

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "ES256", "kid": key_id(self.key.public_key())}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def issue(self, sa: core_pb2.ServiceAccount, req: authentication_pb2.TokenRequest,
              pod: core_pb2.Pod | None) -> authentication_pb2.TokenRequest:
        """The answer to a TokenRequest for sa (bound to pod when given), spec defaulted."""
        spec = req.spec
        if not spec.HasField("expirationSeconds"):
            spec.expirationSeconds = DEFAULT_EXPIRATION
        if spec.expirationSeconds < MIN_EXPIRATION:
            raise errors.Invalid("TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: "
                                 "Invalid value: %d: may not specify a duration less than 10 minutes"
                                 % spec.expirationSeconds,
                                 violations=[errors.FieldViolation("spec.expirationSeconds", "Invalid value: may not "
                                                                   "specify a duration less than 10 minutes")])
        if spec.expirationSeconds > MAX_EXPIRATION:
            raise errors.Invalid(f"spec.expirationSeconds: may not be more than {MAX_EXPIRATION}",
                                 violations=[errors.FieldViolation("spec.expirationSeconds",
                                                                   f"may not be more than {MAX_EXPIRATION}")])
        if not spec.audiences:
            spec.audiences.extend(self.audiences)
        now = int(time.time())
        meta = sa.metadata
        private: dict[str, Any] = {"namespace": meta.namespace,
                                   "serviceaccount": {"name": meta.name, "uid": meta.uid}}
        if pod is not None:
            private["pod"] = {"name": pod.metadata.name, "uid": pod.metadata.uid}
            if pod.spec.nodeName:
                private["node"] = {"name": pod.spec.nodeName}
        claims = {"aud": list(spec.audiences), "exp": now + spec.expirationSeconds, "iat": now,
                  "iss": self.issuer, "jti": str(uuid.uuid4()), "kubernetes.io": private, "nbf": now,
                  "sub": f"system:serviceaccount:{meta.namespace}:{meta.name}"}
        out = authentication_pb2.TokenRequest()
        out.CopyFrom(req)
        out.metadata.namespace, out.metadata.name = meta.namespace, meta.name
        out.status.token = self.sign(claims)
        out.status.expirationTimestamp.CopyFrom(Timestamp(seconds=claims["exp"]))
        return out


def _verified_claims(token: str, public: ec.EllipticCurvePublicKey) -> dict[str, Any] | None:
    """The claims of a JWT signed by this key (None: not a JWT, or not ours)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header = json.loads(_unb64(parts[0]))
        signature = _unb64(parts[2])
        if not isinstance(header, dict) or header.get("alg") != "ES256" or len(signature) != 64:
            return None
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        public.verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        claims = json.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error, InvalidSignature, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


Lookup = Callable[[str, str], Any]  # (namespace, name) -> the cached object or None


@dataclass
class ServiceAccountTokens:
    """The bearer-token authenticator for ServiceAccount JWTs."""

    public: ec.EllipticCurvePublicKey
    service_accounts: Lookup
    pods: Lookup
    issuer: str = DEFAULT_ISSUER
    audiences: tuple[str, ...] = (DEFAULT_ISSUER,)

    def authenticate_token(self, token: str) -> UserInfo | None:
        claims = _verified_claims(token, self.public)
        if claims is None or claims.get("iss") != self.issuer:
            return None
        now = time.time()
        aud = claims.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if not set(audiences) & set(self.audiences):
            return None
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(exp, int) or not isinstance(nbf, int) or now > exp + _LEEWAY or now < nbf - _LEEWAY:
            return None
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            return None
        namespace = private.get("namespace")
        sa_claim, pod_claim = private.get("serviceaccount"), private.get("pod")
        if not isinstance(namespace, str) or not isinstance(sa_claim, dict):
            return None
        name = sa_claim.get("name")
        if not isinstance(name, str) or claims.get("sub") != f"system:serviceaccount:{namespace}:{name}":
            return None
        sa = self.service_accounts(namespace, name)
        if sa is None or sa.metadata.uid != sa_claim.get("uid"):
            return None  # deleted (and maybe made again: another uid)
        if pod_claim is not None:
            if not isinstance(pod_claim, dict):
                return None
            pod = self.pods(namespace, str(pod_claim.get("name", "")))
            if pod is None or pod.metadata.uid != pod_claim.get("uid"):
                return None
            if pod.metadata.HasField("deletionTimestamp") and pod.metadata.deletionTimestamp.seconds < \
                    now - DELETION_GRACE:
                return None
        return service_account_user(namespace, name, sa.metadata.uid)
