"""IntOrString values that are counts or percentages of a total (maxSurge,
maxUnavailable, minAvailable), as upstream's intstr.GetScaledValueFromIntOrPercent."""

from __future__ import annotations

import math

from protos.kubeling.v1 import core_pb2

__all__ = ["scaled_value", "from_value"]


def scaled_value(value: core_pb2.IntOrString, total: int, *, round_up: bool) -> int:
    """The count `value` stands for out of `total`; ValueError for a string that is not N%."""
    if value.type == 0:
        return value.intVal
    text = value.strVal
    if not text.endswith("%") or not text[:-1].lstrip("-").isdigit():
        raise ValueError(text)
    fraction = int(text[:-1]) * total / 100
    return math.ceil(fraction) if round_up else math.floor(fraction)


def from_value(value: int | str) -> core_pb2.IntOrString:
    if isinstance(value, int):
        return core_pb2.IntOrString(type=0, intVal=value)
    return core_pb2.IntOrString(type=1, strVal=value)
