"""One write as admission extensions see it: the AdmissionRequest a webhook receives (and
a policy's `request` variable), the objects as Kubernetes JSON, and which rules match it
(upstream's k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apiserver.admission.chain import CREATE, DELETE, UPDATE, AdmissionAttributes
from kubeling.kjson import to_json
from kubeling.scheme import ResourceType

__all__ = ["labels_of", "object_json", "admission_request", "rule_matches", "equivalents", "user_info", "EXEMPT",
           "is_exempt"]

# What admission extensions never see (upstream's rule: a broken webhook or policy must not
# lock out its own repair).
EXEMPT = frozenset({"validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                    "validatingadmissionpolicies", "validatingadmissionpolicybindings"})
_OPTIONS = {CREATE: "CreateOptions", UPDATE: "UpdateOptions", DELETE: "DeleteOptions"}
CONNECT = "CONNECT"


def labels_of(obj: Any | None) -> dict[str, str]:
    """An object's labels (a CONNECT's options have none)."""
    if obj is None or isinstance(obj, dict):
        return {}
    return dict(obj.metadata.labels)


def object_json(kind: ResourceType[Any] | None, obj: Any | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj  # a CONNECT's options, JSON already
    out = to_json(obj)
    if kind is not None and not kind.custom:
        out = {"kind": kind.kind, "apiVersion": kind.api_version, **out}
    return out


def user_info(attrs: AdmissionAttributes) -> dict[str, Any]:
    user = attrs.user
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra}
    return info


def admission_request(attrs: AdmissionAttributes, uid: str) -> dict[str, Any]:
    """AdmissionRequest (the same fields in admission.k8s.io v1 and v1beta1)."""
    kind = attrs.kind
    group = kind.group if kind is not None else ""
    version = kind.version if kind is not None else ""
    gvk = {"group": group, "version": version,
           "kind": attrs.options_kind or (kind.kind if kind is not None else "")}
    gvr = {"group": group, "version": version, "resource": attrs.resource}
    request: dict[str, Any] = {
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": attrs.name, "operation": attrs.operation, "userInfo": user_info(attrs),
        "object": object_json(kind, attrs.obj) if attrs.operation != DELETE else None,
        "oldObject": object_json(kind, attrs.old) if attrs.operation not in (CREATE, CONNECT) else None,
        "dryRun": attrs.dry_run,
        "options": attrs.obj if attrs.operation == CONNECT else
        {"kind": _OPTIONS.get(attrs.operation, "CreateOptions"), "apiVersion": "meta.k8s.io/v1"},
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    return request


def _any(values: Iterable[str], value: str) -> bool:
    return any(v == "*" or v == value for v in values)


def rule_matches(rule: dict[str, Any], attrs: AdmissionAttributes, group: str, version: str) -> bool:
    """A RuleWithOperations (and a NamedRuleWithOperations' resourceNames) against the
    write, its resource taken at group/version."""
    if not _any(rule.get("operations") or [], attrs.operation):
        return False
    if not _any(rule.get("apiGroups") or [], group) or not _any(rule.get("apiVersions") or [], version):
        return False
    names = rule.get("resourceNames") or []
    if names and attrs.name not in names:
        return False
    scope = rule.get("scope", "*")
    is_namespace = attrs.resource == "namespaces" and not group
    if scope == "Namespaced" and (is_namespace or not attrs.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not attrs.namespace):
        return False
    for entry in rule.get("resources") or []:
        res, _, sub = entry.partition("/")
        if (res == "*" or res == attrs.resource) and (sub == "*" or sub == attrs.subresource):
            return True
    return False


def equivalents(kind: ResourceType[Any] | None, resources: Iterable[ResourceType[Any]]) -> list[tuple[str, str]]:
    """The (group, version) the written resource is also served at (matchPolicy Equivalent):
    the other versions of the same group and resource."""
    if kind is None:
        return []
    return [(r.group, r.version) for r in resources
            if r is not kind and r.group == kind.group and r.plural == kind.plural]


def is_exempt(attrs: AdmissionAttributes) -> bool:
    return attrs.resource in EXEMPT and attrs.kind is not None and \
        attrs.kind.group == "admissionregistration.k8s.io"

