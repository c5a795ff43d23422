"""Named network namespaces made without `ip`: a real, separate namespace bound under
/run/netns (shared, as iproute2 leaves it), seen by `ip netns`, gone after delete; no
thread of this process is left in it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid

import pytest

from cni import netns


def _mount_of(path: str) -> str | None:
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[4] == path:
            return line
    return None


async def test_create_and_delete() -> None:
    name = f"kubeling-test-{uuid.uuid4().hex[:8]}"
    host = os.stat("/proc/self/ns/net").st_ino
    path = await netns.create(name)
    try:
        assert path == f"/run/netns/{name}" and netns.exists(name)
        assert name in netns.list_names("kubeling-test-")
        assert "nsfs" in (_mount_of(path) or "")
        assert "shared:" in (_mount_of("/run/netns") or "")  # propagates to other mount namespaces
        assert os.stat(path).st_ino != host
        links = subprocess.run(["ip", "-n", name, "-o", "link"], capture_output=True, text=True, check=True)
        assert [line.split(":")[1].strip() for line in links.stdout.splitlines()] == ["lo"]
        with pytest.raises(netns.NetnsError, match="exists already"):
            await netns.create(name)
        # every thread of this process is still in the host's namespace
        threads = os.listdir("/proc/self/task")
        assert {os.stat(f"/proc/self/task/{t}/ns/net").st_ino for t in threads} == {host}
    finally:
        await netns.delete(name)
    assert not netns.exists(name) and _mount_of(path) is None
    await netns.delete(name)  # already gone: fine
    with pytest.raises(netns.NetnsError, match="invalid"):
        await netns.create("../escape")


async def test_many_at_once() -> None:
    names = [f"kubeling-test-{uuid.uuid4().hex[:8]}" for _ in range(16)]
    paths = await asyncio.gather(*(netns.create(n) for n in names))
    try:
        assert len({os.stat(p).st_ino for p in paths}) == 16
    finally:
        await asyncio.gather(*(netns.delete(n) for n in names))
    assert not any(netns.exists(n) for n in names)
