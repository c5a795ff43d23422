"""The shared wait helper fails saying what it waited for, and what it last saw."""

from __future__ import annotations

import pytest

from tests.wait import WaitTimeout, holds, settle, until


async def test_until_returns_what_held_and_fails_naming_what_did_not() -> None:
    seen = iter(range(100))
    assert await until(lambda: next(seen), "three", check=lambda n: n == 3, interval=0) == 3

    async def never() -> str:
        return "still pending"
    with pytest.raises(WaitTimeout, match=r"the pod Running: not within 0.05s \(last seen: 'still pending'\)"):
        await until(never, "the pod Running", timeout=0.05, interval=0.01, check=lambda phase: phase == "Running")

    def failing() -> bool:
        raise ConnectionError("refused")
    with pytest.raises(WaitTimeout, match="last error: ConnectionError: refused"):
        await until(failing, "the apiserver", timeout=0.05, interval=0.01, retry_on=(ConnectionError,))
    with pytest.raises(ConnectionError):  # not retried: it is the test's failure
        await until(failing, "the apiserver", timeout=0.05)


async def test_holds_and_settle() -> None:
    values = iter([True, True, False])
    with pytest.raises(AssertionError, match="node Ready: stopped holding .seen: False."):
        await holds(lambda: next(values), "node Ready", 5, interval=0)
    await holds(lambda: True, "always", 0.05, interval=0.01)
    assert await settle(lambda: [1], timeout=0.05, interval=0.01, check=lambda left: not left) == [1]
