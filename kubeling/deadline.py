"""Async streams cut at a deadline (a watch's timeoutSeconds), shared by the gRPC and REST servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

__all__ = ["until"]


async def until(stream: AsyncIterator[bytes], deadline: float | None) -> AsyncIterator[bytes]:
    """`stream` until the monotonic `deadline` (None: until it ends): a watch's timeoutSeconds."""
    it = stream.__aiter__()
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        try:
            async with asyncio.timeout(remaining):
                item = await it.__anext__()
        except (StopAsyncIteration, TimeoutError):
            return
        yield item
