"""What one request is, whichever front end it came through (upstream's endpoints/request):
who presented what credentials, and what the request does in the terms authorization,
metrics and logs use."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from apiserver.auth.authentication import UserInfo
from apiserver.auth.rbac import Attributes
from apiserver.endpoints.impersonation import Impersonation
from kubeling import errors
from kubeling.scheme import ResourceType

__all__ = ["Credentials", "RequestInfo", "SubresourceHandler", "dry_run_requested"]

# What serves a subresource in both front ends (pods' binding, eviction and log,
# serviceaccounts' token): the decoded request message and its dryRun -> the answer (an
# async iterator of messages for a stream, e.g. the log). By (resource, subresource).
SubresourceHandler = Callable[[Any, bool], Any]


@dataclass(frozen=True, slots=True)
class Credentials:
    """What the caller presented: the user of its verified client certificate, and its
    Authorization header (REST) or metadata (gRPC)."""

    certificate_user: UserInfo | None = None
    authorization: str | None = None
    impersonation: Impersonation | None = None  # who the caller asks to act as


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request does (upstream's RequestInfo): a verb on a resource (its group,
    plural and subresource, the namespace and name), or a verb on a path that names no
    resource (/healthz, /version, discovery)."""

    verb: str  # get, list, watch, create, update, patch, delete, deletecollection (or the HTTP method's)
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    version: str = ""  # of the resource, when the front end knows it (the audit log's objectRef)

    @classmethod
    def of(cls, verb: str, rt: ResourceType[Any], namespace: str = "", name: str = "",
           subresource: str = "") -> RequestInfo:
        """A request on a resource of the scheme (a cluster-scoped one has no namespace;
        a namespaced one without a namespace asks across all of them)."""
        return cls(verb, True, rt.group, rt.plural, subresource, namespace if rt.namespaced else "", name,
                   version=rt.version)

    @classmethod
    def non_resource(cls, verb: str, path: str) -> RequestInfo:
        return cls(verb, False, path=path)

    def attributes(self, user: UserInfo) -> Attributes:
        return Attributes(user, self.verb, self.resource_request, self.namespace, self.group, self.resource,
                          self.subresource, self.name, self.path)

    @property
    def target(self) -> str:
        """namespace/name (or the scope of a list), for logs."""
        if not self.resource_request:
            return self.path
        if self.namespace:
            return f"{self.namespace}/{self.name or '*'}"
        return self.name or "*"


# This call's dryRun (the client's `dry-run: All` metadata, or REST's dryRun=All), for the write it makes.
dry_run_requested: contextvars.ContextVar[bool] = contextvars.ContextVar("dry_run_requested", default=False)

# How a long step of this request (encoding a big list) gives the event loop back: Priority
# and Fairness's (a wide request waits a moment for the narrow ones in flight), else a turn.
yield_turn: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = contextvars.ContextVar(
    "yield_turn", default=None)


# An error's HTTP status, by its reason: what REST answers with and what audit records
# for either front end.
_CODES = {"NotFound": 404, "AlreadyExists": 409, "Conflict": 409, "Invalid": 422, "BadRequest": 400,
          "Expired": 410, "Gone": 410, "Unauthorized": 401, "Forbidden": 403, "RequestEntityTooLarge": 413,
          "Timeout": 504, "ServiceUnavailable": 503, "InternalError": 500, "MethodNotAllowed": 405,
          "NotAcceptable": 406, "UnsupportedMediaType": 415, "WatcherTooSlow": 500, "TooManyRequests": 429}


def http_code(err: errors.ApiError) -> int:
    code = err.metadata.get("code", "")
    if code.isdigit():  # the code a webhook refused with
        return int(code)
    return _CODES.get(err.reason, 500)

