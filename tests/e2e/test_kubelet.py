"""The kubelet in a whole cluster: pods scheduled to it run under runc with CNI
networking, and their status, restarts, probes and termination reach the API."""

from __future__ import annotations

from typing import Any

import aiohttp

from protos.kubeling.v1 import core_pb2

from tests.e2e.conftest import Cluster, container, pod


def _cond(p: Any, kind: str) -> str:
    return next((c.status for c in p.status.conditions if c.type == kind), "")


async def test_pod_runs_with_an_ip_and_conditions_then_terminates(cluster: Cluster) -> None:
    kubelet = await cluster.add_node(1)
    node = await cluster.client.nodes.get(kubelet.config.node_name)
    assert node.spec.podCIDR and _cond(node, "Ready") == "True"
    assert node.status.capacity["pods"] == "110" and node.status.nodeInfo.kubeletVersion
    assert node.status.daemonEndpoints.kubeletEndpoint.Port == kubelet.logs.port  # type: ignore[union-attr]

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
    url = f"http://127.0.0.1:{kubelet.logs.port}/containerLogs/default/{name}/{container_name}?{params}"
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        text = await reply.text()
        assert reply.status == 200, text
        return text


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
    # Both a pod finished for good and one crash-looping keep their last logs.
    assert await _logs(cluster, kubelet, "crash", "main") == "boom\n"
    assert await _logs(cluster, kubelet, "crash", "main", previous="true") == "boom\n"
