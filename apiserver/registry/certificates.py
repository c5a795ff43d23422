"""certificates.k8s.io/v1 CertificateSigningRequests, kept as JSON with upstream's strategy
(pkg/registry/certificates/certificates/strategy.go) and validation
(pkg/apis/certificates/validation): the requester's identity is written into the spec from
the request, not from the body; the spec never changes after create; the Approved and
Denied conditions change only through the approval subresource, the certificate only
through status, and neither is ever taken back."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

from cryptography import x509

from apiserver.auth.authentication import current_user
from apiserver.registry.apiextensions import schema as schemas
from apiserver.registry.generic.json_strategy import CR, JsonStrategy, array, integer, obj, string
from apiserver.validation import Checker
from kubeling import csr, names, scheme
from kubeling.dynamic import content_of, set_content
from kubeling.timestamps import rfc3339

__all__ = ["STRATEGIES", "CertificateSigningRequestStrategy", "APPROVAL_TYPES"]

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
APPROVAL_TYPES = (APPROVED, DENIED)
_TRUE_ONLY = (APPROVED, DENIED, FAILED)
_CONDITION = obj({"type": string(), "status": string(), "reason": string(), "message": string(),
                  "lastUpdateTime": string(), "lastTransitionTime": string()})


def validate_signer_name(path: str, signer: str, check: Checker) -> None:
    """upstream's ValidateSignerName: '<domain with a dot>/<path of DNS-1123 subdomains>'."""
    if not signer:
        check.add(path, "Required value")
        return
    segments = signer.split("/")
    if len(segments) != 2:
        check.invalid(path, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")
        return
    domain, rest = segments
    if len(domain) > 253:
        check.add(path, f"Too long: may not be more than 253 bytes ({domain!r})")
    labels = domain.split(".")
    for label in labels:
        problems = names.dns1123_label(label)
        if problems:
            check.invalid(path, domain, f"validating label {label!r}: {problems[0]}")
            break
    if len(labels) < 2:
        check.invalid(path, domain, "should be a domain with at least two segments separated by dots")
    if len(rest) > 253 + 63 * 5:
        check.add(path, f"Too long: may not be more than {253 + 63 * 5} bytes")
    for part in rest.split("."):
        problems = names.dns1123_subdomain(part)
        if problems:
            check.invalid(path, rest, f"validating component {part!r}: {problems[0]}")
            break


_PEM_BLOCK = re.compile(r"-----BEGIN ([^-]+)-----(.*?)-----END \1-----", re.DOTALL)


def _certificate_problem(value: str) -> str:
    """upstream's validateCertificate: only CERTIFICATE PEM blocks without headers, at least one."""
    try:
        text = base64.b64decode(value, validate=True).decode("ascii")
    except ValueError:
        return "illegal base64 data"
    blocks = list(_PEM_BLOCK.finditer(text))
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    for block in blocks:
        if block.group(1) != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{block.group(1)}"'
        if ":" in block.group(2):
            return "no PEM block headers are permitted"
        try:
            x509.load_pem_x509_certificate(block.group(0).encode())
        except ValueError as err:
            return f"x509: malformed certificate ({err})"
    return ""


def _conditions_of(content: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in (content.get("status") or {}).get("conditions") or [] if c.get("type") == kind]


class CertificateSigningRequestStrategy(JsonStrategy):
    resource = scheme.CERTIFICATESIGNINGREQUESTS
    storage_path = "certificatesigningrequests"
    schema = {
        "spec": obj({
            "request": string(format="byte"), "signerName": string(), "expirationSeconds": integer(),
            "usages": array(string()), "username": string(), "uid": string(), "groups": array(string()),
            "extra": {"type": "object", "additionalProperties": array(string())}}, default={}),
        "status": obj({"conditions": array(_CONDITION), "certificate": string(format="byte")})}

    def validate_name(self, name: str) -> list[str]:
        return []  # upstream: "We don't care what you call your certificate requests."

    def fields(self, obj: CR) -> dict[str, str]:
        return {**super().fields(obj), "spec.signerName": (content_of(obj).get("spec") or {}).get("signerName", "")}

    # ---- create / update ----
    def prepare_for_create(self, obj: CR) -> None:
        """The requester is whoever sends the request, never what the body says."""
        super().prepare_for_create(obj)
        content = content_of(obj)
        spec = content.setdefault("spec", {})
        for key in ("username", "uid", "groups", "extra"):
            spec.pop(key, None)
        user = current_user.get()
        if user is not None:
            spec["username"] = user.name
            if user.uid:
                spec["uid"] = user.uid
            if user.groups:
                spec["groups"] = list(user.groups)
            if user.extra:
                spec["extra"] = {k: list(v) for k, v in user.extra}
        set_content(obj, content)

    def prepare_for_update(self, new: CR, old: CR) -> None:
        """The spec and status stay as stored (both change only through subresources)."""
        super().prepare_for_update(new, old)
        content, before = content_of(new), content_of(old)
        content["spec"] = before.get("spec", {})
        set_content(new, content)

    def prepare_for_status_update(self, new: CR, old: CR) -> None:
        """Status (and labels and annotations, as upstream's CSR status strategy keeps the
        written metadata), not its approval: the Approved/Denied conditions stay as stored
        (upstream's preserveConditionInstances: a changed count is left for validation)."""
        labels, annotations = dict(new.metadata.labels), dict(new.metadata.annotations)
        super().prepare_for_status_update(new, old)
        _set_labels(new, labels, annotations)
        content, before = content_of(new), content_of(old)
        for kind in APPROVAL_TYPES:
            _preserve(content, before, kind)
        _timestamps(content, before)
        set_content(new, content)

    def prepare_for_approval(self, new: CR, old: CR) -> None:
        """Only the conditions (and labels and annotations) of the written object count; the
        certificate stays as stored."""
        conditions = (content_of(new).get("status") or {}).get("conditions")
        labels, annotations = dict(new.metadata.labels), dict(new.metadata.annotations)
        new.CopyFrom(old)
        _set_labels(new, labels, annotations)
        content, before = content_of(new), content_of(old)
        status = content.setdefault("status", {})
        status["conditions"] = conditions if isinstance(conditions, list) else []
        if not status["conditions"]:
            status.pop("conditions")
        schemas.prune(self._schema(), content, "")
        _timestamps(content, before)
        set_content(new, content)

    # ---- validation ----
    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        self._validate(content, None, check)

    def validate_content_update(self, content: dict[str, Any], before: dict[str, Any], check: Checker) -> None:
        self._validate_update(content, before, check, approval=False, certificate=False)

    def validate_status_update(self, new: CR, old: CR, check: Checker) -> None:
        _validate_labels(new, check)
        content, before = content_of(new), content_of(old)
        self._validate(content, before, check)
        self._validate_update(content, before, check, approval=False, certificate=True)

    def validate_approval(self, new: CR, old: CR, check: Checker) -> None:
        _validate_labels(new, check)
        content, before = content_of(new), content_of(old)
        if self._judge(new, check) is None:
            return
        self._validate(content, before, check)
        self._validate_update(content, before, check, approval=True, certificate=False)

    def _validate(self, content: dict[str, Any], before: dict[str, Any] | None, check: Checker) -> None:
        """upstream's validateCertificateSigningRequest; what old data already breaks is tolerated."""
        spec, status = content.get("spec") or {}, content.get("status") or {}
        old_spec = (before or {}).get("spec") or {}
        try:
            csr.parse_request(csr.request_bytes(spec.get("request", "")))
        except ValueError as err:
            check.invalid("spec.request", "<request data>", str(err))
        usages = spec.get("usages") or []
        if not usages:
            check.add("spec.usages", "Required value")
        old_usages = old_spec.get("usages") or []
        if not any(u not in csr.KNOWN_USAGES for u in old_usages):
            for i, usage in enumerate(usages):
                check.unsupported(f"spec.usages[{i}]", usage, csr.KNOWN_USAGES)
        if len(set(old_usages)) == len(old_usages):
            for i, usage in enumerate(usages):
                if usage in usages[:i]:
                    check.add(f"spec.usages[{i}]", f'Duplicate value: "{usage}"')
        signer = spec.get("signerName", "")
        if signer == csr.LEGACY_UNKNOWN and old_spec.get("signerName") != csr.LEGACY_UNKNOWN:
            check.invalid("spec.signerName", signer, "the legacy signerName is not allowed via this API version")
        elif signer != csr.LEGACY_UNKNOWN:
            validate_signer_name("spec.signerName", signer, check)
        seconds = spec.get("expirationSeconds")
        if seconds is not None and seconds < 600:
            check.invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 600 seconds "
                                                             "(10 minutes)")
        self._validate_conditions(status.get("conditions") or [], check)
        certificate = status.get("certificate", "")
        unchanged = before is not None and certificate == ((before.get("status") or {}).get("certificate", ""))
        if certificate and not unchanged:
            problem = _certificate_problem(certificate)
            if problem:
                check.invalid("status.certificate", "<certificate data>", problem)

    @staticmethod
    def _validate_conditions(conditions: list[dict[str, Any]], check: Checker) -> None:
        seen: set[str] = set()
        approved = denied = False
        for i, c in enumerate(conditions):
            at, kind, status = f"status.conditions[{i}]", c.get("type", ""), c.get("status", "")
            if not kind:
                check.add(f"{at}.type", "Required value")
            if not status:
                check.add(f"{at}.status", "Required value")
            else:
                check.unsupported(f"{at}.status", status, ("True",) if kind in _TRUE_ONLY else
                                  ("False", "True", "Unknown"))
            if kind == APPROVED:
                approved = True
                if denied:
                    check.invalid(f"{at}.type", kind, "Approved and Denied conditions are mutually exclusive")
            elif kind == DENIED:
                denied = True
                if approved:
                    check.invalid(f"{at}.type", kind, "Approved and Denied conditions are mutually exclusive")
            if kind in seen:
                check.add(f"{at}.type", f'Duplicate value: "{kind}"')
            seen.add(kind)

    @staticmethod
    def _validate_update(content: dict[str, Any], before: dict[str, Any], check: Checker, *,
                         approval: bool, certificate: bool) -> None:
        for kind in (APPROVED, DENIED, FAILED):
            if len(_conditions_of(content, kind)) < len(_conditions_of(before, kind)):
                check.add("status.conditions", f'Forbidden: updates may not remove a condition of type "{kind}"')
        if not approval:
            for kind in APPROVAL_TYPES:
                new, old = _conditions_of(content, kind), _conditions_of(before, kind)
                if len(new) > len(old):
                    check.add("status.conditions", f'Forbidden: updates may not add a condition of type "{kind}"')
                elif len(new) == len(old) and new != old:
                    check.add("status.conditions", f'Forbidden: updates may not modify a condition of type "{kind}"')
        new_cert = (content.get("status") or {}).get("certificate", "")
        old_cert = (before.get("status") or {}).get("certificate", "")
        if new_cert != old_cert:
            if not certificate:
                check.add("status.certificate", "Forbidden: updates may not set certificate content")
            elif old_cert:
                check.add("status.certificate", "Forbidden: updates may not modify existing certificate content")


def _validate_labels(obj: CR, check: Checker) -> None:
    check.labels("metadata.labels", obj.metadata.labels)
    check.annotations("metadata.annotations", obj.metadata.annotations)


def _set_labels(obj: CR, labels: dict[str, str], annotations: dict[str, str]) -> None:
    obj.metadata.ClearField("labels")
    obj.metadata.labels.update(labels)
    obj.metadata.ClearField("annotations")
    obj.metadata.annotations.update(annotations)


def _preserve(content: dict[str, Any], before: dict[str, Any], kind: str) -> None:
    """The stored instances of condition `kind` in place of the written ones, when as many."""
    conditions = (content.get("status") or {}).get("conditions") or []
    new_at = [i for i, c in enumerate(conditions) if c.get("type") == kind]
    old = _conditions_of(before, kind)
    if len(new_at) == len(old):
        for i, kept in zip(new_at, old, strict=True):
            conditions[i] = kept


def _timestamps(content: dict[str, Any], before: dict[str, Any]) -> None:
    """upstream's populateConditionTimestamps: lastUpdateTime now when unset; lastTransitionTime
    the stored one while the status of that type is unchanged, else now."""
    now = rfc3339(time.time())
    for c in (content.get("status") or {}).get("conditions") or []:
        c.setdefault("lastUpdateTime", now)
        if "lastTransitionTime" not in c:
            old = [o for o in _conditions_of(before, c.get("type", "")) if o.get("status") == c.get("status")]
            c["lastTransitionTime"] = old[0].get("lastTransitionTime", now) if old else now


STRATEGIES = (CertificateSigningRequestStrategy,)
