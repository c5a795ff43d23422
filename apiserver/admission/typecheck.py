"""Type checking of a ValidatingAdmissionPolicy's expressions (what upstream's type checker
writes to `status.typeChecking`): each expression is checked against the types of the
resources its matchConstraints name, and what cel-go's checker would report is a warning —
a field the type does not have (`undefined field 'maxRetries'`) and an operator applied to
types it has no overload for (`found no matching overload for '_>_' applied to '(int,
string)'`).

The interpreter has no checker, so this is kubeling's own, over cel-python's parse tree:
types come from the resource's message (built-ins) or its structural schema (custom
resources); anything it cannot tell is `dyn` and never warned about.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celparser
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from lark import Token, Tree

__all__ = ["Type", "DYN", "message_type", "schema_type", "resource_type", "check"]

logging.getLogger("celpy").setLevel(logging.WARNING)
_ENV = celpy.Environment()


@dataclass(frozen=True)
class Type:
    name: str  # int, uint, double, string, bytes, bool, null_type, list, map, object, dyn
    element: Type | None = None  # a list's items, a map's values
    fields: Any = None  # an object's: name -> Type (a callable, so message types resolve lazily)
    closed: bool = False  # an object whose fields are all known

    def field(self, name: str) -> Type | None:
        table = self.fields() if callable(self.fields) else (self.fields or {})
        return table.get(name)

    def __str__(self) -> str:
        if self.name == "list":
            return f"list({self.element or DYN})"
        if self.name == "map":
            return f"map(string, {self.element or DYN})"
        return self.name


DYN = Type("dyn")
_SCALARS = {FieldDescriptor.TYPE_INT32: "int", FieldDescriptor.TYPE_INT64: "int", FieldDescriptor.TYPE_SINT32: "int",
            FieldDescriptor.TYPE_SINT64: "int", FieldDescriptor.TYPE_UINT32: "uint",
            FieldDescriptor.TYPE_UINT64: "uint", FieldDescriptor.TYPE_DOUBLE: "double",
            FieldDescriptor.TYPE_FLOAT: "double", FieldDescriptor.TYPE_STRING: "string",
            FieldDescriptor.TYPE_BYTES: "bytes", FieldDescriptor.TYPE_BOOL: "bool"}


def _field_type(fd: FieldDescriptor) -> Type:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        return Type("map", _field_type(fd.message_type.fields_by_name["value"]))
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        inner = DYN if fd.message_type.full_name.startswith("google.") or \
            fd.message_type.name in ("IntOrString", "RawExtension", "Quantity") else message_type(fd.message_type)
    elif fd.type == FieldDescriptor.TYPE_ENUM:
        inner = Type("string")
    else:
        inner = Type(_SCALARS.get(fd.type, "dyn"))
    return Type("list", inner) if fd.is_repeated else inner


@functools.lru_cache(maxsize=512)
def message_type(descriptor: Descriptor) -> Type:
    """A built-in resource's type, from its message (field names are its JSON names)."""
    def fields() -> dict[str, Type]:
        return {fd.name: _field_type(fd) for fd in descriptor.fields}
    return Type("object", fields=fields, closed=True)


_STRING = Type("string")


def resource_type(descriptor: Descriptor | None, schema: Any = None) -> Type:
    """An object of a resource as `object` binds it: its message's (built-ins) or its
    schema's (custom resources) fields, with apiVersion, kind and metadata."""
    from protos.kubeling.v1 import meta_pb2
    inner = message_type(descriptor) if descriptor is not None else schema_type(schema)
    if inner.name != "object":
        return inner

    def fields() -> dict[str, Type]:
        table = dict(inner.fields() if callable(inner.fields) else inner.fields or {})
        table.setdefault("apiVersion", _STRING)
        table.setdefault("kind", _STRING)
        table.setdefault("metadata", message_type(meta_pb2.ObjectMeta.DESCRIPTOR))
        return table
    return Type("object", fields=fields, closed=inner.closed)


def schema_type(node: Any) -> Type:
    """A custom resource's type, from its structural schema."""
    if not isinstance(node, dict) or node.get("x-kubernetes-int-or-string") or \
            node.get("x-kubernetes-preserve-unknown-fields"):
        return DYN
    kind = node.get("type")
    if kind == "integer":
        return Type("int")
    if kind == "number":
        return Type("double")
    if kind in ("string", "boolean"):
        return Type("string" if kind == "string" else "bool")
    if kind == "array":
        return Type("list", schema_type(node.get("items")))
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not node.get("properties"):
            return Type("map", schema_type(extra))
        props = {k: schema_type(v) for k, v in (node.get("properties") or {}).items()}
        return Type("object", fields=props, closed=extra is None and bool(props))
    return DYN


_RELATIONS = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
              "relation_eq": "==", "relation_ne": "!="}
_ARITHMETIC = {"addition_add": "+", "addition_sub": "-", "multiplication_mul": "*", "multiplication_div": "/",
               "multiplication_mod": "%"}
_LITERALS = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
             "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "BOOL_LIT": "bool", "NULL_LIT": "null_type"}
_NUMBERS = {"int", "uint", "double"}


def _overload(op: str, left: Type, right: Type) -> bool:
    """Whether cel-go has an overload of the operator for the two (known) types."""
    a, b = left.name, right.name
    if op in ("==", "!="):
        return a == b or {a, b} <= _NUMBERS or "null_type" in (a, b)
    if op in ("<", "<=", ">", ">="):
        return (a == b and a in ("int", "uint", "double", "string", "bytes", "bool")) or {a, b} <= _NUMBERS
    if op == "+":
        return a == b and a in ("int", "uint", "double", "string", "bytes", "list")
    if op == "%":
        return a == b and a in ("int", "uint")
    return a == b and a in _NUMBERS


@dataclass
class _Checker:
    names: dict[str, Type]
    warnings: list[str] = field(default_factory=list)

    def walk(self, item: Any) -> Type:
        if not isinstance(item, Tree):
            return DYN
        data, children = item.data, [c for c in item.children if c is not None]
        if data == "literal" and children and isinstance(children[0], Token):
            return Type(_LITERALS.get(children[0].type, "dyn"))
        if data == "ident" and children:
            return self.names.get(str(children[0]), DYN)
        if data == "member_dot" and len(children) == 2:
            target, name = self.walk(children[0]), str(children[1])
            if target.name == "map":
                return target.element or DYN
            if target.name != "object":
                return DYN
            found = target.field(name)
            if found is None:
                if target.closed:
                    self.warnings.append(f"undefined field '{name}'")
                return DYN
            return found
        if data == "member_index" and len(children) == 2:
            target = self.walk(children[0])
            self.walk(children[1])
            return target.element or DYN if target.name in ("list", "map") else DYN
        if data == "relation" and len(children) == 2 and isinstance(children[0], Tree) \
                and children[0].data in _RELATIONS:
            return self._binary(_RELATIONS[children[0].data], children, Type("bool"))
        if data in ("addition", "multiplication") and len(children) == 2 and isinstance(children[0], Tree) \
                and children[0].data in _ARITHMETIC:
            return self._binary(_ARITHMETIC[children[0].data], children, None)
        if data in ("conditionalor", "conditionaland") and len(children) > 1:
            for child in children:
                self.walk(child)
            return Type("bool")
        if data == "list_lit":
            for child in children:
                self.walk(child)
            return Type("list", DYN)
        if data in ("member_dot_arg", "ident_arg", "map_lit", "fieldinits", "unary", "member", "primary",
                    "paren_expr", "expr", "exprlist", "mapinits", "dot_ident_arg", "dot_ident"):
            results = [self.walk(c) for c in children]
            passthrough = data in ("unary", "member", "primary", "paren_expr", "expr") and len(results) == 1
            return results[0] if passthrough else DYN
        results = [self.walk(c) for c in children]
        return results[0] if len(results) == 1 else DYN

    def _binary(self, op: str, children: list[Any], result: Type | None) -> Type:
        left = self.walk(children[0].children[0]) if children[0].children else DYN
        right = self.walk(children[1])
        known = "dyn" not in (left.name, right.name)
        if known and not _overload(op, left, right):
            self.warnings.append(f"found no matching overload for '_{op}_' applied to '({left}, {right})'")
            return DYN
        if result is not None:
            return result
        return left if known else DYN


def check(expression: str, names: dict[str, Type]) -> list[str]:
    """What the checker would report of the expression, with these variables' types."""
    try:
        tree = _ENV.compile(expression)
    except celparser.CELParseError:
        return []  # refused when the policy was written
    checker = _Checker(dict(names))
    checker.walk(tree)
    return list(dict.fromkeys(checker.warnings))
