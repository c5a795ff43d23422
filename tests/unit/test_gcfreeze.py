"""kubeling.gcfreeze: survivors of a full collection are frozen, still freed by their
last reference, and cycles among them are reclaimed after the thaw."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kubeling.gcfreeze import FreezeAfterFull


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Iterator[_Clock]:
    yield _Clock()


@pytest.fixture
def policy(clock: _Clock) -> Iterator[FreezeAfterFull]:
    p = FreezeAfterFull(thaw_every=600, clock=clock).install()
    try:
        yield p
    finally:
        p.uninstall()


def _cycle() -> tuple[list[_Node], weakref.ref[_Node]]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return [a], weakref.ref(a)


def test_a_full_collection_freezes_its_survivors(policy: FreezeAfterFull) -> None:
    kept = [_Node() for _ in range(100)]
    gc.collect()
    assert policy.full_collections >= 1
    assert gc.get_freeze_count() >= len(kept)


def test_a_frozen_object_still_goes_with_its_last_reference(policy: FreezeAfterFull) -> None:
    obj = _Node()
    ref = weakref.ref(obj)
    gc.collect()
    assert gc.get_freeze_count() > 0
    del obj
    assert ref() is None


def test_a_frozen_cycle_waits_for_the_thaw(policy: FreezeAfterFull, clock: _Clock) -> None:
    holder, ref = _cycle()
    gc.collect()  # the cycle survives (held) and is frozen
    holder.clear()  # now garbage, but frozen: the collector does not walk it
    gc.collect()
    assert ref() is not None
    clock.now += 600
    gc.collect()  # this one ends with the thaw
    assert policy.thaws == 1 and gc.get_freeze_count() == 0
    gc.collect()  # and this one walks everything
    assert ref() is None
    assert gc.get_freeze_count() > 0  # frozen again after it


def test_uninstall_gives_everything_back(clock: _Clock) -> None:
    p = FreezeAfterFull(clock=clock).install()
    p.install()  # once only
    gc.collect()
    p.uninstall()
    assert gc.get_freeze_count() == 0
    assert p._after not in gc.callbacks
    holder, ref = _cycle()
    holder.clear()
    gc.collect()
    assert ref() is None
