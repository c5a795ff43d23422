"""The reviews. The self-reviews (`kubectl auth whoami`, `kubectl auth can-i`):
SelfSubjectReview (who the server takes the caller for), SelfSubjectAccessReview (may I
do this?) and SelfSubjectRulesReview (what may I do here?). And those extension servers
and webhooks ask about others: TokenReview (whose token is this?), SubjectAccessReview and
LocalSubjectAccessReview (may this user do this?). Answered by the authenticator and the
authorizer that decide the requests themselves."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from apiserver.auth.access_review import review_attributes, review_subject_access
from apiserver.auth.authentication import ANONYMOUS, Authenticator, UserInfo, current_user
from apiserver.auth.authorization import EVERYTHING, Authorizer
from apiserver.endpoints.rest.handlers import body_of
from apiserver.endpoints.rest.request import respond
from apiserver.endpoints.rest.routes import ACCESS_REVIEWS, RULES_REVIEWS
from kubeling import errors

__all__ = ["access_review", "self_subject_review", "token_review", "subject_access_review"]


def self_subject_review(request: web.Request) -> web.Response:
    """authentication.k8s.io/v1 SelfSubjectReview."""
    user = current_user.get()
    info: dict[str, Any] = {"username": user.name if user else ""}
    if user is not None and user.uid:
        info["uid"] = user.uid
    if user is not None and user.groups:
        info["groups"] = list(user.groups)
    return respond(request, {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
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
        attrs = review_attributes(user, spec)
        allowed, reason = authorizer.authorize(attrs) if authorizer is not None else (True, "")
        status = {"allowed": allowed, **({"reason": reason} if reason else {})}
    return respond(request, {"kind": kind, "apiVersion": "authorization.k8s.io/v1",
                          "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}, 201)


def _user_json(user: UserInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra}
    return out


async def token_review(request: web.Request, authenticator: Authenticator | None) -> web.Response:
    """authentication.k8s.io/v1 TokenReview: the token's user, or why it is none."""
    body = await body_of(request, None)
    spec = body.get("spec") if isinstance(body, dict) else None
    token = spec.get("token") if isinstance(spec, dict) else None
    if not isinstance(token, str) or not token:
        raise errors.Invalid("TokenReview.authentication.k8s.io \"\" is invalid: spec.token: Required value",
                             violations=[errors.FieldViolation("spec.token", "Required value")])
    status: dict[str, Any] = {"user": {}}
    try:
        user = authenticator.authenticate(None, f"Bearer {token}") if authenticator is not None else None
    except errors.Unauthorized:
        user = None
        status["error"] = "[invalid bearer token, token lookup failed]"
    if user is not None and user.name != ANONYMOUS.name:
        status = {"authenticated": True, "user": _user_json(user)}
        if isinstance(spec, dict) and spec.get("audiences"):
            status["audiences"] = list(spec["audiences"])
    return respond(request, {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                          "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}, 201)


async def subject_access_review(request: web.Request, namespace: str, authorizer: Authorizer | None) -> web.Response:
    """authorization.k8s.io/v1 SubjectAccessReview (namespace ""), or a namespace's
    LocalSubjectAccessReview: may spec.user (with spec.groups) do this?"""
    body = await body_of(request, None)
    spec = body.get("spec") if isinstance(body, dict) else None
    kind = "LocalSubjectAccessReview" if namespace else "SubjectAccessReview"
    status = review_subject_access(spec, namespace, authorizer, kind)
    meta: dict[str, Any] = {"creationTimestamp": None, **({"namespace": namespace} if namespace else {})}
    return respond(request, {"kind": kind, "apiVersion": "authorization.k8s.io/v1", "metadata": meta,
                          "spec": spec, "status": status}, 201)
