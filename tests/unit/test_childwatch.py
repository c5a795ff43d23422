"""kubeling.childwatch: subprocesses are waited for through a pidfd, with no thread each."""

from __future__ import annotations

import asyncio
import sys
import threading
import warnings

import pytest

from kubeling.childwatch import watch_children_with_pidfd


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 waits through a pidfd by default")
def test_subprocesses_run_without_a_thread_each() -> None:
    async def main() -> tuple[bool, int, int]:
        used = watch_children_with_pidfd()
        before = threading.active_count()
        proc = await asyncio.create_subprocess_exec("sleep", "0.2")
        during = threading.active_count()  # ThreadedChildWatcher would have one more here
        assert await proc.wait() == 0
        return used, before, during

    try:
        used, before, during = asyncio.run(main())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher)
        assert used and during == before
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(asyncio.ThreadedChildWatcher())
