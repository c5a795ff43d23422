"""Resource lists as quota reckons them (upstream's k8s.io/apiserver/pkg/quota/v1
resources.go): amounts by resource name, added, subtracted, masked to the names a quota
tracks, compared against its hard limits and printed as its messages print them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubeling.podresources import ResourceList, add
from kubeling.quantity import Quantity, parse_quantity

__all__ = ["ResourceList", "parse", "to_strings", "add", "subtract", "mask", "less_or_equal", "is_zero",
           "negative", "pretty", "zero"]


def zero() -> Quantity:
    return Quantity.from_int(0)


def parse(values: Mapping[str, str]) -> ResourceList:
    """Quantities that do not parse are left out (validation refused them on the way in)."""
    out: ResourceList = {}
    for name, text in values.items():
        try:
            out[name] = parse_quantity(text)
        except ValueError:
            continue
    return out


def to_strings(values: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(q) for name, q in values.items()}


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for name, q in b.items():
        out[name] = (out[name] if name in out else zero()) - q
    return out


def mask(values: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    wanted = set(names)
    return {name: q for name, q in values.items() if name in wanted}


def less_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """Whether every amount of a that b limits is within it, and the names that are not."""
    exceeded = [name for name, q in a.items() if name in b and b[name] < q]
    return not exceeded, exceeded


def is_zero(values: Mapping[str, Quantity]) -> bool:
    return all(q.is_zero() for q in values.values())


def negative(values: Mapping[str, Quantity]) -> list[str]:
    return sorted(name for name, q in values.items() if q.value < 0)


def pretty(values: Mapping[str, Quantity]) -> str:
    """name=amount,... by name (upstream's prettyPrint in quota messages)."""
    return ",".join(f"{name}={values[name]}" for name in sorted(values))
