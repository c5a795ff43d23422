"""The pod-CIDR allocator: lowest free subnet, nothing overlapping what is used."""

from __future__ import annotations

import pytest

from apiserver.controllers.nodeipam import CIDRAllocator, RangeExhausted


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


def test_ranges_outside_the_cluster_or_of_another_family_block_nothing() -> None:
    allocator = CIDRAllocator("10.88.0.0/16", 24)
    assert allocator.allocate({"10.87.255.0/24", "fd00::/64", "not a cidr"}) == "10.88.0.0/24"
    with pytest.raises(RangeExhausted):
        allocator.allocate({"10.0.0.0/8"})  # a range around the cluster takes all of it
    v6 = CIDRAllocator("fd00:10::/56", 64)
    assert v6.allocate({"fd00:10::/64", "fd00:10:0:2::/63"}) == "fd00:10:0:1::/64"
    assert v6.allocate({"fd00:10::/63"}) == "fd00:10:0:2::/64"
