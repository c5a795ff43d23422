"""Property names as CEL rules spell them (upstream's apiserver/schema/cel/model/escaping.go):
CEL's reserved words as __<word>__, and "__", ".", "-", "/" spelled out; a name CEL's
grammar cannot hold (a leading digit, a space) is not reachable from rules."""

from __future__ import annotations

import re

__all__ = ["escaped"]

_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ACCESSIBLE = re.compile(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*")


def escaped(name: str) -> str | None:
    """The name a rule uses for a declared property, None when no rule can name it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ACCESSIBLE.fullmatch(name):
        return None
    if "__" not in name and not any(c in name for c in ".-/"):
        return name
    return name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__").replace(
        "/", "__slash__")
