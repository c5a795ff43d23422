"""API errors as Kubernetes `Status` objects with their HTTP codes (what kubectl prints
as `Error from server (NotFound): pods "x" not found`)."""

from __future__ import annotations

from typing import Any

from apiserver.endpoints.request import http_code
from kubeling import errors
from kubeling.errors import MethodNotAllowed

__all__ = ["http_code", "status_json", "MethodNotAllowed", "NotAcceptable", "UnsupportedMediaType"]


class NotAcceptable(errors.ApiError):
    reason = "NotAcceptable"


class UnsupportedMediaType(errors.ApiError):
    reason = "UnsupportedMediaType"


# What a field error's wording says it is (upstream's field.ErrorType, as a cause's reason).
_CAUSE_TYPES = (("Required value", "FieldValueRequired"), ("Invalid value", "FieldValueInvalid"),
                ("Unsupported value", "FieldValueNotSupported"), ("Duplicate value", "FieldValueDuplicate"),
                ("Forbidden", "FieldValueForbidden"), ("Too long", "FieldValueTooLong"),
                ("Too many", "FieldValueTooMany"), ("Not found", "FieldValueNotFound"),
                ("Internal error", "InternalError"))


def _cause_type(description: str) -> str:
    return next((kind for prefix, kind in _CAUSE_TYPES if description.startswith(prefix)), "FieldValueInvalid")


def status_json(err: errors.ApiError, resource: str = "") -> dict[str, Any]:
    """A metav1.Status as upstream writes it, field for field and in its order (kind,
    apiVersion, metadata, status, message, reason, details, code): clients compare them."""
    meta = err.metadata
    # an expired continue token's successor (the list's metadata.continue)
    list_meta = {"continue": meta["continue"]} if meta.get("continue") else {}
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": list_meta, "status": "Failure",
                           "message": err.message, "reason": err.reason}
    details: dict[str, Any] = {}
    if meta.get("name"):
        details["name"] = meta["name"]
    if meta.get("group"):
        details["group"] = meta["group"]
    # Upstream names the kind for invalid objects and the resource (plural) otherwise.
    if err.reason == "Invalid" and meta.get("kind"):
        details["kind"] = meta["kind"]
    elif meta.get("resource"):
        details["kind"] = meta["resource"]
    elif resource and details:
        details["kind"] = resource
    if meta.get("cause"):
        cause = {"reason": meta["cause"], "message": meta.get("causeMessage", "")}
        if meta.get("causeField"):
            cause["field"] = meta["causeField"]
        details["causes"] = [cause]
    if err.violations:
        details["causes"] = [{"reason": _cause_type(v.description), "message": v.description, "field": v.field}
                             for v in err.violations]
    if meta.get("retryAfterSeconds"):
        details["retryAfterSeconds"] = int(meta["retryAfterSeconds"])
    if details or err.reason == "NotFound":
        # Clients read details.name of a NotFound (kubectl debug tells a missing subresource
        # by an empty one; a Status without details crashed it).
        out["details"] = details
    out["code"] = http_code(err)
    return out
