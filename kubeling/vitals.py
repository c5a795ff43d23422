"""A component's own vitals, for soak runs (bench.soak): its asyncio tasks, threads and
the objects the collector tracks, written every few seconds to
`$KUBELING_VITALS_DIR/<component>-<pid>.json` when that variable is set (nothing
otherwise). Go components give `go_goroutines` on their /metrics; a Python component's
counterpart — the tasks it has not ended — is not visible from outside the process, and
not every component serves metrics, so each one that runs through `kubeling.app` tells it
here, in one shape.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from kubeling.atomicfile import replace_file

__all__ = ["ENV", "with_vitals", "snapshot"]

ENV = "KUBELING_VITALS_DIR"
INTERVAL = 5.0  # seconds between writes


def snapshot(component: str) -> dict[str, Any]:
    return {"component": component, "pid": os.getpid(), "time": time.time(),
            "asyncio_tasks": len(asyncio.all_tasks()), "threads": threading.active_count(),
            "gc_objects": len(gc.get_objects())}


async def _write_every(component: str, path: Path) -> None:
    while True:
        replace_file(path, json.dumps(snapshot(component)).encode(), 0o644)
        await asyncio.sleep(INTERVAL)


async def with_vitals(component: str, main: Coroutine[Any, Any, None]) -> None:
    """Run main; beside it, the vitals writer when $KUBELING_VITALS_DIR is set."""
    directory = os.environ.get(ENV, "")
    if not directory:
        return await main
    path = Path(directory) / f"{component}-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = asyncio.create_task(_write_every(component, path), name="vitals")
    try:
        return await main
    finally:
        writer.cancel()
        path.unlink(missing_ok=True)
