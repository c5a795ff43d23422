"""The kubelet in a whole cluster: pods scheduled to it run under runc with CNI
networking, and their status, restarts, probes and termination reach the API."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cni import netns
from cri.runc import Runc
from kubelet.agent import bridge_name
from kubeling import errors
from kubeling.servingtls import client_context
from protos.kubeling.v1 import core_pb2
from tests.contract.cni.conftest import write_failing_plugin
from tests.e2e.conftest import Cluster, container, pod
from tests.wait import until


def _cond(p: Any, kind: str) -> str:
    return next((c.status for c in p.status.conditions if c.type == kind), "")


async def test_pod_runs_with_an_ip_and_conditions_then_terminates(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    node = await cluster.client.nodes.get(kubelet.config.node_name)
    assert node.spec.podCIDR and _cond(node, "Ready") == "True"
    assert node.status.capacity["pods"] == "110" and node.status.nodeInfo.kubeletVersion
    assert node.status.daemonEndpoints.kubeletEndpoint.Port == kubelet.server.port

    await cluster.client.pods.create(pod("web", container("main", "sleep", "3600")))
    running = await cluster.wait_pod("web", lambda p: p.status.phase == "Running" and _cond(p, "Ready") == "True")
    assert running.spec.nodeName == kubelet.config.node_name
    assert running.status.podIP.startswith(node.spec.podCIDR.rsplit(".", 2)[0])
    assert [c.type for c in running.status.conditions if c.status == "True"] == [
        "PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"]
    status = running.status.containerStatuses[0]
    assert status.state.HasField("running") and status.ready and status.started and status.restartCount == 0
    assert status.containerID.startswith("kubeling://") and status.imageID.startswith("sha256:")
    assert running.status.hostIP == "127.0.0.1" and running.status.qosClass == "BestEffort"

    await cluster.client.pods.delete("web", "default")
    await cluster.wait_gone("web")


async def test_two_nodes_pods_reach_each_other_and_init_containers_run_first(cluster: Cluster) -> None:
    first, second = await cluster.add_node(1), await cluster.add_node(2)
    cidrs = {(await cluster.client.nodes.get(k.config.node_name)).spec.podCIDR for k in (first, second)}
    assert len(cidrs) == 2
    await cluster.client.pods.create(pod(
        "server", container("httpd", "sh", "-c", "mkdir -p /www && cat /work/order > /www/index.html && "
                            "exec httpd -f -p 8080 -h /www",
                            volumeMounts=[core_pb2.VolumeMount(name="work", mountPath="/work")]),
        init=(container("one", "sh", "-c", "echo one >> /work/order",
                        volumeMounts=[core_pb2.VolumeMount(name="work", mountPath="/work")]),
              container("two", "sh", "-c", "echo two >> /work/order",
                        volumeMounts=[core_pb2.VolumeMount(name="work", mountPath="/work")])),
        node=first.config.node_name, volumes=[core_pb2.Volume(name="work", emptyDir=core_pb2.EmptyDirVolumeSource())]))
    server = await cluster.wait_pod("server", lambda p: p.status.phase == "Running")
    inits = server.status.initContainerStatuses
    assert [(s.name, s.state.terminated.reason, s.state.terminated.exitCode) for s in inits] == [
        ("one", "Completed", 0), ("two", "Completed", 0)]
    assert inits[0].state.terminated.finishedAt.seconds <= inits[1].state.terminated.startedAt.seconds

    await cluster.client.pods.create(pod(
        "client", container("wget", "sh", "-c", f"for i in 1 2 3 4 5 6 7 8 9 10; do "
                            f"timeout 2 wget -q -O - http://{server.status.podIP}:8080/ && exit 0; sleep 0.5; done; "
                            "exit 1"),
        restart_policy="Never", node=second.config.node_name))
    done = await cluster.wait_pod("client", lambda p: p.status.phase in ("Succeeded", "Failed"))
    assert done.status.phase == "Succeeded", done.status
    assert done.status.podIP.rsplit(".", 1)[0] != server.status.podIP.rsplit(".", 1)[0]  # another node's subnet
    logs = await _logs(cluster, second, "client", "wget")
    assert logs == "one\ntwo\n"


async def _logs(cluster: Cluster, kubelet: Any, name: str, container_name: str, **query: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    url = f"https://127.0.0.1:{kubelet.server.port}/containerLogs/default/{name}/{container_name}?{params}"
    root = cluster.pki  # only the apiserver's client certificate may read logs from a kubelet
    ssl = client_context(root / "ca.crt", root / "apiserver-kubelet-client.crt", root / "apiserver-kubelet-client.key")
    async with aiohttp.ClientSession() as session, session.get(url, ssl=ssl) as reply:
        text = await reply.text()
        assert reply.status == 200, text
        return text


async def test_the_kubelet_endpoint_is_the_apiservers_alone(cluster: Cluster) -> None:
    """Over TLS from the cluster CA: /healthz for anyone, the rest only for the apiserver's
    client certificate (401 without one, 403 with another, as upstream's words)."""
    kubelet = await cluster.add_node(1)
    root, port = cluster.pki, kubelet.server.port
    base = f"https://127.0.0.1:{port}"
    anyone = client_context(root / "ca.crt")
    admin = client_context(root / "ca.crt", root / "admin.crt", root / "admin.key")
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{base}/healthz", ssl=anyone) as reply:
            assert reply.status == 200
        async with session.get(f"{base}/containerLogs/default/x/y", ssl=anyone) as reply:
            assert reply.status == 401
        async with session.post(f"{base}/exec/default/x/y?command=id", ssl=admin) as reply:
            assert (reply.status, await reply.text()) == (
                403, "Forbidden (user=kubernetes-admin, verb=create, resource=nodes, subresource=proxy)")
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is no longer spoken there
            async with session.get(f"http://127.0.0.1:{port}/healthz") as reply:
                await reply.read()


async def test_restart_policies_and_crash_loop_backoff(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)  # back-off 1 s doubling to 4 s in these tests
    node = kubelet.config.node_name
    await cluster.client.pods.create(pod("crash", container("main", "sh", "-c", "echo boom; exit 3"), node=node))
    await cluster.client.pods.create(pod("never", container("main", "sh", "-c", "exit 7"), node=node,
                                         restart_policy="Never"))
    await cluster.client.pods.create(pod("onfailure", container("main", "true"), node=node,
                                         restart_policy="OnFailure"))

    never = await cluster.wait_pod("never", lambda p: p.status.phase == "Failed")
    state = never.status.containerStatuses[0]
    assert (state.state.terminated.exitCode, state.state.terminated.reason, state.restartCount) == (7, "Error", 0)
    assert _cond(never, "Ready") == "False"
    onfailure = await cluster.wait_pod("onfailure", lambda p: p.status.phase == "Succeeded")
    assert onfailure.status.containerStatuses[0].state.terminated.reason == "Completed"
    assert onfailure.status.containerStatuses[0].restartCount == 0

    backing_off = await cluster.wait_pod("crash", lambda p: p.status.containerStatuses and
                                         p.status.containerStatuses[0].state.waiting.reason == "CrashLoopBackOff")
    status = backing_off.status.containerStatuses[0]
    assert status.lastState.terminated.exitCode == 3 and status.restartCount >= 1
    assert "back-off" in status.state.waiting.message
    assert backing_off.status.phase == "Running"  # restartPolicy Always: restarting is running
    restarted = await cluster.wait_pod("crash", lambda p: p.status.containerStatuses[0].restartCount >= 3)
    assert restarted.status.containerStatuses[0].lastState.terminated.exitCode == 3
    # Back-off grows: restarts 1 s, 2 s, 4 s apart at least; not one every relist.
    assert restarted.status.containerStatuses[0].restartCount <= 4
    events = [e for e in (await cluster.client.events.list_all("default"))[0]
              if e.involvedObject.name == "crash"]
    reasons = {e.reason for e in events}
    assert {"Pulling", "Pulled", "Created", "Started", "BackOff"} <= reasons, reasons  # "busybox" is :latest: Always
    # A crash-looping container keeps its last run's logs (the status may name a run
    # collected a moment ago while the next one crashes: ask again then).
    for query in ({}, {"previous": "true"}):
        for _ in range(50):
            try:
                assert await _logs(cluster, kubelet, "crash", "main", **query) == "boom\n"
                break
            except AssertionError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no logs for {query}")
    # Dead containers do not pile up: the last dead one per name stays (and the running one).
    runtime = kubelet.runtime
    assert runtime is not None
    uid = restarted.metadata.uid
    await until(lambda: runtime.list_containers(uid), "dead containers collected down to two", timeout=10,
                check=lambda found: len(found) <= 2)


async def test_probes_liveness_restarts_readiness_gates_ready(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    node = kubelet.config.node_name
    # Healthy for about 2 s, then the liveness file is gone: the container is restarted.
    await cluster.client.pods.create(pod("live", container(
        "main", "sh", "-c", "touch /tmp/alive; sleep 2; rm /tmp/alive; sleep 3600",
        livenessProbe=core_pb2.Probe(exec=core_pb2.ExecAction(command=["test", "-e", "/tmp/alive"]),
                                     periodSeconds=1, failureThreshold=2)), node=node))
    # Ready only while /tmp/ready exists; an httpGet and a tcpSocket probe check the same server.
    http = core_pb2.Probe(httpGet=core_pb2.HTTPGetAction(path="/index.html", port=core_pb2.IntOrString(intVal=8080)),
                          periodSeconds=1)
    tcp = core_pb2.Probe(tcpSocket=core_pb2.TCPSocketAction(port=core_pb2.IntOrString(type=1, strVal="web")),
                         periodSeconds=1, initialDelaySeconds=1)
    await cluster.client.pods.create(pod("ready", container(
        "main", "sh", "-c", "mkdir /www; echo hi > /www/index.html; touch /tmp/ready; "
        "(sleep 4; rm /tmp/ready) & exec httpd -f -p 8080 -h /www",
        ports=[core_pb2.ContainerPort(name="web", containerPort=8080)],
        readinessProbe=core_pb2.Probe(exec=core_pb2.ExecAction(command=["test", "-e", "/tmp/ready"]),
                                      periodSeconds=1),
        livenessProbe=http, startupProbe=tcp), node=node))

    ready = await cluster.wait_pod("ready", lambda p: _cond(p, "Ready") == "True")
    assert ready.status.containerStatuses[0].started
    unready = await cluster.wait_pod("ready", lambda p: _cond(p, "Ready") == "False")
    assert unready.status.phase == "Running"
    assert unready.status.containerStatuses[0].restartCount == 0  # readiness never restarts
    reasons = {c.type: c.reason for c in unready.status.conditions}
    assert reasons["ContainersReady"] == "ContainersNotReady"

    live = await cluster.wait_pod("live", lambda p: p.status.containerStatuses and
                                  p.status.containerStatuses[0].restartCount >= 1, timeout=30)
    assert live.status.containerStatuses[0].lastState.terminated.exitCode in (137, 143)  # SIGKILL or SIGTERM
    events = [e for e in (await cluster.client.events.list_all("default"))[0] if e.involvedObject.name == "live"]
    assert any(e.reason == "Unhealthy" and e.message.startswith("Liveness probe failed") for e in events)
    assert any(e.reason == "Killing" and "failed liveness probe" in e.message for e in events)


async def test_restarted_kubelet_adopts_pods_and_cleans_up_what_was_deleted(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    node = kubelet.config.node_name
    for name in ("keep", "graceful", "forced"):
        await cluster.client.pods.create(pod(name, container("main", "sleep", "3600"), node=node))
    before = {}
    for name in ("keep", "graceful", "forced"):
        before[name] = await cluster.wait_pod(name, lambda p: p.status.phase == "Running")

    await kubelet.stop()  # the agent and its runtime server stop; containers keep running
    await cluster.client.pods.delete("graceful", "default")  # waits for the kubelet to confirm
    await cluster.client.pods.delete("forced", "default", grace_period_seconds=0)  # gone from the API at once
    assert (await cluster.client.pods.get("graceful", "default")).metadata.HasField("deletionTimestamp")

    kubelet = await cluster.restart_node(node)
    await cluster.wait_gone("graceful")
    runtime = kubelet.runtime
    assert runtime is not None
    for name in ("graceful", "forced"):
        uid = before[name].metadata.uid
        await until(functools.partial(runtime.list_sandboxes, uid), f"the sandbox of {name} removed", timeout=10,
                    check=lambda found: not found)
        assert await runtime.list_sandboxes(uid) == [] and await runtime.list_containers(uid) == []
    kept = await cluster.client.pods.get("keep", "default")
    old_status, new_status = before["keep"].status.containerStatuses[0], kept.status.containerStatuses[0]
    assert new_status.containerID == old_status.containerID and new_status.restartCount == 0
    assert new_status.state.running.startedAt == old_status.state.running.startedAt
    assert kept.status.podIP == before["keep"].status.podIP and kept.status.phase == "Running"


async def test_pod_logs_through_the_apiserver(cluster: Cluster) -> None:
    await cluster.add_node(1)
    await cluster.client.pods.create(pod("talk", container(
        "main", "sh", "-c", "for i in 1 2 3; do echo line $i; done; echo err >&2; sleep 1; echo late; sleep 3600")))
    await cluster.wait_pod("talk", lambda p: p.status.phase == "Running")

    async def read(**options: Any) -> str:
        return b"".join([chunk async for chunk in cluster.client.pods.logs("talk", "default", **options)]).decode()

    followed = ""
    async for chunk in cluster.client.pods.logs("talk", "default", follow=True):
        followed += chunk.decode()
        if "late" in followed:
            break  # following goes on while the container runs: the reader ends it
    # stdout and stderr are separate pipes: their lines interleave as they arrive.
    assert [line for line in followed.splitlines() if line != "err"] == ["line 1", "line 2", "line 3", "late"]
    assert "err" in followed.splitlines()
    assert (await read(tail_lines=1)) == "late\n"
    stamped = (await read(timestamps=True, container="main")).splitlines()
    assert len(stamped) == 5 and all(line[:4].isdigit() and "T" in line.split()[0] for line in stamped)
    assert sorted(line.split(" ", 1)[1] for line in stamped) == sorted(followed.splitlines())
    assert await read(limit_bytes=4) == followed[:4]
    with pytest.raises(errors.BadRequest, match="not valid for pod talk"):
        await read(container="other")
    with pytest.raises(errors.BadRequest, match="previous terminated container"):
        await read(previous=True)
    with pytest.raises(errors.NotFound):
        async for _ in cluster.client.pods.logs("absent", "default"):
            pass


async def test_bad_pod_specs_give_reasons_and_events_and_the_kubelet_goes_on(cluster: Cluster) -> None:
    await cluster.add_node(1)
    missing = container("main", "sleep", "1")
    missing.image = "127.0.0.1:1/nowhere/missing:v1"  # nothing listens there
    await cluster.client.pods.create(pod("noimage", missing))
    await cluster.client.pods.create(pod("nocommand", container("main", "/no/such/binary")))

    def waiting(reasons: tuple[str, ...]) -> Any:
        return lambda p: bool(p.status.containerStatuses) and \
            p.status.containerStatuses[0].state.waiting.reason in reasons

    noimage = await cluster.wait_pod("noimage", waiting(("ErrImagePull", "ImagePullBackOff")))
    assert noimage.status.phase == "Pending" and "missing" in noimage.status.containerStatuses[0].state.waiting.message
    nocommand = await cluster.wait_pod("nocommand", waiting(("CreateContainerError", "RunContainerError",
                                                             "CrashLoopBackOff")))
    assert nocommand.status.phase in ("Pending", "Running")
    # as with containerd: the failed start is an exit (128, StartError) naming the binary
    started = await cluster.wait_pod("nocommand", lambda p: bool(p.status.containerStatuses) and
                                     p.status.containerStatuses[0].lastState.terminated.reason == "StartError")
    failed = started.status.containerStatuses[0].lastState.terminated
    assert failed.exitCode == 128 and "/no/such/binary" in failed.message, failed
    events = [e for e in (await cluster.client.events.list_all("default"))[0]]
    assert any(e.involvedObject.name == "noimage" and e.reason == "Failed" and "Failed to pull image" in e.message
               for e in events)
    assert any(e.involvedObject.name == "nocommand" and e.type == "Warning" for e in events)
    # The kubelet still runs pods.
    await cluster.client.pods.create(pod("fine", container("main", "sleep", "3600")))
    await cluster.wait_pod("fine", lambda p: p.status.phase == "Running")


async def test_deletion_honours_the_grace_period_and_leaves_nothing(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    state = kubelet.config.state_dir
    # `sleep` as PID 1 ignores SIGTERM: it is killed when the grace period ends. The shell traps it.
    await cluster.client.pods.create(pod("stubborn", container("main", "sleep", "3600"), grace=3))
    await cluster.client.pods.create(pod("polite", container(
        "main", "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"), grace=30))
    stubborn = await cluster.wait_pod("stubborn", lambda p: p.status.phase == "Running")
    polite = await cluster.wait_pod("polite", lambda p: p.status.phase == "Running")
    ips = {stubborn.status.podIP, polite.status.podIP}
    assert all((state / "cni-ipam" / "kubeling" / ip).exists() for ip in ips)  # host-local's reservations

    loop = asyncio.get_running_loop()
    started = loop.time()
    await cluster.client.pods.delete("polite", "default")
    await cluster.wait_gone("polite")
    assert loop.time() - started < 10  # it left at SIGTERM: no 30 s wait
    started = loop.time()
    await cluster.client.pods.delete("stubborn", "default")
    await cluster.wait_gone("stubborn")
    assert loop.time() - started >= 2.5  # the grace period (3 s) before SIGKILL

    runtime = kubelet.runtime
    assert runtime is not None
    assert await runtime.list_sandboxes() == [] and await runtime.list_containers() == []
    assert not any((state / "cni-ipam" / "kubeling" / ip).exists() for ip in ips)  # IPs released
    assert str(state) not in Path("/proc/self/mountinfo").read_text()
    cgroups = [p for p in Path("/sys/fs/cgroup/pids/kubeling").glob("*")
               if p.is_dir()] if Path("/sys/fs/cgroup/pids/kubeling").exists() else []
    ids = {c.metadata.uid for c in (stubborn, polite)}
    assert not [c for c in cgroups if any(uid in c.name for uid in ids)]
    assert not list(kubelet.paths.logs_dir.glob(f"*_{stubborn.metadata.uid}"))


async def test_apiserver_restart_under_the_kubelet(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    await cluster.client.pods.create(pod("before", container("main", "sleep", "3600")))
    before = await cluster.wait_pod("before", lambda p: p.status.phase == "Running")
    await cluster.restart_apiserver()
    # The kubelet's (and scheduler's) watches resume; a pod created now runs, and a
    # deletion made now is seen.
    await cluster.client.pods.create(pod("after", container("main", "sleep", "3600")))
    after = await cluster.wait_pod("after", lambda p: p.status.phase == "Running")
    assert after.spec.nodeName == kubelet.config.node_name
    await cluster.client.pods.delete("before", "default")
    await cluster.wait_gone("before")
    runtime = kubelet.runtime
    assert runtime is not None and await runtime.list_sandboxes(before.metadata.uid) == []
    node = await cluster.client.nodes.get(kubelet.config.node_name)
    assert _cond(node, "Ready") == "True"


async def test_kubelet_process_killed_and_restarted_keeps_containers(cluster: Cluster) -> None:
    """`python -m kubelet` SIGKILLed mid-flight: the next one adopts the running container
    (same ID, restart count 0) and can still stop and remove it."""
    name = f"k{os.getpid() % 10000}p"
    config = cluster.kubelet_config(name)
    argv = [sys.executable, "-m", "kubelet", "--node-name", name, "--kubeconfig", str(config.kubeconfig),
            "--tls-cert-file", str(config.tls_cert_file), "--tls-private-key-file", str(config.tls_private_key_file),
            "--client-ca-file", str(config.client_ca_file),
            "--root-dir", str(config.root_dir), "--pod-logs-dir", str(config.pod_logs_dir),
            "--runc-root", str(config.runc_root), "--cluster-cidr", config.cluster_cidr, "--log-level", "WARNING"]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    try:
        await cluster.client.pods.create(pod("survivor", container("main", "sleep", "3600"), node=name))
        before = await cluster.wait_pod("survivor", lambda p: p.status.phase == "Running")
        runc = Runc(config.runc_root)  # type: ignore[arg-type]
        running = {c.id: c.pid for c in await runc.list_containers()}  # the survivor's pause and app
        old_port = (await cluster.client.nodes.get(name)).status.daemonEndpoints.kubeletEndpoint.Port
        process.kill()
        process.wait(10)
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        # the new kubelet has registered (it has a new daemon port) ...
        await until(lambda: cluster.client.nodes.get(name), "the restarted kubelet registered", timeout=30,
                    check=lambda node: node.status.daemonEndpoints.kubeletEndpoint.Port not in (0, old_port))
        # ... and has run a pod created after it started: by then it has synced the pods it
        # found at start (its first sync, before any new pod) and relisted the runtime.
        await cluster.client.pods.create(pod("marker", container("main", "sleep", "3600"), node=name))
        await cluster.wait_pod("marker", lambda p: p.status.phase == "Running")
        now = {c.id: c.pid for c in await runc.list_containers() if c.id in running}
        assert now == running  # the same containers, the same processes: nothing restarted
        after = await cluster.wait_pod("survivor", lambda p: p.status.phase == "Running" and
                                       _cond(p, "Ready") == "True")
        assert after.status.containerStatuses[0].containerID == before.status.containerStatuses[0].containerID
        assert after.status.containerStatuses[0].restartCount == 0
        for leftover in ("survivor", "marker"):
            await cluster.client.pods.delete(leftover, "default")
            await cluster.wait_gone(leftover)
    finally:
        process.terminate()
        process.wait(30)
        subprocess.run(["ip", "link", "del", bridge_name(name)], capture_output=True)
    assert await Runc(config.runc_root).list_containers() == []  # type: ignore[arg-type]


async def test_failing_network_gives_failed_create_pod_sandbox_and_leaves_nothing(cluster: Cluster,
                                                                                   tmp_path: Path) -> None:
    # A fake CNI plugin that always fails ADD (a fault the real plugins cannot be made to produce).
    fakes, conf = tmp_path / "fake-cni", tmp_path / "net.d"
    fakes.mkdir()
    conf.mkdir()
    write_failing_plugin(fakes)
    (conf / "10-failer.conflist").write_text(
        '{"cniVersion":"1.0.0","name":"failing","plugins":[{"type":"failer"}]}')
    # A long back-off: the next attempt does not start while the test looks.
    kubelet = await cluster.add_node(1, cni_conf_dir=conf, cni_bin_dirs=[str(fakes), "/usr/lib/cni"],
                                     crash_loop_backoff_initial=60.0, crash_loop_backoff_max=120.0)
    netns_before = set(netns.list_names())
    await cluster.client.pods.create(pod("unlucky", container("main", "sleep", "3600")))
    async def failures() -> list[Any]:
        return [e for e in (await cluster.client.events.list_all("default"))[0]
                if e.involvedObject.name == "unlucky" and e.reason == "FailedCreatePodSandBox"]
    events = await until(failures, "a FailedCreatePodSandBox Event for unlucky", timeout=30)
    assert events and "no capacity left" in events[0].message and events[0].type == "Warning"
    unlucky = await cluster.client.pods.get("unlucky", "default")
    assert unlucky.status.phase == "Pending"
    runtime = kubelet.runtime
    assert runtime is not None and await runtime.list_sandboxes(unlucky.metadata.uid) == []
    assert set(netns.list_names()) == netns_before  # the failed attempt was undone


async def test_node_lease_and_status_heartbeats(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1, node_lease_duration_seconds=4, node_status_report_frequency=1.0,
                                     node_status_update_frequency=0.5)
    name = kubelet.config.node_name
    lease = await cluster.client.leases.get(name, "kube-node-lease")
    assert lease.spec.holderIdentity == name and lease.spec.leaseDurationSeconds == 4
    assert lease.metadata.ownerReferences[0].name == name  # goes with its Node
    node = await cluster.client.nodes.get(name)
    beat = {c.type: c.lastHeartbeatTime.seconds for c in node.status.conditions}
    assert set(beat) == {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
    async def beats() -> tuple[Any, Any]:  # renewed, and every condition's heartbeat moved on (second precision)
        return await cluster.client.leases.get(name, "kube-node-lease"), await cluster.client.nodes.get(name)
    renewed, later = await until(beats, "the Lease renewed and every condition's heartbeat moved on", timeout=10,
                                 check=lambda both: both[0].spec.renewTime.ToNanoseconds()
                                 > lease.spec.renewTime.ToNanoseconds()
                                 and all(c.lastHeartbeatTime.seconds > beat[c.type] for c in both[1].status.conditions))
    assert renewed.spec.renewTime.ToNanoseconds() > lease.spec.renewTime.ToNanoseconds()
    assert all(c.lastHeartbeatTime.seconds > beat[c.type] for c in later.status.conditions)
    # Unchanged conditions keep their transition time.
    first = {c.type: c.lastTransitionTime.seconds for c in node.status.conditions}
    assert {c.type: c.lastTransitionTime.seconds for c in later.status.conditions} == first


async def _lines(cluster: Cluster, kubelet: Any, name: str) -> list[str]:
    return (await _logs(cluster, kubelet, name, "main")).splitlines()


async def test_pod_hostnames_and_managed_etc_hosts(cluster: Cluster) -> None:
    """A pod name too long for a hostname is cut as upstream cuts it; spec.hostname and
    spec.subdomain give the pod an FQDN in its kubelet-managed /etc/hosts."""
    kubelet = await cluster.add_node(1)
    script = "hostname; echo $HOSTNAME; grep -v '^#' /etc/hosts | tail -1; sleep 3600"
    long_name = "a" * 60 + "-b.cdef"  # 67 characters: cut to 63 ("...-b."), then without the trailing "."
    await cluster.client.pods.create(pod(long_name, container("main", "sh", "-c", script)))
    await cluster.client.pods.create(pod("web-0", container("main", "sh", "-c", script),
                                         hostname="db", subdomain="backend"))
    expected = {long_name: ("a" * 60 + "-b", ""), "web-0": ("db", "db.backend.default.svc.cluster.local")}
    for name, (hostname, fqdn) in expected.items():
        running = await cluster.wait_pod(name, lambda p: p.status.phase == "Running")
        lines = await until(functools.partial(_lines, cluster, kubelet, name), f"three lines in {name}'s log",
                            timeout=10, check=lambda found: len(found) >= 3)
        assert lines[:2] == [hostname, hostname]
        assert lines[2].split() == [running.status.podIP, *([fqdn] if fqdn else []), hostname]
    for name in expected:
        await cluster.client.pods.delete(name, "default")
        await cluster.wait_gone(name)
