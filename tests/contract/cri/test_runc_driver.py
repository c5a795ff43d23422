"""cri.runc against the real runc: lifecycle, exec, errors, idempotent delete."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import uuid
from pathlib import Path

import pytest

from cri.logs import STDOUT, CRILogWriter, copy_stream, read_log
from cri.runc import Runc, RuncError
from tests.contract.cri.conftest import Bundles

LOOP = "echo started; trap 'echo bye; exit 0' TERM; while true; do sleep 0.1; done"



async def _wait_status(runc: Runc, container_id: str, status: str) -> None:
    for _ in range(100):
        state = await runc.state(container_id)
        if state is not None and state.status == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{container_id} never reached {status}: {await runc.state(container_id)}")


async def test_lifecycle_with_logs_and_exec(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    container_id = f"kl-{uuid.uuid4().hex[:8]}"
    bundle = bundles.make("loop", "busybox", ["sh", "-c", LOOP])
    writer = CRILogWriter(tmp_path / "logs" / "0.log")
    read_end, write_end = os.pipe()
    copier = threading.Thread(target=copy_stream, args=(read_end, writer, STDOUT), daemon=True)
    copier.start()
    await runc.create(container_id, bundle, stdout=write_end, stderr=write_end, pid_file=tmp_path / "pid")
    os.close(write_end)  # the container holds the only write end now
    created = await runc.state(container_id)
    assert created is not None and created.status == "created"
    assert created.pid == int((tmp_path / "pid").read_text())
    await runc.start(container_id)
    await _wait_status(runc, container_id, "running")
    assert [s.id for s in await runc.list_containers()] == [container_id]

    result = await runc.exec(container_id, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (3, b"out\n", b"err\n", False)
    env = await runc.exec(container_id, ["sh", "-c", "echo $GREETING; pwd"], env=["GREETING=hi"], cwd="/tmp")
    assert env.stdout == b"hi\n/tmp\n"

    slow = await runc.exec(container_id, ["sleep", "30"], timeout=0.5)
    assert slow.timed_out and slow.exit_code == 128 + signal.SIGKILL
    leftover = await runc.exec(container_id, ["sh", "-c", "ps -o args | grep -c '^sleep 30' || true"])
    assert leftover.stdout.strip() == b"0"  # the timed-out command was killed, not orphaned

    stats = await runc.stats(container_id)
    assert stats["pids"]["current"] >= 1

    await runc.kill(container_id, signal.SIGTERM)
    await _wait_status(runc, container_id, "stopped")
    copier.join(5)
    os.close(read_end)
    writer.close()
    assert [line for _, line in read_log(writer.path)] == [b"started", b"bye"]

    await runc.delete(container_id)
    assert await runc.state(container_id) is None
    await runc.delete(container_id)  # idempotent
    assert await runc.list_containers() == []


async def test_errors_name_the_container(runc: Runc, bundles: Bundles) -> None:
    with pytest.raises(RuncError) as missing:
        await runc.start("no-such-container")
    assert missing.value.not_found and "no-such-container" in str(missing.value)
    assert await runc.state("no-such-container") is None
    bundle = bundles.make("broken", "busybox", ["/does/not/exist"])
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with pytest.raises(RuncError) as bad:
            await runc.create("kl-broken", bundle, stdout=devnull, stderr=devnull)
    finally:
        os.close(devnull)
    assert "/does/not/exist" in bad.value.message or "no such file" in bad.value.message.lower()
    # The log files are reused, emptied: each error is the call's own, and none are left growing.
    with pytest.raises(RuncError) as again:
        await runc.start("another-missing")
    assert "another-missing" in str(again.value) and "/does/not/exist" not in again.value.message
    logs = [p for p in runc.root.iterdir() if p.name.startswith(".runc-log-")]
    assert len(logs) == 1 and logs[0].stat().st_size == 0
    # A driver started over the same root (a restarted server) removes the logs of ended
    # processes and keeps those of live ones.
    dead = runc.root / ".runc-log-4194305-1"  # above the kernel's largest pid
    dead.touch()
    Runc(runc.root)
    assert not dead.exists() and logs[0].exists()


async def test_list_survives_entries_removed_while_it_lists(tmp_path: Path) -> None:
    """runc 1.1's `list` fails when an entry of its root vanishes between its readdir and
    its stat, as a container deleted meanwhile does (an e2e teardown hit it). Directories
    made and removed in a loop stand for those containers: runc skips one it cannot load,
    but not one that is gone."""
    runc = Runc(tmp_path / "root")
    stop = threading.Event()

    def churn() -> None:
        i = 0
        # a pause between removals: a loop without one, on a loaded machine, made ten listings
        # in a row race a removal (a CI run), which no real cluster's deletions come close to
        while not stop.wait(0.0005):
            entry = runc.root / f"vanishing-{i % 50}"
            entry.mkdir(exist_ok=True)
            entry.rmdir()
            i += 1

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        for _ in range(100):  # runc alone failed 1 listing in 8 here
            assert await runc.list_containers() == []
    finally:
        stop.set()
        churner.join(5)


def _memory_cgroups() -> int:
    """The kernel's count of memory cgroups (cgroup v1), the removed ones it still holds included."""
    for line in Path("/proc/cgroups").read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["memory"]:
            return int(fields[2])
    raise AssertionError("no v1 memory controller in /proc/cgroups")


async def test_delete_leaves_no_dying_memory_cgroup(runc: Runc, bundles: Bundles) -> None:
    """Pages still charged to a removed memory cgroup keep it alive in the kernel (a dying
    cgroup, one per removed container, each slowing the node's memory accounting): delete
    reclaims them first, so the cgroup is really gone."""
    container_id = f"kl-{uuid.uuid4().hex[:8]}"
    bundle = bundles.make("writer", "busybox", ["sh", "-c", "dd if=/dev/zero of=/written bs=1M count=8 && sync"])
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        await runc.create(container_id, bundle, stdout=devnull, stderr=devnull)
    finally:
        os.close(devnull)
    memory = Path(json.loads((runc.root / container_id / "state.json").read_text())["cgroup_paths"]["memory"])
    await runc.start(container_id)
    await _wait_status(runc, container_id, "stopped")
    assert int((memory / "memory.usage_in_bytes").read_text()) >= 8 << 20  # the file's pages, charged here
    # Counted from here: ours is in it. (Not from before the create: the kernel frees
    # cgroups other tests left dying whenever it likes, so the count may drop meanwhile.)
    live = _memory_cgroups()

    await runc.delete(container_id)
    assert not memory.exists()
    deadline = asyncio.get_running_loop().time() + 10
    # The kernel frees an emptied cgroup shortly after its removal; a dying one stays counted.
    while _memory_cgroups() >= live:
        assert asyncio.get_running_loop().time() < deadline, "the container's memory cgroup is left dying"
        await asyncio.sleep(0.05)
