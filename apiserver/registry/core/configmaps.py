"""v1 ConfigMaps and Secrets: configuration for pods, validated as upstream's core
validation (keys, sizes, `immutable`) and, for Secrets, `stringData` merged into `data` on
write and `type` defaulted to Opaque, as upstream's Secret strategy does."""

from __future__ import annotations

import re

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["ConfigMapStrategy", "SecretStrategy", "MAX_DATA_BYTES"]

MAX_DATA_BYTES = 1024 * 1024  # upstream's MaxSecretSize and ConfigMap limit
_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")


def _key(path: str, key: str, check: Checker) -> None:
    if len(key) > 253:
        check.invalid(path, key, "must be no more than 253 characters")
    if not _KEY.match(key):
        check.invalid(path, key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                                 "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                                 "'[-._a-zA-Z0-9]+')")


def _immutable(new: core_pb2.ConfigMap | core_pb2.Secret, old: core_pb2.ConfigMap | core_pb2.Secret,
               check: Checker) -> None:
    if old.HasField("immutable") and old.immutable:
        if not (new.HasField("immutable") and new.immutable):
            check.add("immutable", "Forbidden: field is immutable when `immutable` is set")
        if dict(new.data) != dict(old.data):
            check.add("data", "Forbidden: field is immutable when `immutable` is set")
        if isinstance(new, core_pb2.ConfigMap) and isinstance(old, core_pb2.ConfigMap) and \
                dict(new.binaryData) != dict(old.binaryData):
            check.add("binaryData", "Forbidden: field is immutable when `immutable` is set")


class ConfigMapStrategy(Strategy[core_pb2.ConfigMap]):
    resource = scheme.CONFIGMAPS

    def validate(self, obj: core_pb2.ConfigMap, check: Checker) -> None:
        total = 0
        for key, value in obj.data.items():
            _key(f"data[{key}]", key, check)
            if key in obj.binaryData:
                check.invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
            total += len(value.encode())
        for key, blob in obj.binaryData.items():
            _key(f"binaryData[{key}]", key, check)
            total += len(blob)
        if total > MAX_DATA_BYTES:
            check.add("", f"Too long: must have at most {MAX_DATA_BYTES} bytes")

    def validate_update(self, new: core_pb2.ConfigMap, old: core_pb2.ConfigMap, check: Checker) -> None:
        _immutable(new, old, check)


class SecretStrategy(Strategy[core_pb2.Secret]):
    resource = scheme.SECRETS

    def fields(self, obj: core_pb2.Secret) -> dict[str, str]:
        """upstream's SelectableFields: `type` too (the token cleaner selects its Secrets by it)."""
        return {**super().fields(obj), "type": obj.type}

    def default(self, obj: core_pb2.Secret) -> None:
        obj.type = obj.type or "Opaque"
        for key, value in obj.stringData.items():  # write-only, as upstream: never stored
            obj.data[key] = value.encode()
        obj.ClearField("stringData")

    def validate(self, obj: core_pb2.Secret, check: Checker) -> None:
        for key in obj.data:
            _key(f"data[{key}]", key, check)
        if sum(len(v) for v in obj.data.values()) > MAX_DATA_BYTES:
            check.add("data", f"Too long: may not be more than {MAX_DATA_BYTES} bytes")

    def validate_update(self, new: core_pb2.Secret, old: core_pb2.Secret, check: Checker) -> None:
        if new.type != old.type:
            check.invalid("type", new.type, "field is immutable")
        _immutable(new, old, check)
