"""Plugin args that several plugins take alike."""

from __future__ import annotations

from typing import Any

from scheduler.config import ConfigError

__all__ = ["label_list"]


def label_list(args: dict[str, Any], key: str, where: str) -> list[str]:
    """`args[key]`, a list of label names (empty when not given)."""
    value = args.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}.{key}: Invalid value: must be a list of label names")
    return list(value)
