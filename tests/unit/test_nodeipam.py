"""The pod-CIDR allocator: lowest free subnet, nothing overlapping what is used."""

from __future__ import annotations

import pytest

from apiserver.nodeipam import CIDRAllocator, RangeExhausted


def test_lowest_free_subnet_not_overlapping_used() -> None:
    allocator = CIDRAllocator("10.88.0.0/16", 24)
    assert allocator.allocate(set()) == "10.88.0.0/24"
    assert allocator.allocate({"10.88.0.0/24", "10.88.2.0/24"}) == "10.88.1.0/24"
    # A user-set range of another size still blocks what it overlaps.
    assert allocator.allocate({"10.88.0.0/23"}) == "10.88.2.0/24"


def test_exhausted_and_bad_sizes() -> None:
    allocator = CIDRAllocator("10.88.0.0/23", 24)
    with pytest.raises(RangeExhausted, match="10.88.0.0/23"):
        allocator.allocate({"10.88.0.0/24", "10.88.1.0/24"})
    with pytest.raises(ValueError, match="does not fit"):
        CIDRAllocator("10.88.0.0/16", 12)
    with pytest.raises(ValueError):
        CIDRAllocator("10.88.0.1/16", 24)  # host bits set
