"""Upstream's three CertificateSigningRequest admission plugins
(plugin/pkg/admission/certificates/{approval,signing,subjectrestriction}):

- CertificateApproval: an approval write needs the `approve` verb on the request's signer
  (`signers` in certificates.k8s.io, by its name or `<domain>/*`).
- CertificateSigning: a status write that sets the certificate needs `sign` on the signer.
- CertificateSubjectRestriction: no request to kubernetes.io/kube-apiserver-client for the
  `system:masters` group (it would mint cluster-admins).
"""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.admission.chain import CREATE, UPDATE, AdmissionAttributes, forbidden
from apiserver.auth.authentication import UserInfo
from apiserver.auth.authorization import Authorizer
from apiserver.auth.rbac import Attributes
from kubeling import csr
from kubeling.dynamic import content_of

__all__ = ["CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction", "authorized_for_signer"]

_GROUP = "certificates.k8s.io"
_GROUP_RESOURCE = f"certificatesigningrequests.{_GROUP}"


def authorized_for_signer(authorizer: Authorizer, user: UserInfo, verb: str, signer: str) -> bool:
    """upstream's IsAuthorizedForSignerName: the verb on `signers` named exactly, or `<domain>/*`."""
    for name in (signer, f"{signer.partition('/')[0]}/*"):
        allowed, _ = authorizer.authorize(Attributes(user, verb, True, "", _GROUP, "signers", "", name))
        if allowed:
            return True
    return False


def _spec(attrs: AdmissionAttributes) -> dict[str, object]:
    return content_of(attrs.obj).get("spec") or {}  # type: ignore[arg-type]


@dataclass
class CertificateApproval:
    authorizer: Authorizer
    resources: frozenset[str] = frozenset({"certificatesigningrequests"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != UPDATE or attrs.subresource != "approval":
            return
        signer = str(_spec(attrs).get("signerName", ""))
        if not authorized_for_signer(self.authorizer, attrs.user, "approve", signer):
            raise forbidden(attrs, _GROUP_RESOURCE,
                            f'user not permitted to approve requests with signerName "{signer}"')


@dataclass
class CertificateSigning:
    authorizer: Authorizer
    resources: frozenset[str] = frozenset({"certificatesigningrequests"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != UPDATE or attrs.subresource != "status" or attrs.old is None:
            return
        new = (content_of(attrs.obj).get("status") or {}).get("certificate")  # type: ignore[arg-type]
        if new == (content_of(attrs.old).get("status") or {}).get("certificate"):
            return  # only a change of the certificate is a signature
        signer = str(_spec(attrs).get("signerName", ""))
        if not authorized_for_signer(self.authorizer, attrs.user, "sign", signer):
            raise forbidden(attrs, _GROUP_RESOURCE,
                            f'user not permitted to sign requests with signerName "{signer}"')


@dataclass
class CertificateSubjectRestriction:
    resources: frozenset[str] = frozenset({"certificatesigningrequests"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        spec = _spec(attrs)
        if spec.get("signerName") != csr.KUBE_APISERVER_CLIENT:
            return
        try:
            request = csr.parse_request(csr.request_bytes(str(spec.get("request", ""))))
        except ValueError:
            return  # validation says what is wrong with it
        if "system:masters" in csr.organizations(request):
            raise forbidden(attrs, _GROUP_RESOURCE, "use of kubernetes.io/kube-apiserver-client signer with "
                                                    "system:masters group is not allowed")
