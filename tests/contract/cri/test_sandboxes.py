"""Pod sandboxes over the CRI socket: real netns, real pause under runc, real CNI bridge.

Everything a sandbox creates (network namespace, veth, IP, pause container,
overlay mount, cgroup, checkpoint) must be gone after RemovePodSandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from cni import netns
from kubelet.cri.runc import Runc
from kubelet.cri.sandboxes import process_alive
from kubelet.cri.server import CRIConfig, CRIServer
from protos.runtime.v1 import api_pb2, api_pb2_grpc
from tests.contract.cni.conftest import bridge_conflist, iptables_chains


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


def _pod(name: str, **extra: object) -> api_pb2.PodSandboxConfig:
    return api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}"),
        hostname=name, labels={"app": name, "tier": "web"}, annotations={"kubeling.test/keep": "as sent"},
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
    mounts = Path("/proc/self/mountinfo").read_text()
    shutil.rmtree(base)
    assert leftovers == []
    assert str(base) not in mounts
    assert set(netns.list_names()) == netns_before
    assert iptables_chains() == chains_before
    assert _sandbox_cgroups() == cgroups_before


async def _run(env: Env, config: api_pb2.PodSandboxConfig) -> str:
    return (await env.runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id


async def _status(env: Env, sandbox_id: str, verbose: bool = False) -> api_pb2.PodSandboxStatusResponse:
    return await env.runtime.PodSandboxStatus(api_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id,
                                                                              verbose=verbose))


async def test_sandbox_lifecycle(env: Env) -> None:
    web, db = await _run(env, _pod("web")), await _run(env, _pod("db"))
    status = await _status(env, web, verbose=True)
    assert status.status.state == api_pb2.SANDBOX_READY
    assert status.status.network.ip.startswith(env.subnet_prefix + ".")
    assert status.status.metadata.name == "web" and status.status.created_at > 0
    assert dict(status.status.annotations) == {"kubeling.test/keep": "as sent"}
    info = json.loads(status.info["info"])
    assert Path(info["netns"]).exists() and process_alive(info["pid"])
    directory = env.config.state_dir / "sandboxes" / web
    assert (directory / "resolv.conf").read_text() == (
        "search default.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n")
    # The pause process holds the pod's UTS namespace with the pod's hostname.
    hostname = subprocess.run(["nsenter", "-t", str(info["pid"]), "-u", "hostname"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert hostname == "web"

    # Two sandboxes reach each other over the bridge.
    db_ip = (await _status(env, db)).status.network.ip
    ping = subprocess.run(["ip", "netns", "exec", Path(info["netns"]).name, "busybox", "ping", "-c", "1", "-W", "2",
                           db_ip], capture_output=True, text=True, timeout=10)
    assert ping.returncode == 0, ping.stdout + ping.stderr

    with pytest.raises(grpc.aio.AioRpcError) as dup:
        await _run(env, _pod("web"))
    assert dup.value.code() == grpc.StatusCode.ALREADY_EXISTS

    await env.runtime.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=web))
    await env.runtime.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=web))  # idempotent
    stopped = await _status(env, web)
    assert stopped.status.state == api_pb2.SANDBOX_NOTREADY
    assert not Path(info["netns"]).exists() and not process_alive(info["pid"])

    def ids(items: list[api_pb2.PodSandbox]) -> set[str]:
        return {item.id for item in items}

    async def listed(**filters: object) -> set[str]:
        request = api_pb2.ListPodSandboxRequest(filter=api_pb2.PodSandboxFilter(**filters))  # type: ignore[arg-type]
        return ids(list((await env.runtime.ListPodSandbox(request)).items))

    assert await listed() == {web, db}
    assert await listed(id=web[:10]) == {web}
    assert await listed(state=api_pb2.PodSandboxStateValue(state=api_pb2.SANDBOX_READY)) == {db}
    assert await listed(state=api_pb2.PodSandboxStateValue(state=api_pb2.SANDBOX_NOTREADY)) == {web}
    assert await listed(label_selector={"app": "db", "tier": "web"}) == {db}
    assert await listed(label_selector={"app": "none"}) == set()

    for _ in range(2):  # idempotent
        await env.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=web))
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await _status(env, web)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    assert not directory.exists()
    await _run(env, _pod("web"))  # the name is free again


async def test_restart_finds_running_sandboxes(env: Env) -> None:
    sandbox_id = await _run(env, _pod("survivor"))
    before = await _status(env, sandbox_id, verbose=True)
    await env.restart()
    after = await _status(env, sandbox_id, verbose=True)
    assert after.status.state == api_pb2.SANDBOX_READY
    assert after.status.network.ip == before.status.network.ip
    assert after.info["info"] == before.info["info"]
    await env.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))


async def test_host_network_sandbox(env: Env) -> None:
    config = _pod("hostnet", linux=api_pb2.LinuxPodSandboxConfig(
        security_context=api_pb2.LinuxSandboxSecurityContext(
            namespace_options=api_pb2.NamespaceOption(network=api_pb2.NODE))))
    sandbox_id = await _run(env, config)
    status = await _status(env, sandbox_id, verbose=True)
    assert status.status.state == api_pb2.SANDBOX_READY and not status.status.network.ip
    pid = json.loads(status.info["info"])["pid"]
    assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")


async def test_bad_requests(env: Env) -> None:
    cases = [
        (api_pb2.RunPodSandboxRequest(), grpc.StatusCode.INVALID_ARGUMENT, "config.metadata.name"),
        (api_pb2.RunPodSandboxRequest(config=_pod("x"), runtime_handler="kata"),
         grpc.StatusCode.INVALID_ARGUMENT, "runtime_handler"),
        (api_pb2.RunPodSandboxRequest(config=_pod("x", port_mappings=[api_pb2.PortMapping(container_port=0)])),
         grpc.StatusCode.INVALID_ARGUMENT, "config.port_mappings[0]"),
    ]
    for request, code, words in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await env.runtime.RunPodSandbox(request)
        assert err.value.code() == code and words in (err.value.details() or ""), err.value.details()
    for call, request in ((env.runtime.StopPodSandbox, api_pb2.StopPodSandboxRequest(pod_sandbox_id="nope")),
                          (env.runtime.PodSandboxStatus, api_pb2.PodSandboxStatusRequest(pod_sandbox_id="nope"))):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(request)  # type: ignore[operator]
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and "nope" in (err.value.details() or "")
    await env.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id="nope"))


async def test_network_not_ready_leaves_nothing(env: Env) -> None:
    for conf in env.config.cni_conf_dir.iterdir():
        conf.unlink()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _run(env, _pod("early"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no valid networks" in (err.value.details() or "")
    assert (await env.runtime.ListPodSandbox(api_pb2.ListPodSandboxRequest())).items == []
    assert list((env.config.state_dir / "sandboxes").iterdir()) == []
