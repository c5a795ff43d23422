"""API errors as Kubernetes `Status` objects with their HTTP codes (what kubectl prints
as `Error from server (NotFound): pods "x" not found`)."""

from __future__ import annotations

from typing import Any

from kubeling import errors
from kubeling.errors import MethodNotAllowed

__all__ = ["http_code", "status_json", "MethodNotAllowed", "NotAcceptable", "UnsupportedMediaType"]

_CODES = {"NotFound": 404, "AlreadyExists": 409, "Conflict": 409, "Invalid": 422, "BadRequest": 400,
          "Expired": 410, "Gone": 410, "Unauthorized": 401, "Forbidden": 403, "RequestEntityTooLarge": 413,
          "Timeout": 504, "ServiceUnavailable": 503, "InternalError": 500, "MethodNotAllowed": 405,
          "NotAcceptable": 406, "UnsupportedMediaType": 415, "WatcherTooSlow": 500, "TooManyRequests": 429}


class NotAcceptable(errors.ApiError):
    reason = "NotAcceptable"


class UnsupportedMediaType(errors.ApiError):
    reason = "UnsupportedMediaType"


def http_code(err: errors.ApiError) -> int:
    code = err.metadata.get("code", "")
    if code.isdigit():  # the code a webhook refused with
        return int(code)
    return _CODES.get(err.reason, 500)


def status_json(err: errors.ApiError, resource: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": err.message, "reason": err.reason, "code": http_code(err)}
    details: dict[str, Any] = {}
    if err.metadata.get("name"):
        details["name"] = err.metadata["name"]
    # Upstream names the resource (plural) for lookups and the kind for invalid objects.
    if err.reason == "Invalid" and err.metadata.get("kind"):
        details["kind"] = err.metadata["kind"]
    elif resource and details:
        details["kind"] = resource
    if err.metadata.get("cause"):
        details["causes"] = [{"reason": err.metadata["cause"], "message": err.metadata.get("causeMessage", "")}]
    if err.metadata.get("retryAfterSeconds"):
        details["retryAfterSeconds"] = int(err.metadata["retryAfterSeconds"])
    if err.violations:
        details["causes"] = [{"reason": "FieldValueRequired" if v.description.startswith("Required")
                              else "FieldValueInvalid", "message": v.description, "field": v.field}
                             for v in err.violations]
    if details or err.reason == "NotFound":
        # Clients read details.name of a NotFound (kubectl debug tells a missing subresource
        # by an empty one; a Status without details crashed it).
        out["details"] = details
    return out
