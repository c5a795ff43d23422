"""Containers over the CRI socket: real runc, real shims, real sandboxes on the CNI bridge."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import grpc
import pytest

from cri.logs import STDERR, STDOUT, parse_line, read_log
from protos.runtime.v1 import api_pb2
from tests.contract.cri.conftest import Env, pod_config
from tests.wait import until

LOOP = "echo hello; echo oops >&2; trap 'echo bye; exit 0' TERM; while true; do sleep 0.1; done"


async def _sandbox(env: Env, name: str, log_dir: Path) -> tuple[str, api_pb2.PodSandboxConfig]:
    config = pod_config(name)
    config.log_directory = str(log_dir)
    reply = await env.runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))
    return reply.pod_sandbox_id, config


def _container(name: str, command: list[str], **extra: object) -> api_pb2.ContainerConfig:
    return api_pb2.ContainerConfig(
        metadata=api_pb2.ContainerMetadata(name=name), image=api_pb2.ImageSpec(image="busybox"),
        command=command, log_path=f"{name}/0.log", labels={"container": name},
        annotations={"kubeling.test/c": name}, **extra)  # type: ignore[arg-type]


async def _create(env: Env, sandbox: tuple[str, api_pb2.PodSandboxConfig], config: api_pb2.ContainerConfig) -> str:
    reply = await env.runtime.CreateContainer(api_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox[0], config=config, sandbox_config=sandbox[1]))
    return reply.container_id


async def _status(env: Env, container_id: str) -> api_pb2.ContainerStatus:
    return (await env.runtime.ContainerStatus(api_pb2.ContainerStatusRequest(container_id=container_id))).status


async def _wait_state(env: Env, container_id: str, state: int, timeout: float = 15) -> api_pb2.ContainerStatus:
    for _ in range(int(timeout / 0.05)):
        status = await _status(env, container_id)
        if status.state == state:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"{container_id} never reached {api_pb2.ContainerState.Name(state)}")


async def test_container_lifecycle(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "web", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", LOOP],
                                                 envs=[api_pb2.KeyValue(key="GREETING", value="hi")]))
    status = await _status(env, cid)
    assert status.state == api_pb2.CONTAINER_CREATED and status.created_at > 0
    assert status.log_path == str(tmp_path / "logs" / "app" / "0.log")
    assert status.image.image == "busybox" and status.image_ref.startswith("sha256:")
    assert dict(status.annotations) == {"kubeling.test/c": "app"}

    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    running = await _wait_state(env, cid, api_pb2.CONTAINER_RUNNING)
    assert running.started_at >= status.created_at
    with pytest.raises(grpc.aio.AioRpcError) as twice:
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    assert twice.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    exec_reply = await env.runtime.ExecSync(api_pb2.ExecSyncRequest(
        container_id=cid, cmd=["sh", "-c", "echo $GREETING; hostname; echo err >&2; exit 3"], timeout=5))
    assert (exec_reply.stdout, exec_reply.stderr, exec_reply.exit_code) == (b"hi\nweb\n", b"err\n", 3)
    with pytest.raises(grpc.aio.AioRpcError) as slow:
        await env.runtime.ExecSync(api_pb2.ExecSyncRequest(container_id=cid, cmd=["sleep", "30"], timeout=1))
    assert slow.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    listed = await env.runtime.ListContainers(api_pb2.ListContainersRequest(filter=api_pb2.ContainerFilter(
        pod_sandbox_id=sandbox[0][:12], state=api_pb2.ContainerStateValue(state=api_pb2.CONTAINER_RUNNING),
        label_selector={"container": "app"})))
    assert [c.id for c in listed.containers] == [cid]
    none = await env.runtime.ListContainers(api_pb2.ListContainersRequest(filter=api_pb2.ContainerFilter(
        state=api_pb2.ContainerStateValue(state=api_pb2.CONTAINER_EXITED))))
    assert list(none.containers) == []

    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=5))
    stopped = await _status(env, cid)
    assert stopped.state == api_pb2.CONTAINER_EXITED
    assert (stopped.exit_code, stopped.reason) == (0, "Completed") and stopped.finished_at >= stopped.started_at
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=5))  # idempotent

    log = Path(stopped.log_path)
    first = parse_line(log.read_bytes().splitlines()[0])
    assert first.timestamp.endswith("Z") and first.tag == "F"
    assert sorted(read_log(log)) == sorted([(STDOUT, b"hello"), (STDERR, b"oops"), (STDOUT, b"bye")])

    for _ in range(2):  # idempotent
        await env.runtime.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=cid))
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await _status(env, cid)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_exit_codes_and_reasons(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "jobs", tmp_path / "logs")
    memory = api_pb2.LinuxContainerConfig(resources=api_pb2.LinuxContainerResources(
        memory_limit_in_bytes=16 << 20, memory_swap_limit_in_bytes=16 << 20))
    cases = {
        "fails": (_container("fails", ["sh", "-c", "exit 3"]), 3, "Error"),
        "works": (_container("works", ["true"]), 0, "Completed"),
        "hog": (_container("hog", ["sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo $x"],
                           linux=memory), 137, "OOMKilled"),
    }
    ids = {name: await _create(env, sandbox, config) for name, (config, _, _) in cases.items()}
    for cid in ids.values():
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    for name, (_, code, reason) in cases.items():
        status = await _wait_state(env, ids[name], api_pb2.CONTAINER_EXITED)
        assert (status.exit_code, status.reason) == (code, reason), name


async def test_a_start_that_fails_leaves_the_container_exited(env: Env, tmp_path: Path) -> None:
    # As with containerd: created without running anything; the start fails, naming the
    # binary, and the container is EXITED with code 128 and reason StartError, not CREATED.
    sandbox = await _sandbox(env, "nobin", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["/no/such/binary"]))
    assert (await _status(env, cid)).state == api_pb2.CONTAINER_CREATED
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    assert failed.value.code() == grpc.StatusCode.UNKNOWN and "/no/such/binary" in (failed.value.details() or "")
    status = await _status(env, cid)
    assert (status.state, status.exit_code, status.reason) == (api_pb2.CONTAINER_EXITED, 128, "StartError")
    assert "/no/such/binary" in status.message and status.finished_at >= status.created_at
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    await env.runtime.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=cid))
    assert list((await env.runtime.ListContainers(api_pb2.ListContainersRequest())).containers) == []


async def test_a_start_cut_short_by_its_deadline_is_still_recorded(env: Env, tmp_path: Path) -> None:
    # The call gives up while the shim starts the container: the container runs all the
    # same, so it must be RUNNING (not CREATED, to be started a second time).
    sandbox = await _sandbox(env, "hasty", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", LOOP]))
    with pytest.raises(grpc.aio.AioRpcError) as cut:
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid), timeout=0.005)
    assert cut.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await _wait_state(env, cid, api_pb2.CONTAINER_RUNNING)
    with pytest.raises(grpc.aio.AioRpcError) as twice:
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    assert twice.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=5))
    assert (await _status(env, cid)).exit_code == 0


async def test_a_container_whose_shim_died_still_stops(env: Env, tmp_path: Path) -> None:
    # A runtime killed while it started a container can leave it without its shim, the
    # one that writes the exit: StopContainer must still end it and say it exited (255,
    # the status unknown, as containerd's "shim lost"), or the pod never finishes terminating.
    sandbox = await _sandbox(env, "orphan", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", LOOP]))
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    await _wait_state(env, cid, api_pb2.CONTAINER_RUNNING)
    state = Path(env.server.runtime_service.containers.store.get(cid).state_dir)
    shim = int((state / "shim.pid").read_text())
    os.kill(shim, signal.SIGKILL)
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=1), timeout=30)
    status = await _status(env, cid)
    assert (status.state, status.exit_code, status.reason) == (api_pb2.CONTAINER_EXITED, 255, "Unknown")
    await env.runtime.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=cid))


async def test_restart_keeps_running_containers(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "survivor", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", LOOP]))
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    await _wait_state(env, cid, api_pb2.CONTAINER_RUNNING)
    await env.restart()
    status = await _status(env, cid)
    assert status.state == api_pb2.CONTAINER_RUNNING
    reply = await env.runtime.ExecSync(api_pb2.ExecSyncRequest(container_id=cid, cmd=["echo", "still here"]))
    assert reply.stdout == b"still here\n"
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=5))
    stopped = await _status(env, cid)  # the shim outlived the old server and recorded the exit
    assert (stopped.state, stopped.exit_code) == (api_pb2.CONTAINER_EXITED, 0)
    assert (STDOUT, b"bye") in list(read_log(Path(stopped.log_path)))


async def test_removing_the_sandbox_removes_its_containers(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "gone", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", LOOP]))
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    await env.runtime.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox[0]))
    assert (await _status(env, cid)).state == api_pb2.CONTAINER_EXITED
    await env.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox[0]))
    assert list((await env.runtime.ListContainers(api_pb2.ListContainersRequest())).containers) == []


async def test_bad_container_requests(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "bad", tmp_path / "logs")
    no_image = _container("x", ["true"])
    no_image.image.image = "nope:1"
    cases = [
        (api_pb2.CreateContainerRequest(pod_sandbox_id="missing", config=_container("x", ["true"])),
         grpc.StatusCode.NOT_FOUND, "missing"),
        (api_pb2.CreateContainerRequest(pod_sandbox_id=sandbox[0], config=no_image),
         grpc.StatusCode.NOT_FOUND, "nope:1"),
        (api_pb2.CreateContainerRequest(pod_sandbox_id=sandbox[0], config=api_pb2.ContainerConfig(
            image=api_pb2.ImageSpec(image="busybox"))), grpc.StatusCode.INVALID_ARGUMENT, "config.metadata.name"),
        (api_pb2.CreateContainerRequest(pod_sandbox_id=sandbox[0], config=_container("x", ["true"], mounts=[
            api_pb2.Mount(container_path="/data", host_path=str(tmp_path / "absent"))])),
         grpc.StatusCode.INVALID_ARGUMENT, "config.mounts[0].host_path"),
    ]
    for request, code, words in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await env.runtime.CreateContainer(request)
        assert err.value.code() == code and words in (err.value.details() or ""), err.value.details()
    await _create(env, sandbox, _container("dup", ["true"]))
    with pytest.raises(grpc.aio.AioRpcError) as dup:
        await _create(env, sandbox, _container("dup", ["true"]))
    assert dup.value.code() == grpc.StatusCode.ALREADY_EXISTS
    for call, request in ((env.runtime.StartContainer, api_pb2.StartContainerRequest(container_id="nope")),
                          (env.runtime.ExecSync, api_pb2.ExecSyncRequest(container_id="nope", cmd=["true"]))):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(request)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    # Stopping or removing what is not there succeeds (the CRI's idempotence).
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id="nope"))
    await env.runtime.RemoveContainer(api_pb2.RemoveContainerRequest(container_id="nope"))


async def test_twenty_pods_at_once(env: Env, tmp_path: Path) -> None:
    async def start(i: int) -> tuple[str, str]:
        sandbox = await _sandbox(env, f"many{i}", tmp_path / "logs" / str(i))
        cid = await _create(env, sandbox, _container("app", ["sleep", "3600"]))
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
        return sandbox[0], cid

    started = await asyncio.gather(*(start(i) for i in range(20)))
    ips = set()
    for sandbox_id, cid in started:
        status = await env.runtime.PodSandboxStatus(api_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
        ips.add(status.status.network.ip)
        assert (await _status(env, cid)).state == api_pb2.CONTAINER_RUNNING
    assert len(ips) == 20
    await asyncio.gather(*(env.runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=s))
                           for s, _ in started))
    assert list((await env.runtime.ListContainers(api_pb2.ListContainersRequest())).containers) == []


async def test_stats_and_resource_updates(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "metered", tmp_path / "logs")
    hold = "echo written > /tmp/f; sleep 3600"
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", hold]))
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    await _wait_state(env, cid, api_pb2.CONTAINER_RUNNING)
    gateway = f"{env.subnet_prefix}.1"
    await env.runtime.ExecSync(api_pb2.ExecSyncRequest(container_id=cid, cmd=["ping", "-c", "1", "-W", "2", gateway]))

    first = (await env.runtime.ContainerStats(api_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert first.attributes.id == cid and first.attributes.metadata.name == "app"
    assert first.cpu.usage_core_nano_seconds.value > 0
    assert 0 < first.memory.working_set_bytes.value <= first.memory.usage_bytes.value
    assert first.writable_layer.fs_id.mountpoint.endswith("upper") and first.writable_layer.inodes_used.value >= 2
    second = (await env.runtime.ContainerStats(api_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert second.cpu.HasField("usage_nano_cores")
    listed = await env.runtime.ListContainerStats(api_pb2.ListContainerStatsRequest(
        filter=api_pb2.ContainerStatsFilter(pod_sandbox_id=sandbox[0])))
    assert [s.attributes.id for s in listed.stats] == [cid]

    pod = (await env.runtime.PodSandboxStats(api_pb2.PodSandboxStatsRequest(pod_sandbox_id=sandbox[0]))).stats
    assert pod.attributes.id == sandbox[0]
    assert pod.linux.process.process_count.value >= 2  # pause, sh (or sleep)
    # The pod sums its containers (and the pause), compared within one sample: memory can
    # shrink between two calls.
    assert 0 < pod.linux.containers[0].memory.working_set_bytes.value <= pod.linux.memory.working_set_bytes.value
    assert pod.linux.network.default_interface.name == "eth0"
    assert pod.linux.network.default_interface.tx_bytes.value > 0
    assert [c.attributes.id for c in pod.linux.containers] == [cid]
    every = await env.runtime.ListPodSandboxStats(api_pb2.ListPodSandboxStatsRequest())
    assert [s.attributes.id for s in every.stats] == [sandbox[0]]

    limit = api_pb2.LinuxContainerResources(memory_limit_in_bytes=64 << 20, cpu_shares=256)
    await env.runtime.UpdateContainerResources(api_pb2.UpdateContainerResourcesRequest(container_id=cid, linux=limit))
    status = await _status(env, cid)
    assert status.resources.linux.memory_limit_in_bytes == 64 << 20
    applied = await env.runtime.ExecSync(api_pb2.ExecSyncRequest(
        container_id=cid, cmd=["cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]))
    assert applied.stdout.strip() == str(64 << 20).encode()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await env.runtime.UpdateContainerResources(api_pb2.UpdateContainerResourcesRequest(container_id="nope"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_hostnames_as_the_suite_uses_them(env: Env, tmp_path: Path) -> None:
    """No hostname: the node's (as containerd); a pod name over 63 characters does not
    matter then; a hostname is the container's HOSTNAME too; over 64 is refused by name."""
    cases = ((pod_config("create-PodSandbox-for-container-" + "0123456789" * 5, hostname=""), os.uname().nodename),
             (pod_config("named", hostname="test-hostname"), "test-hostname"))
    for config, expected in cases:
        config.log_directory = str(tmp_path / config.metadata.name)
        sandbox_id = (await env.runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id
        cid = await _create(env, (sandbox_id, config), _container("app", ["sleep", "3600"]))
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
        reply = await env.runtime.ExecSync(api_pb2.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", "hostname; echo $HOSTNAME; cat /etc/hostname"], timeout=10))
        assert reply.stdout.decode().split() == [expected] * 3, reply.stderr
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await env.runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=pod_config("long", hostname="h" * 65)))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "config.hostname" in (err.value.details() or "")


async def test_reopened_log_exists_when_the_call_returns(env: Env, tmp_path: Path) -> None:
    sandbox = await _sandbox(env, "reopen", tmp_path / "logs")
    cid = await _create(env, sandbox, _container("app", ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]))
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    log_path = tmp_path / "logs" / "app" / "0.log"
    await until(lambda: log_path.exists() and log_path.stat().st_size, "the container's first log line", timeout=10)
    log_path.rename(log_path.with_suffix(".old"))  # the kubelet's rotation
    await env.runtime.ReopenContainerLog(api_pb2.ReopenContainerLogRequest(container_id=cid))
    assert log_path.exists()  # now, not a moment later: the kubelet checks right away
    await until(lambda: log_path.stat().st_size, "a line in the reopened log", timeout=10)
    assert parse_line(log_path.read_bytes().splitlines()[0]).content == b"tick"


async def test_terminal_container_and_the_pods_pause(env: Env, tmp_path: Path) -> None:
    """A tty container runs on a terminal its shim holds (its output is the log's stdout);
    the pause, visible in a shared PID namespace, is named pause (the suite greps for sleep)."""
    sandbox = await _sandbox(env, "tty", tmp_path / "logs")
    config = _container("term", ["sh", "-c", "tty; echo on-a-terminal; sleep 3600"], tty=True)
    config.linux.security_context.namespace_options.pid = api_pb2.POD
    cid = await _create(env, sandbox, config)
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
    log_path = tmp_path / "logs" / "term" / "0.log"
    await until(lambda: log_path.exists() and b"on-a-terminal" in log_path.read_bytes(),
                "the terminal's output in the log", timeout=10)
    lines = [parse_line(line) for line in log_path.read_bytes().splitlines()]
    assert [(e.stream, e.content.rstrip(b"\r")) for e in lines][1] == (STDOUT, b"on-a-terminal")
    assert lines[0].content.startswith(b"/dev/pts/")
    reply = await env.runtime.ExecSync(api_pb2.ExecSyncRequest(
        container_id=cid, cmd=["sh", "-c", "cat /proc/1/comm; pidof sleep"], timeout=10))
    comm, *sleepers = reply.stdout.decode().split()
    assert comm == "pause" and len(sleepers) == 1  # only the container's own sleep


async def test_security_context_at_runtime(env: Env, tmp_path: Path) -> None:
    """What the full suite checks, on the built-in busybox: seccomp (a Localhost profile, the
    RuntimeDefault one, none when privileged), masked and read-only paths, groups as
    ContainerStatus reports them, privileged containers on a host that lacks capabilities."""
    sandbox = await _sandbox(env, "secctx", tmp_path / "logs")
    profile = tmp_path / "block-chmod.json"
    profile.write_text('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["chmod", "fchmodat"], '
                       '"action": "SCMP_ACT_ERRNO"}]}')

    async def run(name: str, script: str, **security: object) -> api_pb2.ExecSyncResponse:
        config = _container(name, ["sleep", "3600"])
        config.linux.security_context.CopyFrom(api_pb2.LinuxContainerSecurityContext(**security))  # type: ignore[arg-type]
        cid = await _create(env, sandbox, config)
        await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
        return await env.runtime.ExecSync(api_pb2.ExecSyncRequest(container_id=cid, cmd=["sh", "-c", script],
                                                                  timeout=10))

    local = api_pb2.SecurityProfile(profile_type=api_pb2.SecurityProfile.Localhost, localhost_ref=str(profile))
    blocked = await run("local", "chmod 400 /", seccomp=local)
    assert blocked.exit_code != 0 and b"Operation not permitted" in blocked.stderr
    default = await run("default", "grep Seccomp: /proc/self/status", seccomp=api_pb2.SecurityProfile())
    assert default.stdout.split() == [b"Seccomp:", b"2"]
    none = await run("privileged", "grep Seccomp: /proc/self/status; chmod 400 /tmp && echo chmod-ok",
                     seccomp=local, privileged=True)
    assert none.stdout.split() == [b"Seccomp:", b"0", b"chmod-ok"]
    masked = await run("masked", "cat /etc/group; touch /tmp/x", masked_paths=["/etc/group"],
                       readonly_paths=["/tmp"])
    assert masked.stdout == b"" and b"Read-only file system" in masked.stderr
    groups = await run("groups", "id -G", run_as_user=api_pb2.Int64Value(value=1000), supplemental_groups=[1234])
    assert groups.stdout.split() == [b"0", b"1234"]  # uid 1000 is in no group of the image: primary gid 0
    listed = (await env.runtime.ListContainers(api_pb2.ListContainersRequest(
        filter=api_pb2.ContainerFilter(label_selector={"container": "groups"})))).containers
    status = await _status(env, listed[0].id)
    assert (status.user.linux.uid, status.user.linux.gid, list(status.user.linux.supplemental_groups)) == \
        (1000, 0, [0, 1234])
