"""Pod sandboxes over the CRI socket: real netns, real pause under runc, real CNI bridge.

Everything a sandbox creates (network namespace, veth, IP, pause container,
overlay mount, cgroup, checkpoint) must be gone after RemovePodSandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import grpc
import pytest

from cri.sandboxes import process_alive
from protos.runtime.v1 import api_pb2
from tests.contract.cri.conftest import Env
from tests.contract.cri.conftest import pod_config as _pod


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
         grpc.StatusCode.INVALID_ARGUMENT, "no runtime for \"kata\" is configured"),
        (api_pb2.RunPodSandboxRequest(config=_pod("x", port_mappings=[api_pb2.PortMapping(container_port=0)])),
         grpc.StatusCode.INVALID_ARGUMENT, "config.port_mappings[0]"),
    ]
    for request, code, words in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await env.runtime.RunPodSandbox(request)
        assert err.value.code() == code and words in (err.value.details() or ""), err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await env.runtime.PodSandboxStatus(api_pb2.PodSandboxStatusRequest(pod_sandbox_id="nope"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "nope" in (err.value.details() or "")
    # Stopping or removing what is not there succeeds (the CRI's idempotence; the kubelet retries).
    await env.runtime.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id="nope"))
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
