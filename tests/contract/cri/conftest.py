"""Helpers for CRI contract tests: images from the store mounted as bundles for the real runc."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from cni import netns
from cri.images.builtin import build_builtins
from cri.images.store import ImageStore
from cri.runc import Runc
from cri.server import CRIConfig, CRIServer
from protos.runtime.v1 import api_pb2, api_pb2_grpc
from tests.contract.cni.conftest import bridge_conflist, iptables_chains
from tests.wait import until


@dataclass
class Bundles:
    """Makes OCI bundles from store images; unmounts every rootfs at the end."""

    base: Path
    store: ImageStore
    mounted: list[Path] = field(default_factory=list)

    def make(self, name: str, image: str, args: list[str] | None = None) -> Path:
        record = self.store.get(image)
        assert record is not None, image
        bundle = self.base / name
        rootfs, upper, work = bundle / "rootfs", bundle / "upper", bundle / "work"
        for d in (rootfs, upper, work):
            d.mkdir(parents=True)
        lowerdir = ":".join(str(p) for p in reversed(self.store.unpack(record)))  # top layer first
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lowerdir},upperdir={upper},workdir={work}", str(rootfs)], check=True)
        self.mounted.append(rootfs)
        subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
        config = json.loads((bundle / "config.json").read_text())
        config["process"]["terminal"] = False
        config["process"]["args"] = args or record.run_config.get("Entrypoint") or record.run_config["Cmd"]
        config["root"]["readonly"] = False
        (bundle / "config.json").write_text(json.dumps(config))
        return bundle


@pytest.fixture
def bundles(tmp_path: Path) -> Iterator[Bundles]:
    store = ImageStore(tmp_path / "images")
    build_builtins(store)
    made = Bundles(tmp_path / "bundles", store)
    yield made
    for rootfs in made.mounted:
        subprocess.run(["umount", str(rootfs)], capture_output=True)


@pytest.fixture
async def runc(tmp_path: Path) -> AsyncIterator[Runc]:
    """A runc driver with a private state root; deletes whatever the test left."""
    driver = Runc(tmp_path / "runc-root")
    yield driver
    for state in await driver.list_containers():
        await driver.delete(state.id, force=True)


@dataclass
class Env:
    config: CRIConfig
    server: CRIServer
    channel: grpc.aio.Channel
    runtime: api_pb2_grpc.RuntimeServiceStub
    subnet_prefix: str

    async def restart(self) -> None:
        await self.channel.close()
        await self.server.stop()
        self.server = CRIServer(self.config)
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(self.server.address)
        self.runtime = api_pb2_grpc.RuntimeServiceStub(self.channel)


def pod_config(name: str, **extra: object) -> api_pb2.PodSandboxConfig:
    extra.setdefault("hostname", name)
    return api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}"),
        labels={"app": name, "tier": "web"}, annotations={"kubeling.test/keep": "as sent"},
        dns_config=api_pb2.DNSConfig(servers=["10.96.0.10"], searches=["default.svc.cluster.local"],
                                     options=["ndots:5"]),
        **extra)  # type: ignore[arg-type]


def _sandbox_cgroups() -> set[str]:
    """Sandbox-id-named cgroups (runc puts a pause at /<id> when no parent is given)."""
    root = Path("/sys/fs/cgroup/pids")
    return {p.name for p in root.iterdir() if len(p.name) == 64} if root.exists() else set()


@pytest.fixture
def bridge_name() -> Iterator[str]:
    name = f"kcri{os.getpid() % 100000}"
    yield name
    subprocess.run(["ip", "link", "del", name], capture_output=True)


@pytest.fixture
async def env(bridge_name: str) -> AsyncIterator[Env]:
    base = Path(tempfile.mkdtemp(prefix="kcri-"))
    chains_before = iptables_chains()
    netns_before = set(netns.list_names())
    cgroups_before = _sandbox_cgroups()
    subnet_prefix = f"10.198.{os.getpid() % 250}"
    conf_dir = base / "net.d"
    conf_dir.mkdir()
    (conf_dir / "10-test.conflist").write_text(json.dumps(
        bridge_conflist("kcri-test", bridge_name, f"{subnet_prefix}.0/24", base)))
    config = CRIConfig(socket=base / "cri.sock", state_dir=base / "state", cni_conf_dir=conf_dir,
                       cni_cache_dir=base / "cni-cache", runc_root=base / "runc")
    server = CRIServer(config)
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    made = Env(config, server, channel, api_pb2_grpc.RuntimeServiceStub(channel), subnet_prefix)
    yield made
    # Remove whatever a failing test left, through the server itself, then check.
    for item in (await made.runtime.ListPodSandbox(api_pb2.ListPodSandboxRequest())).items:
        await made.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=item.id))
    await made.channel.close()
    await made.server.stop()
    leftovers = await Runc(config.runc_root).list_containers()
    # Shims carry their runc root in their command line (forked from a zygote that has
    # it); they end with their containers, a moment after recording the exit.
    def shims_left() -> str:
        return subprocess.run(["pgrep", "-f", f"cri.shim .*--runc-root {config.runc_root}"],
                              capture_output=True, text=True).stdout
    shims = await until(shims_left, "the shims ended with their containers", timeout=10, check=lambda s: s == "")
    mounts = Path("/proc/self/mountinfo").read_text()
    shutil.rmtree(base)
    assert leftovers == []
    assert shims == ""
    assert str(base) not in mounts
    assert set(netns.list_names()) == netns_before
    assert iptables_chains() == chains_before
    assert _sandbox_cgroups() == cgroups_before
