"""Fields a request document names twice. Go's decoders keep the last value and, under
fieldValidation Strict, refuse the request naming each one (upstream's strict decoding:
`duplicate field "spec.replicas"` in JSON, `line 11: key "foo" already set in map` in
YAML); Python's keep the last value silently, so the documents are read here with a hook
that notes them."""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["load_json", "load_yaml"]


def load_json(raw: bytes | str) -> tuple[Any, list[str]]:
    """The document and its duplicate fields, by path."""
    repeated: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                repeated.setdefault(id(out), []).append(key)
            out[key] = value
        return out

    data = json.loads(raw, object_pairs_hook=pairs)
    if not repeated:
        return data, []
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            found.extend(f'duplicate field "{path + "." if path else ""}{key}"' for key in repeated.get(id(node), []))
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return data, found


class _NotingLoader(yaml.SafeLoader):
    """yaml.SafeLoader noting each mapping key set twice, with its line."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hashable = key in seen
            except TypeError:
                continue  # an unhashable key: construct_mapping says so itself
            if hashable:
                self.duplicates.append(f'line {key_node.start_mark.line + 1}: key "{key}" already set in map')
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml(raw: bytes | str) -> tuple[Any, list[str]]:
    """The document and its duplicate keys, by line (as go-yaml words them)."""
    loader = _NotingLoader(raw)
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()
