"""The container shim with the real runc: it owns the container's exit and its CRI log."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from cri.logs import STDERR, STDOUT, read_log
from cri.runc import Runc
from cri.shims import ShimError, ShimLauncher, read_exit, reopen_log
from tests.contract.cri.conftest import Bundles


async def _wait_exit(state: Path, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if read_exit(state) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no exit recorded in {state}")


async def _wait_ticks(log: Path, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if log.exists() and any(line == b"tick" for _, line in read_log(log)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no tick in {log}")


async def test_exit_code_and_logs(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    bundle = bundles.make("app", "busybox", ["sh", "-c", "echo out; echo err >&2; printf partial; exit 3"])
    state, log = tmp_path / "state", tmp_path / "logs" / "app" / "0.log"
    launcher = ShimLauncher(runc.root)
    pid = await launcher.launch("shim-exit", bundle, log, state)
    await launcher.close()  # the zygote ends; the running shim does not
    created = await runc.state("shim-exit")
    assert created is not None and created.status == "created" and created.pid == pid
    assert read_exit(state) is None
    await runc.start("shim-exit")
    await _wait_exit(state)
    info = read_exit(state)
    assert info is not None and (info.exit_code, info.signal) == (3, 0) and info.finished_at > 0
    lines = list(read_log(log))
    assert sorted(lines) == sorted([(STDOUT, b"out"), (STDERR, b"err"), (STDOUT, b"partial")])


async def test_killed_container_and_log_reopen(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    bundle = bundles.make("loop", "busybox", ["sh", "-c", "while true; do echo tick; sleep 0.1; done"])
    state, log = tmp_path / "state", tmp_path / "0.log"
    launcher = ShimLauncher(runc.root)
    await launcher.launch("shim-kill", bundle, log, state)
    await launcher.close()
    await runc.start("shim-kill")
    await _wait_ticks(log)
    # Rotate as the kubelet does: rename, then ask for a reopen (SIGUSR1 to the shim).
    log.rename(tmp_path / "0.log.1")
    assert reopen_log(state)
    await _wait_ticks(log)  # the reopened file gets the later ticks
    await runc.kill("shim-kill", signal.SIGKILL)
    await _wait_exit(state)
    info = read_exit(state)
    assert info is not None and (info.exit_code, info.signal) == (137, signal.SIGKILL)
    assert all(line == b"tick" for _, line in read_log(tmp_path / "0.log.1"))
    assert [line for _, line in read_log(log)][:1] == [b"tick"]  # the new file got the later ticks
    assert not reopen_log(state)  # the shim has ended with its container


async def test_create_failure_is_reported(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    bundle = bundles.make("bad", "busybox", ["/no/such/binary"])
    launcher = ShimLauncher(runc.root)
    with pytest.raises(ShimError, match="runc create shim-bad"):
        await launcher.launch("shim-bad", bundle, tmp_path / "0.log", tmp_path / "state")
    await launcher.close()


async def test_run_mode_starts_the_container_at_once(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    bundle = bundles.make("now", "busybox", ["sh", "-c", "echo started; exit 4"])
    state, log = tmp_path / "state", tmp_path / "0.log"
    launcher = ShimLauncher(runc.root)
    try:
        await launcher.launch("shim-run", bundle, log, state, run=True)  # no runc start
        await _wait_exit(state)
        info = read_exit(state)
        assert info is not None and (info.exit_code, info.reason) == (4, "")
        assert list(read_log(log)) == [(STDOUT, b"started")]
        with pytest.raises(ShimError, match="runc run shim-run-bad: .*/no/such/binary"):
            await launcher.launch("shim-run-bad", bundles.make("bad2", "busybox", ["/no/such/binary"]),
                                  tmp_path / "1.log", tmp_path / "state2", run=True)
        assert await runc.state("shim-run-bad") is None  # runc left nothing behind
    finally:
        await launcher.close()
