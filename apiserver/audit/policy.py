"""An audit Policy (`audit.k8s.io/v1`, upstream's k8s.io/apiserver/pkg/audit/policy): the
first rule that matches a request gives its level — None, Metadata, Request,
RequestResponse — and the stages left out; no rule matching is None."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo

__all__ = ["Policy", "Rule", "load_policy", "parse_policy", "LEVELS", "STAGES", "DEFAULT_POLICY"]

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


@dataclass(frozen=True)
class _Resources:
    group: str
    resources: tuple[str, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    level: str
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[_Resources, ...] = ()
    namespaces: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool | None = None  # None: the policy's

    def matches(self, user: UserInfo, info: RequestInfo) -> bool:
        if self.users and user.name not in self.users:
            return False
        if self.groups and not set(self.groups) & set(user.groups):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(info)
        if self.urls:
            return not info.resource_request and any(_path_matches(info.path, spec) for spec in self.urls)
        return True

    def _matches_resource(self, info: RequestInfo) -> bool:
        if not info.resource_request:
            return False
        if self.namespaces and info.namespace not in self.namespaces:
            return False  # cluster-scoped requests have the namespace ""
        if not self.resources:
            return True
        combined = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        for gr in self.resources:
            if gr.group != info.group:
                continue
            if not gr.resources:
                return True
            if gr.names and info.name not in gr.names:
                continue
            for res in gr.resources:
                if res in (combined, "*"):
                    return True
                if info.subresource and res.startswith("*/") and res[2:] == info.subresource:
                    return True
                if res.endswith("/*") and res[:-2] == info.resource:
                    return True
        return False


def _path_matches(path: str, spec: str) -> bool:
    return spec in ("*", path) or (spec.endswith("*") and path.startswith(spec.rstrip("*")))


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool = False  # metadata.managedFields left out of the objects recorded

    def rule_for(self, user: UserInfo, info: RequestInfo) -> Rule | None:
        """The first rule that matches the request."""
        return next((rule for rule in self.rules if rule.matches(user, info)), None)

    def level_for(self, user: UserInfo, info: RequestInfo) -> tuple[str, frozenset[str]]:
        """The request's level and the stages not to record."""
        rule = self.rule_for(user, info)
        if rule is None:
            return "None", frozenset(self.omit_stages)
        return rule.level, frozenset(self.omit_stages) | frozenset(rule.omit_stages)

    def omits_managed_fields(self, rule: Rule | None) -> bool:
        return self.omit_managed_fields if rule is None or rule.omit_managed_fields is None \
            else rule.omit_managed_fields


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: must be a list of strings")
    return tuple(value)


def _stages(value: Any, where: str) -> tuple[str, ...]:
    stages = _strings(value, where)
    for stage in stages:
        if stage not in STAGES:
            raise ValueError(f'{where}: Unsupported value: "{stage}": supported values: '
                             + ", ".join(f'"{s}"' for s in STAGES))
    return stages


def parse_policy(data: Any, source: str = "the audit policy") -> Policy:
    """A Policy from its YAML/JSON document, or ValueError naming the field."""
    if not isinstance(data, dict) or data.get("kind") != "Policy" or \
            data.get("apiVersion") not in ("audit.k8s.io/v1", "audit.k8s.io/v1beta1"):
        raise ValueError(f"{source}: expected an audit.k8s.io/v1 Policy")
    rules: list[Rule] = []
    for i, raw in enumerate(data.get("rules") or []):
        where = f"{source}: rules[{i}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: must be an object")
        level = raw.get("level")
        if level not in LEVELS:
            raise ValueError(f'{where}.level: Unsupported value: "{level}": supported values: '
                             + ", ".join(f'"{v}"' for v in LEVELS))
        resources = []
        for j, gr in enumerate(raw.get("resources") or []):
            if not isinstance(gr, dict):
                raise ValueError(f"{where}.resources[{j}]: must be an object")
            resources.append(_Resources(str(gr.get("group", "")), _strings(gr.get("resources"),
                                                                           f"{where}.resources[{j}].resources"),
                                        _strings(gr.get("resourceNames"), f"{where}.resources[{j}].resourceNames")))
        urls = _strings(raw.get("nonResourceURLs"), f"{where}.nonResourceURLs")
        if urls and (resources or raw.get("namespaces")):
            raise ValueError(f"{where}.nonResourceURLs: Invalid value: rules cannot apply to both regular "
                             "resources and non-resource URLs")
        rules.append(Rule(level, _strings(raw.get("users"), f"{where}.users"),
                          _strings(raw.get("userGroups"), f"{where}.userGroups"),
                          _strings(raw.get("verbs"), f"{where}.verbs"), tuple(resources),
                          _strings(raw.get("namespaces"), f"{where}.namespaces"), urls,
                          _stages(raw.get("omitStages"), f"{where}.omitStages"),
                          _flag(raw.get("omitManagedFields"), f"{where}.omitManagedFields")))
    return Policy(tuple(rules), _stages(data.get("omitStages"), f"{source}: omitStages"),
                  bool(_flag(data.get("omitManagedFields"), f"{source}: omitManagedFields")))


def _flag(value: Any, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{where}: must be true or false")
    return value


def load_policy(path: Path) -> Policy:
    return parse_policy(yaml.safe_load(path.read_text()), str(path))


def _groups(*entries: tuple[str, Iterable[str]]) -> list[dict[str, Any]]:
    return [{"group": group, "resources": list(resources)} for group, resources in entries]


# What `kubeling up` audits (after upstream's and GKE's examples): the noise of health
# checks, node heartbeats, kube-proxy's watches and Events left out; Secrets, ConfigMaps
# and tokens at Metadata only (never their content); reads at Metadata; every write with
# its request and response.
DEFAULT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/version", "/metrics"]},
        {"level": "None", "users": ["system:kube-proxy"], "verbs": ["watch"],
         "resources": _groups(("", ("endpoints", "services")), ("discovery.k8s.io", ("endpointslices",)))},
        {"level": "None", "userGroups": ["system:nodes"], "verbs": ["get", "update", "patch"],
         "resources": _groups(("coordination.k8s.io", ("leases",)), ("", ("nodes/status",)))},
        {"level": "None", "users": ["system:kube-controller-manager", "system:kube-scheduler"],
         "verbs": ["get", "update"], "namespaces": ["kube-system"],
         "resources": _groups(("coordination.k8s.io", ("leases",)))},
        {"level": "None", "resources": _groups(("", ("events",)), ("events.k8s.io", ("events",)))},
        {"level": "Metadata", "resources": _groups(("", ("secrets", "configmaps", "serviceaccounts/token")),
                                                   ("authentication.k8s.io", ("tokenreviews",)))},
        {"level": "Metadata", "verbs": ["get", "list", "watch"]},
        {"level": "RequestResponse"},
    ]}
