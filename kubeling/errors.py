"""API errors shared by the apiserver and its clients.

On the wire an error is a gRPC status whose details carry a `google.rpc.ErrorInfo`
(domain `kubeling.io`, `reason` as Kubernetes' StatusReason) and, for Invalid, a
`google.rpc.BadRequest` listing every field violation. `from_rpc_error` turns a
status back into the typed exception, so callers can `except Conflict:`.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "ApiError", "NotFound", "AlreadyExists", "Conflict", "Invalid", "BadRequest",
    "Expired", "Forbidden", "Unauthorized", "RequestEntityTooLarge", "WatcherTooSlow", "Timeout",
    "ServiceUnavailable", "InternalError", "TooManyRequests", "MethodNotAllowed", "FieldViolation", "from_rpc_error",
    "rpc_error_text", "DOMAIN",
]

DOMAIN = "kubeling.io"
_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    field: str
    description: str

    def __str__(self) -> str:
        return f"{self.field}: {self.description}"


class ApiError(Exception):
    """Base of every API error. `code` is the gRPC status, `reason` Kubernetes' StatusReason."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    reason: str = "Unknown"

    def __init__(self, message: str, *, metadata: dict[str, str] | None = None,
                 violations: list[FieldViolation] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = dict(metadata or {})
        self.violations = list(violations or [])

    def to_status_proto(self) -> status_pb2.Status:
        info = error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN, metadata=self.metadata)
        details = [_pack(info)]
        if self.violations:
            bad = error_details_pb2.BadRequest(field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                for v in self.violations])
            details.append(_pack(bad))
        return status_pb2.Status(code=self.code.value[0], message=self.message, details=details)

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return ((_DETAILS_KEY, self.to_status_proto().SerializeToString()),)


def _pack(msg: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(msg)
    return packed


class NotFound(ApiError):
    code, reason = grpc.StatusCode.NOT_FOUND, "NotFound"


class AlreadyExists(ApiError):
    code, reason = grpc.StatusCode.ALREADY_EXISTS, "AlreadyExists"


class Conflict(ApiError):
    """A precondition (resourceVersion, uid) failed, or the pod is bound already."""
    code, reason = grpc.StatusCode.ABORTED, "Conflict"


class Invalid(ApiError):
    """The object fails validation; `violations` names each field path."""
    code, reason = grpc.StatusCode.INVALID_ARGUMENT, "Invalid"


class BadRequest(ApiError):
    """The request itself is malformed (a selector that does not parse, a bad continue token)."""
    code, reason = grpc.StatusCode.INVALID_ARGUMENT, "BadRequest"


class Expired(ApiError):
    """Kubernetes' 410 Gone: the resourceVersion is older than what is kept; relist."""
    code, reason = grpc.StatusCode.OUT_OF_RANGE, "Expired"


class Unauthorized(ApiError):
    """The request's credentials are missing (where anonymous requests are not allowed) or invalid."""
    code, reason = grpc.StatusCode.UNAUTHENTICATED, "Unauthorized"


class Forbidden(ApiError):
    """The request is refused in the current state (e.g. a namespace being terminated)."""
    code, reason = grpc.StatusCode.FAILED_PRECONDITION, "Forbidden"


class RequestEntityTooLarge(ApiError):
    code, reason = grpc.StatusCode.RESOURCE_EXHAUSTED, "RequestEntityTooLarge"


class WatcherTooSlow(ApiError):
    """The watcher fell behind by more than its buffer; resume from the last resourceVersion."""
    code, reason = grpc.StatusCode.RESOURCE_EXHAUSTED, "WatcherTooSlow"


class Timeout(ApiError):
    code, reason = grpc.StatusCode.DEADLINE_EXCEEDED, "Timeout"


class ServiceUnavailable(ApiError):
    code, reason = grpc.StatusCode.UNAVAILABLE, "ServiceUnavailable"


class InternalError(ApiError):
    code, reason = grpc.StatusCode.INTERNAL, "InternalError"


class TooManyRequests(ApiError):
    """Refused for now, retry later (an eviction a PodDisruptionBudget forbids: 429).
    `metadata["cause"]`/`["causeMessage"]` name why, `["retryAfterSeconds"]` when to retry."""
    code, reason = grpc.StatusCode.RESOURCE_EXHAUSTED, "TooManyRequests"


class MethodNotAllowed(ApiError):
    """The verb is not served here (405): a create while a CRD is terminating."""
    code, reason = grpc.StatusCode.UNIMPLEMENTED, "MethodNotAllowed"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls for cls in (NotFound, AlreadyExists, Conflict, Invalid, BadRequest, Expired,
                                Forbidden, Unauthorized, RequestEntityTooLarge, WatcherTooSlow, Timeout,
                                ServiceUnavailable, InternalError, TooManyRequests, MethodNotAllowed)
}
_BY_CODE: dict[grpc.StatusCode, type[ApiError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.INVALID_ARGUMENT: BadRequest,
    grpc.StatusCode.OUT_OF_RANGE: Expired,
    grpc.StatusCode.FAILED_PRECONDITION: Forbidden,
    grpc.StatusCode.UNAUTHENTICATED: Unauthorized,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RequestEntityTooLarge,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.UNAVAILABLE: ServiceUnavailable,
    grpc.StatusCode.INTERNAL: InternalError,
}


def rpc_error_text(err: grpc.aio.AioRpcError) -> str:
    """A failed call as Go's gRPC status error prints it (what the CSI sidecars' and the
    kubelet's events quote): `rpc error: code = DeadlineExceeded desc = ...`."""
    return f"rpc error: code = {err.code().name.title().replace('_', '')} desc = {err.details()}"


def from_rpc_error(err: grpc.RpcError) -> ApiError:
    """The typed ApiError for a failed call (by ErrorInfo reason, else by status code)."""
    code = err.code()
    message = err.details() or ""
    reason, metadata, violations = "", {}, []
    for key, value in err.trailing_metadata() or ():
        if key != _DETAILS_KEY:
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(info) and info.domain == DOMAIN:
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Unpack(bad):
                violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code, ApiError)
    error = cls(message, metadata=metadata, violations=violations)
    if cls is ApiError:
        error.code = code
    return error

