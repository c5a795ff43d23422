"""What a REST URL names (upstream's RequestInfoFactory): a resource of the scheme (its
namespace, name and subresource), one of the reviews, or a path that names no resource
(or one an extension apiserver serves: apiserver.aggregator); and the request's verb in
authorization's terms."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from apiserver.endpoints.request import RequestInfo
from apiserver.endpoints.rest.request import Target, flag
from kubeling.scheme import Scheme

__all__ = ["Route", "route", "SELF_SUBJECT_REVIEWS", "ACCESS_REVIEWS", "RULES_REVIEWS", "TOKEN_REVIEWS",
           "SUBJECT_ACCESS_REVIEWS", "local_review_namespace"]

SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"  # `kubectl auth whoami`
# `kubectl auth can-i VERB RESOURCE` and `kubectl auth can-i --list`
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
# What extension servers and webhooks ask: is this token good (TokenReview), may this user
# do this (SubjectAccessReview, and LocalSubjectAccessReview within one namespace).
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
LOCAL_ACCESS_REVIEWS = "localsubjectaccessreviews"
_REVIEWS = {SELF_SUBJECT_REVIEWS: ("authentication.k8s.io", "selfsubjectreviews"),
            ACCESS_REVIEWS: ("authorization.k8s.io", "selfsubjectaccessreviews"),
            RULES_REVIEWS: ("authorization.k8s.io", "selfsubjectrulesreviews"),
            TOKEN_REVIEWS: ("authentication.k8s.io", "tokenreviews"),
            SUBJECT_ACCESS_REVIEWS: ("authorization.k8s.io", "subjectaccessreviews")}
_LOCAL_PREFIX = "/apis/authorization.k8s.io/v1/namespaces/"
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Route:
    """The request's RequestInfo, and what serves it: a scheme resource (`target`), or none
    (a path)."""

    info: RequestInfo
    path: str
    target: Target | None = None

    @property
    def label(self) -> str:
        """The scheme resource, for metrics and errors ("-": none)."""
        return self.target.resource.plural if self.target is not None else "-"


def route(scheme: Scheme, request: web.Request) -> Route:
    path = request.path.rstrip("/") or "/"
    method = request.method
    if path in _REVIEWS:
        group, resource = _REVIEWS[path]
        return Route(RequestInfo(_VERBS.get(method, method.lower()), True, group, resource), path)
    namespace = local_review_namespace(path)
    if namespace:
        return Route(RequestInfo(_VERBS.get(method, method.lower()), True, "authorization.k8s.io",
                                 LOCAL_ACCESS_REVIEWS, "", namespace), path)
    target = resource_target(scheme, path)
    if target is None:
        return Route(RequestInfo.non_resource(method.lower(), path), path)
    r = target.resource
    if target.sub == "proxy":
        # the path after /proxy as the client wrote it (a trailing slash matters to the backend)
        marker = f"/{target.name}/proxy"
        target.proxy_path = request.path[request.path.index(marker) + len(marker):] or "/"
        verb = _PROXY_METHOD_VERBS.get(method, method.lower())
        return Route(RequestInfo(verb, True, r.group, r.plural, target.sub, target.namespace, target.name,
                                 version=r.version), path, target=target)
    if method == "GET":
        verb = _read_verb(request, target.name)
    elif method == "DELETE":
        verb = "delete" if target.name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Route(RequestInfo(verb, True, r.group, r.plural, target.sub, target.namespace, target.name,
                             version=r.version), path, target=target)


# upstream's RequestInfoFactory for a proxied request: HEAD reads, the others as usual.
_PROXY_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                       "DELETE": "delete"}


def local_review_namespace(path: str) -> str:
    """The namespace of a LocalSubjectAccessReview's path ("": not one)."""
    if not path.startswith(_LOCAL_PREFIX):
        return ""
    namespace, _, rest = path[len(_LOCAL_PREFIX):].partition("/")
    return namespace if rest == LOCAL_ACCESS_REVIEWS else ""


def _read_verb(request: web.Request, name: str) -> str:
    return "get" if name else "watch" if flag(request.query.get("watch")) else "list"


def resource_target(scheme: Scheme, path: str) -> Target | None:
    """/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/..., when the
    scheme has that resource (and subresource)."""
    parts = path.split("/")[1:]
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        inner = scheme.lookup(group, version, rest[2])
        if inner is not None and inner.namespaced:
            namespace, rest = rest[1], rest[2:]
    resource = scheme.lookup(group, version, rest[0])
    if resource is None or (len(rest) > 3 and rest[2] != "proxy"):  # proxy: a path follows
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and resource.subresource(sub) is None:
        return None
    if resource.namespaced and name and not namespace:
        return None
    return Target(resource, namespace, name, sub)
