"""Shutdown on SIGINT/SIGTERM for the components' `python -m` entry points."""

from __future__ import annotations

import asyncio
import signal


async def wait_for_termination() -> None:
    """Return once SIGINT or SIGTERM arrives (the caller then stops cleanly)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
