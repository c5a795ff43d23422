"""Label and field selectors with Kubernetes' syntax and matching rules.

    LabelSelector.parse("app=web,tier in (a,b),!legacy,version>3")
    FieldSelector.parse("spec.nodeName=node-1,status.phase!=Failed")

Parse errors raise SelectorError with a message naming the offending part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from kubeling import names
from protos.kubeling.v1 import meta_pb2

__all__ = [
    "SelectorError", "Requirement", "LabelSelector", "FieldRequirement", "FieldSelector",
    "from_label_selector_proto", "from_label_selector_dict",
]


class SelectorError(ValueError):
    pass


_OPS_WITH_VALUES = {"=", "==", "!=", "in", "notin", ">", "<"}
_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s,()!=<>]+)")


@dataclass(frozen=True, slots=True)
class Requirement:
    """key op values; op in: =, ==, !=, in, notin, exists, !, >, <."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, has = self.op, self.key in labels
        if op in ("=", "==", "in"):
            return has and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return not has or labels[self.key] not in self.values
        if op == "exists":
            return has
        if op == "!":
            return not has
        if not has:  # > and <
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return actual > bound if op == ">" else actual < bound

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return f"!{self.key}"
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({','.join(sorted(self.values))})"
        return f"{self.key}{self.op}{self.values[0]}"


def _validated(req: Requirement) -> Requirement:
    errs = names.qualified_name(req.key)
    if errs:
        raise SelectorError(f"invalid label key {req.key!r}: {'; '.join(errs)}")
    if req.op in ("in", "notin") and not req.values:
        raise SelectorError(f"for 'in', 'notin' operators, values set can't be empty (key {req.key!r})")
    if req.op in ("=", "==", "!=") and len(req.values) != 1:
        raise SelectorError(f"exact-match compatibility requires one single value (key {req.key!r})")
    if req.op in (">", "<"):
        if len(req.values) != 1 or not re.fullmatch(r"-?\d+", req.values[0]):
            raise SelectorError(f"for 'Gt', 'Lt' operators, the value must be an integer (key {req.key!r})")
    else:
        for v in req.values:
            errs = names.label_value(v)
            if errs:
                raise SelectorError(f"invalid label value {v!r} for key {req.key!r}: {'; '.join(errs)}")
    return req


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        tokens = [m for m in _TOKEN.findall(text)]
        if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
            raise SelectorError(f"unable to parse label selector {text!r}")
        reqs: list[Requirement] = []
        i = 0

        def peek() -> str | None:
            return tokens[i] if i < len(tokens) else None

        while i < len(tokens):
            negate = peek() == "!"
            if negate:
                i += 1
            key = peek()
            if key is None or key in _OPS_WITH_VALUES or key in ("(", ")", ",", "!"):
                raise SelectorError(f"found {key!r}, expected: identifier (in label selector {text!r})")
            i += 1
            op = peek()
            if negate:
                reqs.append(_validated(Requirement(key, "!")))
            elif op is None or op == ",":
                reqs.append(_validated(Requirement(key, "exists")))
            elif op in ("=", "==", "!=", ">", "<"):
                i += 1
                value = peek()
                if value is None or value == ",":
                    value = ""  # "a=" selects the empty value
                elif value in ("(", ")", "!", "=", "==", "!="):
                    raise SelectorError(f"found {value!r}, expected: identifier after {op!r}")
                else:
                    i += 1
                reqs.append(_validated(Requirement(key, op, (value,))))
            elif op in ("in", "notin"):
                i += 1
                if peek() != "(":
                    raise SelectorError(f"found {peek()!r}, expected: '(' after {op!r}")
                i += 1
                values: list[str] = []
                expect_value = True  # values alternate with commas; an empty value is allowed
                while True:
                    tok = peek()
                    if tok is None:
                        raise SelectorError(f"found end of selector, expected: ')' in {text!r}")
                    i += 1
                    if tok == ")":
                        if expect_value and values:
                            values.append("")  # "(a,)": a trailing empty value
                        break
                    if tok == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value or tok in ("(", "!", "=", "==", "!=", ">", "<"):
                        raise SelectorError(f"found {tok!r}, expected: ',' or ')' in {text!r}")
                    values.append(tok)
                    expect_value = False
                vals = tuple(values)
                reqs.append(_validated(Requirement(key, op, vals)))
            else:
                raise SelectorError(f"found {op!r}, expected: in, notin, =, ==, !=, gt, lt (in {text!r})")
            if peek() is not None:
                if peek() != ",":
                    raise SelectorError(f"found {peek()!r}, expected: ',' or 'end of string' (in {text!r})")
                i += 1
                if peek() is None:
                    raise SelectorError(f"found end of string, expected: identifier (in {text!r})")
        return cls(tuple(reqs))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_PROTO_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def from_label_selector_proto(sel: meta_pb2.LabelSelector | None) -> LabelSelector | None:
    """metav1.LabelSelector → selector, as LabelSelectorAsSelector: None selects nothing,
    an empty selector everything."""
    if sel is None:
        return None
    reqs = [Requirement(k, "=", (v,)) for k, v in sorted(sel.matchLabels.items())]
    for expr in sel.matchExpressions:
        op = _PROTO_OPS.get(expr.operator)
        if op is None:
            raise SelectorError(f"{expr.operator!r} is not a valid label selector operator")
        reqs.append(_validated(Requirement(expr.key, op, tuple(expr.values))))
    return LabelSelector(tuple(reqs))


def from_label_selector_dict(sel: Mapping[str, Any] | None) -> LabelSelector | None:
    """The same for a selector in Kubernetes JSON (a JSON kind's, a NetworkPolicy's)."""
    if sel is None:
        return None
    try:
        parsed = json_format.ParseDict(sel, meta_pb2.LabelSelector())
    except json_format.ParseError as err:
        raise SelectorError(str(err)) from None
    return from_label_selector_proto(parsed)


# ---------------------------------------------------------------- fields

@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of `field=value` / `field!=value` terms (fields.ParseSelector)."""

    requirements: tuple[FieldRequirement, ...] = field(default=())

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        reqs = []
        for term in _split_unescaped(text, ","):
            if not term.strip():
                continue
            for op in ("!=", "==", "="):
                pos = _find_unescaped(term, op)
                if pos >= 0:
                    name, value = term[:pos].strip(), _unescape(term[pos + len(op):])
                    if not name:
                        raise SelectorError(f"invalid field selector {term!r}: no field name")
                    reqs.append(FieldRequirement(name, "!=" if op == "!=" else "=", value))
                    break
            else:
                raise SelectorError(f"invalid field selector: {term!r}: expected field=value or field!=value")
        return cls(tuple(reqs))

    def matches(self, fields: Mapping[str, str]) -> bool:
        for r in self.requirements:
            equal = fields.get(r.field, "") == r.value
            if equal != (r.op == "="):
                return False
        return True

    def exact(self, name: str) -> str | None:
        """The value this selector requires for `name` (`name=value`), if any."""
        for r in self.requirements:
            if r.field == name and r.op == "=":
                return r.value
        return None

    def fields(self) -> set[str]:
        return {r.field for r in self.requirements}

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(f"{r.field}{r.op}{r.value}" for r in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append("\\" + ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if esc:
        raise SelectorError(f"invalid field selector {text!r}: ends with an escape")
    parts.append("".join(cur))
    return parts


def _find_unescaped(term: str, op: str) -> int:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        if term.startswith(op, i):
            # "=" must not be the tail of "!=" or the start of "=="
            if op == "=" and ((i > 0 and term[i - 1] == "!") or term.startswith("==", i)):
                i += 1
                continue
            return i
        i += 1
    return -1


def _unescape(value: str) -> str:
    out, esc = [], False
    for ch in value:
        if esc:
            if ch not in "\\,=!":
                raise SelectorError(f"invalid escape sequence \\{ch} in field selector value {value!r}")
            out.append(ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch in "=!,":
            raise SelectorError(f"invalid field selector value {value!r}: unescaped {ch!r}")
        else:
            out.append(ch)
    return "".join(out)
