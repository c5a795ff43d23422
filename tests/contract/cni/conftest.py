"""Fixtures for CNI tests: real plugins, real namespaces; everything created is removed."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cni import netns

PLUGIN_DIR = "/usr/lib/cni"
_n = itertools.count()


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


@pytest.fixture
def tag() -> str:
    """A short unique tag for names of things this test creates (bridges are ≤ 15 chars)."""
    return f"k{os.getpid() % 1000:03d}{next(_n):03d}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def bridge(tag: str) -> Iterator[str]:
    name = f"kb{tag}"
    yield name
    if name in _links():
        subprocess.run(["ip", "link", "del", name], capture_output=True)


@pytest.fixture
async def make_netns(tag: str) -> AsyncIterator[Any]:
    created: list[str] = []

    async def make(suffix: str = "") -> str:
        name = f"kubeling-test-{tag}{suffix}"
        await netns.create(name)
        created.append(name)
        return name

    yield make
    for name in created:
        await netns.delete(name)


def bridge_conflist(name: str, bridge: str, subnet: str, data_dir: Path, *, portmap: bool = False,
                    version: str = "1.0.0") -> dict[str, Any]:
    """bridge + host-local on a private subnet: no gateway route out, no masquerade."""
    plugins: list[dict[str, Any]] = [{
        "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "dataDir": str(data_dir / "ipam"),
                 "ranges": [[{"subnet": subnet}]]},
    }]
    if portmap:
        plugins.append({"type": "portmap", "capabilities": {"portMappings": True}, "snat": False})
    return {"cniVersion": version, "name": name, "plugins": plugins}


def ns_exec(name: str, *cmd: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, timeout=timeout)


def iptables_chains() -> set[str]:
    chains = set()
    for table in ("nat", "filter"):
        out = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True).stdout
        chains |= {line.split()[1] for line in out.splitlines() if line.startswith("-N ")}
    return chains




@pytest.fixture
def iptables_guard() -> Iterator[None]:
    """Remove iptables chains (and the jumps to them) that a test made appear."""
    before = iptables_chains()
    yield
    for table in ("nat", "filter"):
        rules = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True).stdout.splitlines()
        new = {line.split()[1] for line in rules if line.startswith("-N ")} - before
        for line in rules:
            parts = line.split()
            if parts[:1] == ["-A"] and "-j" in parts and parts[parts.index("-j") + 1] in new and parts[1] not in new:
                subprocess.run(["iptables", "-t", table, "-D", *parts[1:]], capture_output=True)
        for chain in new:
            subprocess.run(["iptables", "-t", table, "-F", chain], capture_output=True)
        for chain in new:
            subprocess.run(["iptables", "-t", table, "-X", chain], capture_output=True)


def write_plugin(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def write_failing_plugin(directory: Path, name: str = "failer") -> None:
    """A fake plugin whose ADD always fails with code 11 (a fault the real plugins cannot
    be made to produce); VERSION and DEL succeed."""
    write_plugin(directory, name, """
if [ "$CNI_COMMAND" = VERSION ]; then echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}'; exit 0; fi
if [ "$CNI_COMMAND" = DEL ]; then exit 0; fi
cat > /dev/null
echo '{"cniVersion":"1.0.0","code":11,"msg":"no capacity left","details":"try another day"}'
exit 1
""")


def bridge_ports(bridge: str) -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "master", bridge], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip() for line in out.splitlines() if ":" in line]
