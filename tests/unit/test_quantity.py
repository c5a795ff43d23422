"""Quantities: parsing and canonical form as apimachinery's resource.Quantity."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubeling.quantity import Format, QuantityError, parse_quantity


@pytest.mark.parametrize("text,canonical", [
    ("100m", "100m"), ("1.5", "1500m"), ("128Mi", "128Mi"), ("1G", "1G"), ("2e3", "2e3"),
    ("1.5Gi", "1536Mi"), ("0.5Gi", "512Mi"), ("10000", "10k"), ("1000m", "1"), ("0.1", "100m"),
    ("1024", "1024"), ("1Ki", "1Ki"), ("1023Mi", "1023Mi"), ("-1.5", "-1500m"), ("1n", "1n"),
    ("0.0000000001", "1n"), ("+5", "5"), ("12e6", "12e6"), (".5", "500m"), ("5.", "5"), ("1E", "1E"),
    ("2Ei", "2Ei"), ("0", "0"), ("1e-3", "1e-3"), ("1.1Ki", "1126400m"), ("100Ki", "100Ki"),
    ("1536Ki", "1536Ki"), ("1048576Ki", "1Gi"), ("0.25", "250m"), ("000100m", "100m"), ("1e3", "1e3"),
    ("1000k", "1M"), ("12345", "12345"), ("1.0", "1"), ("750u", "750u"), ("0.000001", "1u"),
])
def test_canonical_form(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize("text,value", [
    ("100m", Fraction(1, 10)), ("1.5", Fraction(3, 2)), ("128Mi", 128 * 2**20), ("1G", 10**9),
    ("2e3", 2000), ("1Ki", 1024), ("1n", Fraction(1, 10**9)),
    ("0.0000000001", Fraction(1, 10**9)),  # rounded up to 1n, as upstream
    ("-0.0000000001", Fraction(-1, 10**9)),
])
def test_exact_values(text: str, value: Fraction) -> None:
    assert parse_quantity(text).value == value


def test_formats_and_helpers() -> None:
    assert parse_quantity("1Mi").format is Format.BINARY_SI
    assert parse_quantity("1M").format is Format.DECIMAL_SI
    assert parse_quantity("1e6").format is Format.DECIMAL_EXPONENT
    assert parse_quantity("1.5").milli_value() == 1500
    assert parse_quantity("1m").milli_value() == 1
    assert parse_quantity("0.5").int_value() == 1  # rounds up
    assert parse_quantity("1Gi").int_value() == 2**30
    assert parse_quantity("100m") + parse_quantity("900m") == parse_quantity("1")


def test_upstream_quirk_a_bare_suffix_is_zero() -> None:
    # apimachinery's scanner treats a missing number as 0: "Mi" and "e3" parse, as zero.
    assert str(parse_quantity("Mi")) == "0" and str(parse_quantity("e3")) == "0"


@pytest.mark.parametrize("text", ["", "abc", "1x", "1e", "1.2.3", "1Mi2", " 1", "1 ", "--1", "1ki", "1KiB"])
def test_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)
