"""v1 LimitRanges (upstream's pkg/registry/core/limitrange): a Container item's defaults
filled as upstream's SetDefaults_LimitRangeItem does — the default limit from max, the
default request from the default limit, else from min — then validated."""

from __future__ import annotations

from apiserver.registry.core.resourcequotas import canonicalize
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.quota import validate_limit_range
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["LimitRangeStrategy"]


class LimitRangeStrategy(Strategy[core_pb2.LimitRange]):
    resource = scheme.LIMITRANGES

    def default(self, obj: core_pb2.LimitRange) -> None:
        for item in obj.spec.limits:
            for values in (item.max, item.min, item.default, item.defaultRequest, item.maxLimitRequestRatio):
                canonicalize(values)
            if item.type != "Container":
                continue
            for name, value in item.max.items():
                item.default.setdefault(name, value)
            for name, value in item.default.items():
                item.defaultRequest.setdefault(name, value)
            for name, value in item.min.items():
                item.defaultRequest.setdefault(name, value)

    def validate(self, obj: core_pb2.LimitRange, check: Checker) -> None:
        validate_limit_range(obj, check)
