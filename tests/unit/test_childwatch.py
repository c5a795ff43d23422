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
    async def main() -> tuple[bool, set[int], set[int]]:
        used = watch_children_with_pidfd()
        # the threads by identity, not their count: one an earlier test left may end meanwhile
        before = {t.ident or 0 for t in threading.enumerate()}
        proc = await asyncio.create_subprocess_exec("sleep", "0.2")
        during = {t.ident or 0 for t in threading.enumerate()}  # ThreadedChildWatcher would have one more here
        assert await proc.wait() == 0
        return used, before, during

    try:
        used, before, during = asyncio.run(main())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher)
        assert used and during <= before
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(asyncio.ThreadedChildWatcher())
