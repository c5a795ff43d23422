"""Kubernetes resource quantities, parsed and printed exactly as apimachinery's
`resource.Quantity` does: `100m`, `1.5`, `128Mi`, `1G`, `2e3`.

Values are exact (Fractions), rounded *up* to nano units as upstream does, and
`str(q)` is the canonical form the apiserver stores (`1.5` -> `1500m`,
`1.5Gi` -> `1536Mi`, `10000` -> `10k`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

__all__ = ["Quantity", "QuantityError", "Format", "parse_quantity", "canonical"]


class QuantityError(ValueError):
    """The string is not a quantity (the message says why, as upstream's errors do)."""


class Format(str, Enum):
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"                # 12Mi
    DECIMAL_SI = "DecimalSI"              # 12M


_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_EXPONENT = {v: k for k, v in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_NANO = 10**9
_MAX_INT64 = 2**63 - 1
# Upstream accepts any int32 exponent; exponents this far out only make huge integers.
_MAX_EXPONENT = 1000

_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_SUFFIX = "unable to parse quantity's suffix"


def _scan(s: str) -> tuple[bool, str, str, str]:
    """Upstream's parseQuantityString: (positive, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(s)
    if pos < end and s[0] in "+-":
        positive = s[0] != "-"
        pos += 1
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    num = s[start:pos] or "0"
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos].isdigit() and s[pos].isascii():
            pos += 1
        denom = s[start:pos]
    if pos >= end:
        return positive, num, denom, ""
    suffix_start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    if pos != end:
        raise QuantityError(_ERR_FORMAT)
    return positive, num, denom, s[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) for a suffix, as upstream's suffixer.interpret."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        rest = suffix[1:]
        digits = rest[1:] if rest[:1] in "+-" else rest
        if digits.isdigit() and digits.isascii():
            exponent = int(rest)
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"quantity exponent out of range: {exponent}")
            return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(_ERR_SUFFIX)


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact amount (a multiple of 1e-9) and the format it was written in."""

    value: Fraction
    format: Format = Format.DECIMAL_SI

    @classmethod
    def parse(cls, text: str) -> Quantity:
        return parse_quantity(text)

    @classmethod
    def from_milli(cls, milli: int) -> Quantity:
        return cls(Fraction(milli, 1000), Format.DECIMAL_SI)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        return cls(Fraction(value), fmt)

    def milli_value(self) -> int:
        """Value in thousandths, rounded up (upstream MilliValue)."""
        return math.ceil(self.value * 1000)

    def int_value(self) -> int:
        """Value rounded up to an integer (upstream Value)."""
        return math.ceil(self.value)

    def is_zero(self) -> bool:
        return self.value == 0

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __str__(self) -> str:
        return _canonical(self.value, self.format)


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Quantity:
    """Parse as upstream ParseQuantity; raise QuantityError with upstream's message.

    Memoized: quantities are immutable and the same few strings recur in every pod."""
    if not text:
        raise QuantityError("quantities must not be empty")
    positive, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(suffix)
    amount = Fraction(int(num + denom), 10 ** len(denom))
    amount *= Fraction(10) ** exponent if base == 10 else 2**exponent
    # Round non-zero values up (away from zero) to whole nano units: asking for a tiny
    # amount of a resource should get some of it (upstream's reasoning).
    amount = Fraction(math.ceil(amount * _NANO), _NANO)
    if fmt is Format.BINARY_SI and amount > _MAX_INT64:
        amount = Fraction(_MAX_INT64)
    return Quantity(amount if positive else -amount, fmt)


@functools.lru_cache(maxsize=4096)
def canonical(text: str) -> str:
    """The canonical form of a quantity string (what the apiserver stores)."""
    return str(parse_quantity(text))


def _strip_factors(n: int, factor: int) -> tuple[int, int]:
    times = 0
    while n != 0 and n % factor == 0:
        n //= factor
        times += 1
    return n, times


def _canonical(value: Fraction, fmt: Format) -> str:
    if value == 0:
        return "0"
    if fmt is Format.BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = Format.DECIMAL_SI  # small or fractional binary amounts print as decimal, exactly
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt is Format.BINARY_SI:
        amount, times = _strip_factors(int(magnitude), 1024)
        suffix = _BINARY_BY_EXPONENT.get(times * 10)
        if suffix is None:  # beyond Ei: no suffix, spell the integer out
            return f"{sign}{int(magnitude)}"
        return f"{sign}{amount}{suffix}"
    # Decimal: an integer mantissa times 10**exponent, the exponent a multiple of 3.
    nanos = int(magnitude * _NANO)  # exact: values are whole nano units
    amount, times = _strip_factors(nanos, 10)
    exponent = times - 9
    shift = exponent % 3
    amount *= 10**shift
    exponent -= shift
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{amount}" + (f"e{exponent}" if exponent else "")
    suffix = _DECIMAL_BY_EXPONENT.get(exponent)
    if suffix is None:
        return f"{sign}{amount}e{exponent}"
    return f"{sign}{amount}{suffix}"
