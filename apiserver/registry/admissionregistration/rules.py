"""What webhooks and policies share: rules (operations, groups, versions, resources,
scope), selectors, match conditions and where a webhook is reached, with upstream's
schemas, defaults and field errors."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

from apiserver.registry.generic.json_strategy import LABEL_SELECTOR, array, integer, obj, string
from apiserver.validation import Checker
from apiserver.validation.pods import validate_label_selector
from kubeling import errors, names
from kubeling.kjson import from_json
from kubeling.selectors import LabelSelector, SelectorError, from_label_selector_proto
from protos.kubeling.v1 import meta_pb2

__all__ = ["RULE", "NAMED_RULE", "MATCH_RESOURCES", "MATCH_CONDITIONS", "CLIENT_CONFIG", "validate_rule",
           "validate_named_rule", "validate_match_resources", "validate_match_conditions", "validate_client_config",
           "validate_selector", "compiled_selector", "OPERATIONS", "FAILURE_POLICIES", "MATCH_POLICIES",
           "parse_selector"]

OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
_SCOPES = ("*", "Cluster", "Namespaced")

RULE_FIELDS = {"operations": array(string()), "apiGroups": array(string()), "apiVersions": array(string()),
               "resources": array(string()), "scope": string(default="*")}
RULE = obj(RULE_FIELDS)
NAMED_RULE = obj({**RULE_FIELDS, "resourceNames": array(string())})
MATCH_RESOURCES = obj({"namespaceSelector": {**LABEL_SELECTOR, "default": {}},
                       "objectSelector": {**LABEL_SELECTOR, "default": {}},
                       "resourceRules": array(NAMED_RULE), "excludeResourceRules": array(NAMED_RULE),
                       "matchPolicy": string(default="Equivalent")})
MATCH_CONDITIONS = array(obj({"name": string(), "expression": string()}))
CLIENT_CONFIG = obj({"url": string(), "caBundle": string(),
                     "service": obj({"namespace": string(), "name": string(), "path": string(),
                                     "port": integer(default=443)})})


def _wild(values: list[str]) -> bool:
    return "*" in values


def _shown(values: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _resources(resources: list[str], path: str, check: Checker) -> None:
    """Upstream's validateResources: `x/*`, `*/x`, `*/*` and `*` may not overlap."""
    if not resources:
        check.add(path, "Required value")
    with_wild_sub: set[str] = set()
    sub_with_wild_res: set[str] = set()
    double = single = plain = False
    for i, res_sub in enumerate(resources):
        if not res_sub:
            check.add(f"{path}[{i}]", "Required value")
            continue
        double |= res_sub == "*/*"
        single |= res_sub == "*"
        res, slash, sub = res_sub.partition("/")
        if not slash:
            plain = res_sub != "*"
            continue
        if res in with_wild_sub:
            check.invalid(f"{path}[{i}]", res_sub, f"if '{res}/*' is present, must not specify {res_sub}")
        if sub in sub_with_wild_res:
            check.invalid(f"{path}[{i}]", res_sub, f"if '*/{sub}' is present, must not specify {res_sub}")
        if sub == "*":
            with_wild_sub.add(res)
        if res == "*":
            sub_with_wild_res.add(sub)
    if len(resources) > 1 and double:
        check.add(path, f"Invalid value: {_shown(resources)}: if '*/*' is present, must not specify other resources")
    if single and plain:
        check.add(path, f"Invalid value: {_shown(resources)}: if '*' is present, must not specify other resources "
                        "without subresources")


def validate_rule(rule: dict[str, Any], path: str, check: Checker) -> None:
    """A RuleWithOperations."""
    operations = rule.get("operations") or []
    if not operations:
        check.add(f"{path}.operations", "Required value")
    if len(operations) > 1 and _wild(operations):
        check.add(f"{path}.operations", f"Invalid value: {_shown(operations)}: if '*' is present, must not specify "
                                        "other operations")
    for i, op in enumerate(operations):
        check.unsupported(f"{path}.operations[{i}]", op, OPERATIONS)
    groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
    if not groups:
        check.add(f"{path}.apiGroups", "Required value")
    if len(groups) > 1 and _wild(groups):
        check.add(f"{path}.apiGroups", f"Invalid value: {_shown(groups)}: if '*' is present, must not specify other "
                                       "API groups")
    if not versions:
        check.add(f"{path}.apiVersions", "Required value")
    if len(versions) > 1 and _wild(versions):
        check.add(f"{path}.apiVersions", f"Invalid value: {_shown(versions)}: if '*' is present, must not specify "
                                         "other API versions")
    for i, v in enumerate(versions):
        if not v:
            check.add(f"{path}.apiVersions[{i}]", "Required value")
    _resources(rule.get("resources") or [], f"{path}.resources", check)
    if "scope" in rule:
        check.unsupported(f"{path}.scope", rule["scope"], _SCOPES)


def validate_named_rule(rule: dict[str, Any], path: str, check: Checker) -> None:
    seen: set[str] = set()
    for i, name in enumerate(rule.get("resourceNames") or []):
        check.name(f"{path}.resourceNames[{i}]", name, names.path_segment_name)
        if name in seen:
            check.add(f"{path}.resourceNames[{i}]", f'Duplicate value: "{name}"')
        seen.add(name)
    validate_rule(rule, path, check)


def parse_selector(value: dict[str, Any] | None) -> meta_pb2.LabelSelector:
    return from_json(value or {}, meta_pb2.LabelSelector).message


def compiled_selector(value: dict[str, Any] | None) -> LabelSelector | None:
    """A stored selector for matching; None (matches nothing) for one that does not compile
    (validation refuses those on the way in: only an object stored before could have one)."""
    try:
        return from_label_selector_proto(parse_selector(value))
    except (SelectorError, ValueError, errors.ApiError):
        return None


def validate_selector(value: dict[str, Any] | None, path: str, check: Checker) -> None:
    try:
        selector = parse_selector(value)
    except errors.ApiError as err:
        check.add(path, f"Invalid value: {err.message}")
        return
    validate_label_selector(selector, path, check)


def validate_match_resources(match: dict[str, Any] | None, path: str, check: Checker) -> None:
    if match is None:
        return
    if "matchPolicy" not in match:
        check.add(f"{path}.matchPolicy", "Required value")
    else:
        check.unsupported(f"{path}.matchPolicy", match["matchPolicy"], MATCH_POLICIES)
    for key in ("namespaceSelector", "objectSelector"):
        if key not in match:
            check.add(f"{path}.{key}", "Required value")
        else:
            validate_selector(match[key], f"{path}.{key}", check)
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or []):
            validate_named_rule(rule, f"{path}.{key}[{i}]", check)


_CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def validate_match_conditions(conditions: list[dict[str, Any]], path: str, check: Checker,
                              compile_error: Any) -> None:
    """Names unique and qualified, expressions that compile (`compile_error(text)`: None or
    the compiler's message)."""
    if len(conditions) > 64:
        check.add(path, f"Too many: {len(conditions)}: must have at most 64 items")
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        expression = (cond.get("expression") or "").strip()
        if not expression:
            check.add(f"{path}[{i}].expression", "Required value")
        else:
            problem = compile_error(expression)
            if problem:
                check.invalid(f"{path}[{i}].expression", expression, problem)
        name = cond.get("name") or ""
        if not name:
            check.add(f"{path}[{i}].name", "Required value")
        else:
            check.name(f"{path}[{i}].name", name, names.qualified_name)
            if name in seen:
                check.add(f"{path}[{i}].name", f'Duplicate value: "{name}"')
            seen.add(name)


def validate_client_config(config: dict[str, Any], path: str, check: Checker) -> None:
    """Upstream's ValidateWebhookURL (https only) and ValidateWebhookService."""
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        check.add(path, "Required value: exactly one of url or service is required")
    elif url is not None:
        _url(url, f"{path}.url", check)
    elif isinstance(service, dict):
        _service(service, f"{path}.service", check)
    bundle = config.get("caBundle")
    if bundle:
        try:
            base64.b64decode(bundle, validate=True)
        except (binascii.Error, ValueError):
            check.invalid(f"{path}.caBundle", "<bundle>", "must be base64 encoded")


def _url(url: str, path: str, check: Checker) -> None:
    if not url:
        check.add(path, "Required value: url must be non-empty")
        return
    try:
        parts = urlsplit(url)
    except ValueError as err:
        check.invalid(path, url, f"url must be a valid URL: {err}")
        return
    if parts.scheme != "https":
        check.invalid(path, parts.scheme, "'https' is the only allowed URL scheme")
    if not parts.hostname:
        check.invalid(path, parts.netloc, "host must be specified")
    if parts.username is not None:
        check.invalid(path, parts.username, "user information is not permitted in the URL")
    if parts.fragment:
        check.invalid(path, parts.fragment, "fragments are not permitted in the URL")
    if parts.query:
        check.invalid(path, parts.query, "query parameters are not permitted in the URL")


def _service(service: dict[str, Any], path: str, check: Checker) -> None:
    if not service.get("name"):
        check.add(f"{path}.name", "Required value: service name is required")
    if not service.get("namespace"):
        check.add(f"{path}.namespace", "Required value: service namespace is required")
    port = service.get("port", 443)
    if not 1 <= port <= 65535:
        check.invalid(f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive")
    where = service.get("path")
    if where is None:
        return
    if not where.startswith("/"):
        check.invalid(f"{path}.path", where, "must start with a '/'")
    elif "//" in where:
        check.invalid(f"{path}.path", where, "segment[1] may not be empty")


def cel_identifier(name: str) -> bool:
    return bool(_CEL_IDENT.match(name)) and name not in _CEL_RESERVED


_CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                           "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                           "void", "while"})
