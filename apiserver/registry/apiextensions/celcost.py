"""The estimated cost of x-kubernetes-validations rules, as upstream's CRD validation
checks it before a CRD is accepted (apiextensions validation: StaticEstimatedCostLimit per
rule, StaticEstimatedCRDCostLimit for the whole schema).

celpy has no cost model, so this is kubeling's own estimator after cel-go's
checker/cost.go: every operation costs 1, a comprehension (all, exists, exists_one, map,
filter) costs its body once per element, string scans cost a tenth of a character each,
and sizes come from the schema: maxItems, maxProperties and maxLength where declared,
else the most a request of upstream's 3 MiB could hold. A rule on a node inside lists or
maps counts once per element of each towards the schema's total. The figures are of the
same order as upstream's, not equal to them: a rule upstream refuses for an unbounded
list (quadratic walks, scans of unbounded strings in unbounded lists) is refused here too.

The same walk knows each expression's schema, so it also finds what cel-go's type check
refuses: a field a rule names on an object whose properties are declared and closed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from apiserver.registry.apiextensions.celnames import escaped
from kubeling.errors import FieldViolation

__all__ = ["estimate", "cost_violations", "PER_RULE_LIMIT", "PER_CRD_LIMIT"]

PER_RULE_LIMIT = 10_000_000  # upstream's StaticEstimatedCostLimit
PER_CRD_LIMIT = 100_000_000  # upstream's StaticEstimatedCRDCostLimit
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # upstream's DefaultMaxRequestSizeBytes, the bound of an undeclared size
STRING_TRAVERSAL = 0.1  # cel-go's StringTraversalCostFactor
_MACROS = {"all", "exists", "exists_one", "map", "filter"}
_SCANS = {"contains", "startsWith", "endsWith", "matches", "indexOf", "lastIndexOf", "replace", "split",
          "lowerAscii", "upperAscii", "trim", "substring", "join", "find", "findAll"}
_VALIDATIONS = "x-kubernetes-validations"


@dataclass(frozen=True)
class _Estimate:
    cost: float
    node: dict[str, Any] | None = None  # the value's schema, where the expression names a schema node
    size: float = 1  # a string's length, a list's items or a map's entries (1 when not known)


@dataclass
class _Scope:
    names: dict[str, dict[str, Any]] = field(default_factory=dict)
    undefined: list[str] = field(default_factory=list)  # fields a rule names that its schema lacks
    root: dict[str, Any] | None = None  # the schema's root: apiVersion, kind and metadata are there


def _min_json_size(node: dict[str, Any]) -> int:
    """The fewest bytes a value of the node takes in JSON (upstream's estimateMinSizeJSON, roughly)."""
    kind = node.get("type")
    if kind == "string":
        return 2 + int(node.get("minLength") or 0)
    if kind == "boolean":
        return 4
    if kind in ("object", "array"):
        return 2
    return 1


def max_size(node: dict[str, Any] | None) -> float:
    """How many characters, items or entries the node's value can have at most."""
    if not isinstance(node, dict):
        return 1
    kind = node.get("type")
    if kind == "string":
        if node.get("enum"):
            return max(len(str(v)) for v in node["enum"])
        declared = node.get("maxLength")
        return float(declared) if declared is not None else float(MAX_REQUEST_BYTES - 2)
    if kind == "array":
        if node.get("maxItems") is not None:
            return float(node["maxItems"])
        items = node.get("items")
        return float(MAX_REQUEST_BYTES // (_min_json_size(items if isinstance(items, dict) else {}) + 1))
    if kind == "object":
        if node.get("maxProperties") is not None:
            return float(node["maxProperties"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):  # "": value, -> 4 bytes beside the value
            return float(MAX_REQUEST_BYTES // (_min_json_size(extra) + 4))
        return float(max(1, len(node.get("properties") or {})))
    return 1


def _element(node: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema of what a comprehension over the node binds: a list's items, a map's keys."""
    if not isinstance(node, dict):
        return None
    if node.get("type") == "array":
        items = node.get("items")
        return items if isinstance(items, dict) else None
    if node.get("type") == "object":
        extra = node.get("additionalProperties")
        longest = max((len(k) for k in node.get("properties") or {}), default=MAX_REQUEST_BYTES - 2)
        return {"type": "string", "maxLength": longest if not isinstance(extra, dict) else MAX_REQUEST_BYTES - 2}
    return None


# What every object with a kind has, declared or not (the root, embedded resources).
_OBJECT_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def _child(node: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The schema of the property a rule names (escaped as rules spell it)."""
    if not isinstance(node, dict):
        return None
    props = node.get("properties") or {}
    if name in props and isinstance(props[name], dict):
        return props[name]
    for key, sub in props.items():
        if isinstance(sub, dict) and escaped(key) == name:
            return sub
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _lacks(node: dict[str, Any] | None, name: str, root: dict[str, Any] | None) -> bool:
    """Whether a typed object cannot have the field (cel-go's "undefined field" when it
    checks a rule against the schema's types): its properties are declared and closed."""
    if not isinstance(node, dict) or not node.get("properties") or node.get("additionalProperties") is not None \
            or node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string"):
        return False
    if (node.get("x-kubernetes-embedded-resource") or node is root) and name in _OBJECT_FIELDS:
        return False
    return _child(node, name) is None


def _args(tree: Tree | None) -> list[Any]:
    return list(tree.children) if isinstance(tree, Tree) else []


def _walk(item: Any, scope: _Scope) -> _Estimate:
    if isinstance(item, Token):
        return _Estimate(0)
    if not isinstance(item, Tree):
        return _Estimate(0)
    data, children = item.data, [c for c in item.children if c is not None]
    if data == "literal":
        text = str(children[0]) if children else ""
        return _Estimate(0, None, max(1, len(text) - 2) if text[:1] in "\"'rRbB" else 1)
    if data == "ident":
        name = str(children[0])
        return _Estimate(1, scope.names.get(name), max_size(scope.names.get(name)))
    if data == "member_dot":
        target = _walk(children[0], scope)
        if _lacks(target.node, str(children[1]), scope.root):
            scope.undefined.append(str(children[1]))
        node = _child(target.node, str(children[1]))
        return _Estimate(target.cost + 1, node, max_size(node))
    if data == "member_index":
        target, index = _walk(children[0], scope), _walk(children[1], scope)
        node = _element(target.node) if target.node and target.node.get("type") == "array" \
            else _child(target.node, "")
        return _Estimate(target.cost + index.cost + 1, node, max_size(node))
    if data == "member_dot_arg":
        return _method(children, scope)
    if data == "ident_arg":
        args = [_walk(a, scope) for a in _args(children[1] if len(children) > 1 else None)]
        return _Estimate(1 + sum(a.cost for a in args), None, 1)
    if data in ("relation_eq", "relation_ne", "relation_lt", "relation_le", "relation_gt", "relation_ge",
                "relation_in"):
        return _walk(children[0], scope)
    if data == "relation" and len(children) == 2:
        left, right = _walk(children[0], scope), _walk(children[1], scope)
        operator = children[0].data if isinstance(children[0], Tree) else ""
        if operator == "relation_in":  # a linear search of the list or map
            step = right.size
        elif operator in ("relation_eq", "relation_ne"):  # strings and lists compare element by element
            step = 1 + STRING_TRAVERSAL * max(left.size, right.size)
        else:
            step = 1
        return _Estimate(left.cost + right.cost + step, None, 1)
    if len(children) == 1:
        return _walk(children[0], scope)  # a level of the grammar with one operand: the operand
    parts = [_walk(c, scope) for c in children]
    size = sum(p.size for p in parts) if data in ("addition", "list_lit") else max((p.size for p in parts), default=1)
    return _Estimate(sum(p.cost for p in parts) + 1, None, size)


def _method(children: list[Any], scope: _Scope) -> _Estimate:
    target = _walk(children[0], scope)
    name = str(children[1])
    args = _args(children[2] if len(children) > 2 else None)
    if name in _MACROS and args:
        variable = _variable(args[0])
        inner = _Scope(dict(scope.names), scope.undefined, scope.root)
        element = _element(target.node)
        if variable and element is not None:
            inner.names[variable] = element
        elif variable:
            inner.names.pop(variable, None)
        body = sum(_walk(a, inner).cost for a in args[1:])
        return _Estimate(target.cost + target.size * (body + 1), None, target.size)
    estimates = [_walk(a, scope) for a in args]
    cost = target.cost + sum(a.cost for a in estimates) + 1
    if name in _SCANS:
        other = max((a.size for a in estimates), default=1)
        cost += math.ceil(STRING_TRAVERSAL * target.size) * max(1.0, other)
    return _Estimate(cost, None, target.size if name in ("lowerAscii", "upperAscii", "trim", "replace") else 1)


def _variable(tree: Any) -> str | None:
    """The name a macro binds (its first argument is a bare identifier)."""
    while isinstance(tree, Tree) and len(tree.children) == 1 and tree.data != "ident":
        tree = tree.children[0]
    if isinstance(tree, Tree) and tree.data == "ident":
        return str(tree.children[0])
    return None


def estimate(ast: Tree, node: dict[str, Any]) -> float:
    """The estimated most a compiled rule costs with `self` (and `oldSelf`) bound to the node."""
    return analyze(ast, node)[0]


def analyze(ast: Tree, node: dict[str, Any], root: dict[str, Any] | None = None) -> tuple[float, list[str]]:
    """The rule's estimated cost, and the fields it names that the schema cannot have."""
    scope = _Scope({"self": node, "oldSelf": node}, root=root)
    return _walk(ast, scope).cost, scope.undefined


def _rules(node: dict[str, Any], path: str, cardinality: float
           ) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], float]]:
    """(path, node, rule, how many times per object) of every rule, outside in."""
    for i, rule in enumerate(node.get(_VALIDATIONS) or []):
        if isinstance(rule, dict):
            yield f"{path}.{_VALIDATIONS}[{i}]", node, rule, cardinality
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _rules(sub, f"{path}.properties[{name}]", cardinality)
    if isinstance(node.get("items"), dict):
        yield from _rules(node["items"], f"{path}.items", cardinality * max_size(node))
    if isinstance(node.get("additionalProperties"), dict):
        yield from _rules(node["additionalProperties"], f"{path}.additionalProperties",
                          cardinality * max_size(node))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _factor(cost: float, limit: int) -> str:
    exceed = cost / limit
    if exceed > 100:
        return "more than 100x"  # upstream: such a rule is quadratic or worse; the figure says nothing more
    return f"{exceed:f}x" if exceed < 1.5 else f"{exceed:.1f}x"


def _message(what: str, cost: float, limit: int) -> str:
    return (f"Forbidden: {what} exceeds budget by factor of {_factor(cost, limit)} (try simplifying the rule(s), "
            "or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")


def cost_violations(schema: dict[str, Any], path: str, compiled: Any) -> list[FieldViolation]:
    """What upstream refuses when a CRD is written, besides syntax: a rule naming a field
    its schema cannot have, a rule estimated above the per-rule budget, and a schema whose
    rules together (each times the elements it runs for) exceed the total.
    `compiled(text)` is the rule's parse tree, or None when it does not compile."""
    out: list[FieldViolation] = []
    total = 0.0
    shares: list[tuple[str, float]] = []
    for rule_path, node, rule, cardinality in _rules(schema, path, 1):
        rule_cost = 0.0
        for key in ("rule", "messageExpression"):
            text = rule.get(key)
            if not isinstance(text, str) or not text:
                continue
            ast = compiled(text)
            if ast is None:
                continue
            cost, undefined = analyze(ast, node, schema)
            for name in dict.fromkeys(undefined):
                out.append(FieldViolation(f"{rule_path}.{key}", f"Invalid value: {_quote(text)}: compilation "
                                          f"failed: ERROR: <input>: undefined field '{name}'"))
            if cost > PER_RULE_LIMIT:
                what = "estimated rule cost" if key == "rule" else "estimated messageExpression cost"
                out.append(FieldViolation(f"{rule_path}.{key}", _message(what, cost, PER_RULE_LIMIT)))
            rule_cost += cost
        total += rule_cost * cardinality
        shares.append((rule_path, rule_cost * cardinality))
    if total > PER_CRD_LIMIT:
        for rule_path, share in shares:
            if share > PER_CRD_LIMIT / 100:  # upstream names the rules that weigh more than 1% of the budget
                out.append(FieldViolation(f"{rule_path}.rule", "Forbidden: contributed to estimated rule & "
                                          "messageExpression cost total exceeding cost limit for entire "
                                          "OpenAPIv3 schema"))
        out.append(FieldViolation(path, _message("x-kubernetes-validations estimated rule cost total for entire "
                                                 "OpenAPIv3 schema", total, PER_CRD_LIMIT)))
    return out
