"""How asyncio learns that a subprocess ended. Python 3.11 waits for each one with a
thread of its own (ThreadedChildWatcher): a thread started and ended per runc or CNI
plugin call, several per pod start on a node. A pidfd in the event loop does the same
without the thread; Python 3.12 made it the default where the kernel has pidfd_open."""

from __future__ import annotations

import asyncio
import os
import sys
import warnings

__all__ = ["watch_children_with_pidfd"]


def watch_children_with_pidfd() -> bool:
    """Use asyncio's PidfdChildWatcher for the running loop (before 3.12, where it is not
    the default); False when the kernel or Python cannot, and the default stays. Call it
    from the loop that starts the subprocesses."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())  # 3.11's needs its loop
        asyncio.set_child_watcher(watcher)
    return True
