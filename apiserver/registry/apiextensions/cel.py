"""x-kubernetes-validations: CEL rules on a schema node, as upstream's
apiextensions-apiserver pkg/apiserver/schema/cel.

Rules run on `common-expression-language` (Rust's cel-interpreter: cel-go's grammar and
syntax errors, and ~5 us a rule), and are parsed by cel-python's pure-Python parser too,
for the parse tree the cost estimate walks (`celcost`). A rule is compiled when its CRD is
written (a syntax error or a cost over budget refuses the CRD) and evaluated on every
write of a custom resource with `self` bound to the node's value; a rule that names
`oldSelf` is a transition rule, judged on updates only, where an old value exists: for
properties the old object had, and for items of a map list, the item with the same keys.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Any

import cel
import celpy
from celpy import celparser

from apiserver.registry.apiextensions.celcost import cost_violations
from apiserver.registry.apiextensions.celnames import escaped
from kubeling.errors import FieldViolation

__all__ = ["compile_rules", "evaluate_rules", "MAX_RULES_PER_NODE", "NO_OLD"]

# Quiet: celpy logs its parse tree at INFO.
logging.getLogger("celpy").setLevel(logging.WARNING)
logging.getLogger("NameContainer").setLevel(logging.WARNING)

VALIDATIONS = "x-kubernetes-validations"
MAX_RULES_PER_NODE = 64
_ENV = celpy.Environment()


@functools.lru_cache(maxsize=4096)
def _ast(rule: str) -> Any:
    """The rule's parse tree (parsed once per process, whichever CRD names it)."""
    return _ENV.compile(rule)


@functools.lru_cache(maxsize=4096)
def _program(rule: str) -> Any:
    """The rule compiled for evaluation (once per process); ValueError when it does not compile."""
    return cel.compile(rule)


# What a rule's evaluation may raise: a missing field, an index out of range, a division
# by zero, an overflow, a bad regular expression, a function on the wrong types.
_EVAL_ERRORS = (KeyError, IndexError, ZeroDivisionError, OverflowError, RuntimeError, TypeError, ValueError)


def _compiled(rule: str) -> Any:
    try:
        return _ast(rule)
    except celparser.CELParseError:
        return None


def _rules(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(path, node, rule) of every rule in the schema, outside in."""
    stack = [(path, node)]
    while stack:
        p, n = stack.pop()
        for i, rule in enumerate(n.get(VALIDATIONS) or []):
            yield f"{p}.{VALIDATIONS}[{i}]", n, rule
        for name, sub in (n.get("properties") or {}).items():
            if isinstance(sub, dict):
                stack.append((f"{p}.properties[{name}]", sub))
        for key in ("items", "additionalProperties"):
            if isinstance(n.get(key), dict):
                stack.append((f"{p}.{key}", n[key]))


def compile_rules(schema: dict[str, Any], path: str) -> list[FieldViolation]:
    """Why the schema's rules cannot be used: not compiling, too costly, a bad message."""
    out: list[FieldViolation] = []
    for rule_path, node, rule in _rules(schema, path):
        if not isinstance(rule, dict):
            out.append(FieldViolation(rule_path, "Invalid value: must be an object"))
            continue
        text = rule.get("rule")
        if not isinstance(text, str) or not text.strip():
            out.append(FieldViolation(f"{rule_path}.rule", "Required value"))
            continue
        for key in ("rule", "messageExpression"):
            expression = rule.get(key)
            if not isinstance(expression, str) or not expression:
                continue
            try:
                _program(expression)
            except ValueError as err:
                detail = str(err)
                detail = detail[detail.index("ERROR:"):] if "ERROR:" in detail else detail
                out.append(FieldViolation(f"{rule_path}.{key}", f"Invalid value: {_quote(expression)}: "
                                          f"compilation failed: {detail}"))
        if rule.get("message") and "\n" in rule["message"]:
            out.append(FieldViolation(f"{rule_path}.message", "Invalid value: message must not contain line breaks"))
        if len(node.get(VALIDATIONS) or []) > MAX_RULES_PER_NODE:
            out.append(FieldViolation(rule_path, f"Too many: must have at most {MAX_RULES_PER_NODE} rules"))
            break
    return out + cost_violations(schema, path, _compiled)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def evaluate_rules(schema: dict[str, Any] | None, value: Any, old: Any, path: str) -> list[FieldViolation]:
    """Every rule the value breaks, at its node's path (upstream's message: the rule's
    message, its messageExpression's result, or "failed rule: <rule>")."""
    out: list[FieldViolation] = []
    if schema is not None:
        _evaluate(schema, value, old, path, out)
    return out


# No old value (a create, or a field the old object did not have): transition rules skip.
NO_OLD: Any = object()
_MISSING = NO_OLD


def _cel_value(node: Any, value: Any) -> Any:
    """The value as rules see it: declared property names escaped (map keys are not)."""
    if not isinstance(node, dict):
        return value
    if isinstance(value, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if key in props:
                name = escaped(key)
                if name is not None:
                    out[name] = _cel_value(props[key], item)
            else:
                out[key] = _cel_value(extra, item)
        return out
    if isinstance(value, list):
        return [_cel_value(node.get("items"), item) for item in value]
    return value


def _evaluate(node: dict[str, Any], value: Any, old: Any, path: str, out: list[FieldViolation]) -> None:
    if value is None:
        return
    rules = node.get(VALIDATIONS) or []
    if rules:
        # one context per node: its value is converted to CEL once for all the node's rules
        variables = {"self": _cel_value(node, value)}
        if old is not _MISSING:
            variables["oldSelf"] = _cel_value(node, old)
        context = cel.Context(variables)
    for rule in rules:
        text = rule.get("rule", "")
        if "oldSelf" in text and old is _MISSING:
            continue
        where = rule.get("fieldPath") or ""
        field = f"{path}{where}" if where else path
        try:
            result = _program(text).execute(context)
        except _EVAL_ERRORS as err:
            out.append(FieldViolation(field, f"Invalid value: {_quote(_kind(node))}: "
                                      f"evaluation error: {_reason(err)}"))
            continue
        if not isinstance(result, bool):
            out.append(FieldViolation(field, f"Invalid value: {_quote(_kind(node))}: evaluation error: "
                                      f"the rule evaluated to {type(result).__name__}, not bool"))
        elif not result:
            out.append(FieldViolation(field, f"Invalid value: {_quote(_kind(node))}: "
                                      f"{_message(rule, context)}"))
    if isinstance(value, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else extra if isinstance(extra, dict) else None
            if isinstance(sub, dict):
                before = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                _evaluate(sub, item, before, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        olds = _correlated(node, old)
        for i, item in enumerate(value):
            before = olds.get(_list_key(node, item), _MISSING) if olds else _MISSING
            _evaluate(node["items"], item, before, f"{path}[{i}]", out)


def _list_key(node: dict[str, Any], item: Any) -> Any:
    keys = node.get("x-kubernetes-list-map-keys") or []
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in keys)


def _correlated(node: dict[str, Any], old: Any) -> dict[Any, Any]:
    """The old items of a map list by their keys: upstream correlates those alone
    (positions in other lists say nothing of which item is which)."""
    if node.get("x-kubernetes-list-type") != "map" or not node.get("x-kubernetes-list-map-keys") \
            or not isinstance(old, list):
        return {}
    return {_list_key(node, item): item for item in old if isinstance(item, dict)}


def _kind(node: dict[str, Any]) -> str:
    return str(node.get("type") or "object")


def _reason(err: Exception) -> str:
    if isinstance(err, KeyError):
        return f"no such key: {err.args[0] if err.args else ''}"  # cel-go's words
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _message(rule: dict[str, Any], context: Any) -> str:
    expression = rule.get("messageExpression")
    if expression:
        try:
            result = _program(expression).execute(context)
            if isinstance(result, str) and result.strip() and "\n" not in result:
                return str(result)
        except _EVAL_ERRORS:
            pass  # upstream falls back to the message (or the rule) when messageExpression fails
    return str(rule.get("message") or f"failed rule: {rule.get('rule', '')}")
