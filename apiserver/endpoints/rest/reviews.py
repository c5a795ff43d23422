"""The self-reviews (`kubectl auth whoami`, `kubectl auth can-i`): SelfSubjectReview
(who the server takes the caller for), SelfSubjectAccessReview (may I do this?) and
SelfSubjectRulesReview (what may I do here?), answered by the authorizer that decides the
requests themselves."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from apiserver.auth.authentication import ANONYMOUS, UserInfo, current_user
from apiserver.auth.authorization import EVERYTHING, Authorizer
from apiserver.auth.rbac import Attributes
from apiserver.endpoints.rest.handlers import body_of
from apiserver.endpoints.rest.request import json_response
from apiserver.endpoints.rest.routes import ACCESS_REVIEWS, RULES_REVIEWS
from kubeling import errors

__all__ = ["access_review", "self_subject_review"]


def self_subject_review() -> web.Response:
    """authentication.k8s.io/v1 SelfSubjectReview."""
    user = current_user.get()
    info: dict[str, Any] = {"username": user.name if user else ""}
    if user is not None and user.uid:
        info["uid"] = user.uid
    if user is not None and user.groups:
        info["groups"] = list(user.groups)
    return json_response({"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                          "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}}, 201)


async def access_review(request: web.Request, path: str, authorizer: Authorizer | None) -> web.Response:
    """SelfSubjectAccessReview or SelfSubjectRulesReview, by path."""
    body = await body_of(request, None)
    spec = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(spec, dict):
        raise errors.BadRequest("spec: Required value: the review needs a spec object")
    user = current_user.get() or ANONYMOUS
    kind = "SelfSubjectAccessReview" if path == ACCESS_REVIEWS else "SelfSubjectRulesReview"
    if path == RULES_REVIEWS:
        namespace = spec.get("namespace", "")
        if not isinstance(namespace, str):
            raise errors.BadRequest("spec.namespace: Invalid value: must be a string")
        rules = authorizer.rules_for(user, namespace) if authorizer is not None else EVERYTHING
        status: dict[str, Any] = {
            "resourceRules": [{"verbs": list(r.verbs), "apiGroups": list(r.api_groups),
                               "resources": list(r.resources),
                               **({"resourceNames": list(r.resource_names)} if r.resource_names else {})}
                              for r in rules if not r.non_resource_urls],
            "nonResourceRules": [{"verbs": list(r.verbs), "nonResourceURLs": list(r.non_resource_urls)}
                                 for r in rules if r.non_resource_urls],
            "incomplete": False}
    else:
        attrs = _review_attributes(user, spec)
        allowed, reason = authorizer.authorize(attrs) if authorizer is not None else (True, "")
        status = {"allowed": allowed, **({"reason": reason} if reason else {})}
    return json_response({"kind": kind, "apiVersion": "authorization.k8s.io/v1",
                          "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}, 201)


def _review_attributes(user: UserInfo, spec: dict[str, Any]) -> Attributes:
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
