"""The question of a SubjectAccessReview (may this user do this?) as the authorizer's
attributes, and its answer: shared by the REST review endpoints and the gRPC
Authorization service the controllers use (the certificate approver asks it)."""

from __future__ import annotations

from typing import Any

from apiserver.auth.authentication import UserInfo
from apiserver.auth.authorization import Authorizer
from apiserver.auth.rbac import Attributes
from kubeling import errors

__all__ = ["review_attributes", "review_subject_access"]


def review_subject_access(spec: Any, namespace: str, authorizer: Authorizer | None,
                          kind: str = "SubjectAccessReview") -> dict[str, Any]:
    """The status of a SubjectAccessReview (a LocalSubjectAccessReview in `namespace`) of
    `spec` as JSON: {"allowed": ..., "reason": ...}; BadRequest/Invalid naming the field."""
    if not isinstance(spec, dict):
        raise errors.BadRequest("spec: Required value: the review needs a spec object")
    name, groups = spec.get("user") or "", spec.get("groups") or []
    if not isinstance(name, str) or not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise errors.BadRequest("spec.user must be a string and spec.groups a list of strings")
    if not name and not groups:
        raise errors.Invalid(f'{kind}.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least '
                             "one of user or group must be specified",
                             violations=[errors.FieldViolation("spec.user", 'Invalid value: "": at least one of '
                                                                            "user or group must be specified")])
    resource = spec.get("resourceAttributes")
    if namespace and isinstance(resource, dict):
        if resource.get("namespace", "") not in ("", namespace):
            raise errors.Invalid(f'{kind}.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: '
                                 f'Invalid value: "{resource["namespace"]}": must match metadata.namespace')
        resource["namespace"] = namespace
    extra: dict[str, Any] = spec["extra"] if isinstance(spec.get("extra"), dict) else {}
    user = UserInfo(name, str(spec.get("uid") or ""), tuple(groups),
                    tuple(sorted((str(k), tuple(v)) for k, v in extra.items() if isinstance(v, list))))
    allowed, reason = authorizer.authorize(review_attributes(user, spec)) if authorizer is not None else (True, "")
    return {"allowed": allowed, **({"reason": reason} if reason else {})}


def review_attributes(user: UserInfo, spec: dict[str, Any]) -> Attributes:
    """A SelfSubjectAccessReview's question as the authorizer's attributes."""
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(other, dict):
        raise errors.BadRequest("spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes "
                                "must be specified")

    def text(source: dict[str, Any], key: str) -> str:
        value = source.get(key, "")
        if not isinstance(value, str):
            raise errors.BadRequest(f"spec: {key}: Invalid value: must be a string")
        return value

    if isinstance(resource, dict):
        return Attributes(user, text(resource, "verb"), True, text(resource, "namespace"), text(resource, "group"),
                          text(resource, "resource"), text(resource, "subresource"), text(resource, "name"))
    assert isinstance(other, dict)
    return Attributes(user, text(other, "verb"), False, path=text(other, "path"))
