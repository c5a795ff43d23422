"""ResourceQuota and LimitRange validation, worded as upstream's (pkg/apis/core/validation:
ValidateResourceQuota, ValidateLimitRange)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from apiserver.validation.checker import Checker
from kubeling import names
from kubeling.quantity import Quantity
from kubeling.quota import is_quota_resource_name
from kubeling.quota.evaluators import POD_RESOURCES, STANDARD_SCOPES
from protos.kubeling.v1 import core_pb2

__all__ = ["validate_resource_quota", "validate_resource_quota_update", "validate_resource_quota_status",
           "validate_limit_range", "LIMIT_TYPES"]

LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_CONFLICTING = ({"BestEffort", "NotBestEffort"}, {"Terminating", "NotTerminating"})
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
_STANDARD_CONTAINER = ("cpu", "memory", "ephemeral-storage", "storage")


def _integer_resource(name: str) -> bool:
    """Object counts and extended resources come in whole units (IsIntegerResourceName)."""
    return name.startswith("count/") or name in ("pods", "services", "replicationcontrollers", "resourcequotas",
                                                 "secrets", "configmaps", "persistentvolumeclaims",
                                                 "services.nodeports", "services.loadbalancers") or \
        ("/" in name and "kubernetes.io/" not in name)


def _resource_name(path: str, name: str, check: Checker, *, standard: Iterable[str] | None = None) -> bool:
    bad = names.qualified_name(name)
    for msg in bad:
        check.invalid(path, name, msg)
    if bad:
        return False
    if "/" not in name and standard is not None and name not in standard and not name.startswith("hugepages-"):
        check.invalid(path, name, "must be a standard resource type or fully qualified")
        return False
    return True


def _amounts(path: str, values: Mapping[str, str], check: Checker, *, quota: bool) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for name, text in values.items():
        key = f"{path}[{name}]"
        if quota:
            if _resource_name(key, name, check) and not is_quota_resource_name(name):
                check.invalid(key, name, "must be a standard resource for quota")
        q = check.quantity(key, text)
        if q is None:
            continue
        if q.value < 0:
            check.invalid(key, text, "must be greater than or equal to 0")
        elif quota and _integer_resource(name) and q.milli_value() % 1000:
            check.invalid(key, text, "must be an integer")
        out[name] = q
    return out


def _scope_fits(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource: BestEffort pods are only counted."""
    if scope == "BestEffort":
        return resource in ("pods", "count/pods")
    if scope in STANDARD_SCOPES:
        return resource in POD_RESOURCES
    return False


def _shown(values: Iterable[str]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


def validate_resource_quota(quota: core_pb2.ResourceQuota, check: Checker) -> None:
    spec = quota.spec
    _amounts("spec.hard", spec.hard, check, quota=True)
    standard_hard = [k for k in sorted(spec.hard) if "/" not in k and is_quota_resource_name(k)]
    scopes: set[str] = set()
    for scope in spec.scopes:
        if scope not in STANDARD_SCOPES:
            check.invalid("spec.scopes", _shown(spec.scopes), "unsupported scope")
        if any(not _scope_fits(scope, k) for k in standard_hard):
            check.invalid("spec.scopes", _shown(spec.scopes), "unsupported scope applied to resource")
        scopes.add(scope)
    if any(pair <= scopes for pair in _CONFLICTING):
        check.invalid("spec.scopes", _shown(spec.scopes), "conflicting scopes")
    if spec.HasField("scopeSelector"):
        _validate_scope_selector(spec, check)
    validate_resource_quota_status(quota, check)


def _validate_scope_selector(spec: core_pb2.ResourceQuotaSpec, check: Checker) -> None:
    path = "spec.scopeSelector.matchExpressions"
    standard_hard = [k for k in sorted(spec.hard) if "/" not in k and is_quota_resource_name(k)]
    scopes: set[str] = set()
    for req in spec.scopeSelector.matchExpressions:
        if req.scopeName not in STANDARD_SCOPES:
            check.invalid(f"{path}.scopeName", req.scopeName, "unsupported scope")
        if any(not _scope_fits(req.scopeName, k) for k in standard_hard):
            check.add(path, "Invalid value: the scope selector: unsupported scope applied to resource")
        if req.scopeName in _EXISTS_ONLY and req.operator != "Exists":
            check.invalid(f"{path}.operator", req.operator,
                          "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                          "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                          "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity")
        if req.operator in ("In", "NotIn"):
            if not req.values:
                check.add(f"{path}.values", "Required value: must be at least one value when `operator` is 'In' or "
                                            "'NotIn' for scope selector")
        elif req.operator in ("Exists", "DoesNotExist"):
            if req.values:
                check.invalid(f"{path}.values", _shown(req.values),
                              "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector")
        else:
            check.invalid(f"{path}.operator", req.operator, "not a valid selector operator")
        scopes.add(req.scopeName)
    if any(pair <= scopes for pair in _CONFLICTING):
        check.add(path, "Invalid value: the scope selector: conflicting scopes")


def validate_resource_quota_status(quota: core_pb2.ResourceQuota, check: Checker) -> None:
    _amounts("status.hard", quota.status.hard, check, quota=True)
    _amounts("status.used", quota.status.used, check, quota=True)


def validate_resource_quota_update(new: core_pb2.ResourceQuota, old: core_pb2.ResourceQuota,
                                   check: Checker) -> None:
    if set(new.spec.scopes) != set(old.spec.scopes):
        check.invalid("spec.scopes", _shown(new.spec.scopes), "field is immutable")


def validate_limit_range(lr: core_pb2.LimitRange, check: Checker) -> None:
    seen: set[str] = set()
    for i, item in enumerate(lr.spec.limits):
        path = f"spec.limits[{i}]"
        if item.type in seen:
            check.add(f"{path}.type", f'Duplicate value: "{item.type}"')
        seen.add(item.type)
        standard = ("storage",) if item.type == "PersistentVolumeClaim" else _STANDARD_CONTAINER
        bounds = {}
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            values = getattr(item, field)
            for name in values:
                _resource_name(f"{path}.{field}[{name}]", name, check, standard=standard)
            bounds[field] = _amounts(f"{path}.{field}", values, check, quota=False)
        if item.type == "Pod":
            if item.default:
                check.add(f"{path}.default", "Forbidden: may not be specified when `type` is 'Pod'")
            if item.defaultRequest:
                check.add(f"{path}.defaultRequest", "Forbidden: may not be specified when `type` is 'Pod'")
        if item.type == "PersistentVolumeClaim" and "storage" not in item.min and "storage" not in item.max:
            check.add(f"{path}.limits", "Required value: either minimum or maximum storage value is required, but "
                                        "neither was provided")
        _validate_bounds(path, bounds, check)


def _validate_bounds(path: str, bounds: dict[str, dict[str, Quantity]], check: Checker) -> None:
    """min <= defaultRequest <= default <= max, and a ratio of at least 1 that max/min allows."""
    low, high, default, request, ratio = (bounds[f] for f in ("min", "max", "default", "defaultRequest",
                                                              "maxLimitRequestRatio"))
    for name in sorted({k for values in bounds.values() for k in values}):
        at = f"{path}[{name}]"
        mn, mx, df, rq, rt = (v.get(name) for v in (low, high, default, request, ratio))
        if mn is not None and mx is not None and mx < mn:
            check.invalid(f"{at}.min", str(mn), f"min value {mn} is greater than max value {mx}")
        if rq is not None and mn is not None and rq < mn:
            check.invalid(f"{at}.defaultRequest", str(rq), f"min value {mn} is greater than default request value {rq}")
        if rq is not None and mx is not None and mx < rq:
            check.invalid(f"{at}.defaultRequest", str(rq), f"default request value {rq} is greater than max value {mx}")
        if rq is not None and df is not None and df < rq:
            check.invalid(f"{at}.defaultRequest", str(rq),
                          f"default request value {rq} is greater than default limit value {df}")
        if df is not None and mn is not None and df < mn:
            check.invalid(f"{at}.default", str(df), f"min value {mn} is greater than default value {df}")
        if df is not None and mx is not None and mx < df:
            check.invalid(f"{at}.default", str(df), f"default value {df} is greater than max value {mx}")
        if rt is not None and rt.value < 1:
            check.invalid(f"{at}.maxLimitRequestRatio", str(rt), f"ratio {rt} is less than 1")
        if rt is not None and mn is not None and mx is not None and mn.value > 0 and rt.value > mx.value / mn.value:
            check.invalid(f"{at}.maxLimitRequestRatio", str(rt),
                          f"ratio {rt} is greater than max/min = {float(mx.value / mn.value):f}")
