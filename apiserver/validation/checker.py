"""Validation helpers shared by the resource strategies, worded as upstream's field errors.

A `Checker` collects violations with their field paths; nothing raises until the
registry turns the list into one Invalid error, so a user sees every problem at once.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubeling import names
from kubeling.errors import FieldViolation
from kubeling.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["Checker", "TOTAL_ANNOTATION_SIZE_LIMIT"]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


@dataclass
class Checker:
    violations: list[FieldViolation] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.violations.append(FieldViolation(path, message))

    def required(self, path: str, value: object) -> bool:
        if not value:
            self.add(path, "Required value")
            return False
        return True

    def invalid(self, path: str, value: object, detail: str) -> None:
        shown = json.dumps(value) if isinstance(value, str | bool) else value  # Go: %q, and true/false
        self.add(path, f"Invalid value: {shown}: {detail}")

    def unsupported(self, path: str, value: object, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            shown = json.dumps(value) if isinstance(value, str) else value  # Go: %q
            self.add(path, f"Unsupported value: {shown}: supported values: "
                           + ", ".join(f'"{a}"' for a in allowed))

    def name(self, path: str, value: str, rule: Callable[[str], list[str]]) -> None:
        for msg in rule(value):
            self.invalid(path, value, msg)

    def non_negative(self, path: str, value: int) -> None:
        if value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def port(self, path: str, value: int, allow_zero: bool = False) -> None:
        if not (0 if allow_zero else 1) <= value <= 65535:
            self.invalid(path, value, "must be between 1 and 65535, inclusive")

    def ip(self, path: str, value: str) -> None:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            self.invalid(path, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")

    def cidr(self, path: str, value: str) -> None:
        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError:
            self.invalid(path, value, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")

    def labels(self, path: str, labels: Mapping[str, str]) -> None:
        for key, value in labels.items():
            for msg in names.qualified_name(key):
                self.invalid(path, key, msg)
            for msg in names.label_value(value):
                self.invalid(f"{path}[{key}]", value, msg)

    def annotations(self, path: str, annotations: Mapping[str, str]) -> None:
        total = 0
        for key, value in annotations.items():
            for msg in names.qualified_name(key.lower()):
                self.invalid(path, key, msg)
            total += len(key) + len(value)
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            self.add(path, f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")

    def quantity(self, path: str, value: str) -> Quantity | None:
        try:
            return parse_quantity(value)
        except QuantityError as err:
            self.invalid(path, value, str(err))
            return None

    def resource_list(self, path: str, resources: Mapping[str, str],
                      canonical: dict[str, str] | None = None) -> dict[str, Quantity]:
        """Parse every quantity; put the canonical strings in `canonical` (the stored form)."""
        parsed: dict[str, Quantity] = {}
        for name, text in resources.items():
            for msg in names.qualified_name(name):
                self.invalid(f"{path}[{name}]", name, msg)
            q = self.quantity(f"{path}[{name}]", text)
            if q is None:
                continue
            if q.value < 0:
                self.invalid(f"{path}[{name}]", text, "must be greater than or equal to 0")
            parsed[name] = q
            if canonical is not None:
                canonical[name] = str(q)
        return parsed
