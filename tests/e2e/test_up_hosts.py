"""`kubeling up --hosts`: two kubelets on hosts of their own (network namespaces on an
underlay bridge, a private /24 nothing routes out of). Pods on different hosts reach each
other by IP through host-gw routes; one host partitioned (iptables DROP inside its
namespace) longer than the grace period turns Unknown and tainted, its pod is evicted
after its toleration, and once healed the node is Ready again, untainted, and the evicted
pod is gone; a LoadBalancer Service answers from the machine on its nodes' addresses
(Local policy keeping the client's address, the health-check node port per node);
`kubeling down` leaves no namespace, bridge or process."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from cluster.hosts import bridge_of, netns_name
from cluster.plan import ClusterPlan
from cni import netns
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from tests.wait import until

CIDR = f"10.{150 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _pod(name: str, node: str, *command: str, restart: str = "Always") -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(nodeName=node, terminationGracePeriodSeconds=1, restartPolicy=restart,
                                              containers=[core_pb2.Container(name="main", image="busybox",
                                                                             imagePullPolicy="IfNotPresent",
                                                                             command=list(command))]))



async def _until(client: Client, what: str, check: Any, timeout: float = 90) -> Any:
    return await until(lambda: check(client), what, timeout, interval=0.3)


def _partition(node: str, on: bool) -> None:
    for chain in ("INPUT", "OUTPUT"):
        subprocess.run(["ip", "netns", "exec", netns_name(node), "iptables", "-I" if on else "-D", chain, "-i" if
                        chain == "INPUT" else "-o", "eth0", "-j", "DROP"], check=True)


# a web server that answers with the client's address it sees (busybox httpd's CGI)
_ECHO_ADDRESS = ("mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\n"
                 "echo $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www")


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as session:
        async with session.get(url) as response:
            return response.status, (await response.text()).strip()


def _v4(shown: str) -> str:
    """httpd's REMOTE_ADDR of an IPv4 client: [::ffff:a.b.c.d]."""
    return shown.strip("[]").removeprefix("::ffff:")


async def _load_balancer(client: Client, plan: ClusterPlan, nodes: list[str]) -> None:
    """A Deployment exposed as type LoadBalancer, from the machine (not a node: its traffic
    arrives as from outside): Local policy answers on the address of the node with the pod
    and keeps the client's address, each node's health-check node port says whether it has
    a local endpoint; Cluster policy adds the other node, whose traffic is masqueraded."""
    labels = {"app": "echo"}
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels), spec=core_pb2.PodSpec(
        nodeName=nodes[0], terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
            name="echo", image="busybox", imagePullPolicy="IfNotPresent", command=["sh", "-c", _ECHO_ADDRESS])]))
    await client.deployments.create(apps_pb2.Deployment(
        metadata=meta_pb2.ObjectMeta(name="echo", namespace="default"),
        spec=apps_pb2.DeploymentSpec(replicas=1, selector=meta_pb2.LabelSelector(matchLabels=labels),
                                     template=template)))
    svc = await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="echo", namespace="default"),
        spec=core_pb2.ServiceSpec(type="LoadBalancer", externalTrafficPolicy="Local", selector=labels,
                                  ports=[core_pb2.ServicePort(port=80, targetPort=core_pb2.IntOrString(intVal=8080))])))
    here, there = plan.node_ip(nodes[0]), plan.node_ip(nodes[1])

    async def ingress(want: list[str]) -> Any:
        got = await client.services.get("echo", "default")
        return [i.ip for i in got.status.loadBalancer.ingress] == want
    await until(lambda: ingress([here]), "the Local load balancer on the pod's node", 90, interval=0.3)
    status, body = await until(lambda: _get(f"http://{here}/cgi-bin/ip"), "the load balancer's answer", 90,
                               interval=0.3, check=lambda r: r[0] == 200, retry_on=(aiohttp.ClientError, OSError))
    assert _v4(body) == plan.api_host, body  # the machine's own address on the underlay: not masqueraded
    check_port = svc.spec.healthCheckNodePort
    status, body = await until(lambda: _get(f"http://{here}:{check_port}/healthz"), "the health check", 30,
                               interval=0.3, check=lambda r: r[0] == 200, retry_on=(aiohttp.ClientError, OSError))
    assert json.loads(body) == {"service": {"namespace": "default", "name": "echo"}, "localEndpoints": 1,
                                "serviceProxyHealthy": True}
    status, body = await until(lambda: _get(f"http://{there}:{check_port}/"), "the other node's health check", 30,
                               interval=0.3, check=lambda r: r[0] == 503, retry_on=(aiohttp.ClientError, OSError))
    assert json.loads(body)["localEndpoints"] == 0

    svc = await client.services.get("echo", "default")
    svc.spec.externalTrafficPolicy = "Cluster"
    await client.services.update(svc)
    await until(lambda: ingress(sorted([here, there], key=ipaddress.IPv4Address)), "both nodes", 30, interval=0.3)
    status, body = await until(lambda: _get(f"http://{there}/cgi-bin/ip"), "the other node's answer", 30,
                               interval=0.3, check=lambda r: r[0] == 200, retry_on=(aiohttp.ClientError, OSError))
    assert _v4(body) == there, body  # crossed to the pod's node: masqueraded on the way
    await client.services.delete("echo", "default")
    await client.deployments.delete("echo", "default")


async def test_hosts_route_pods_and_a_partitioned_host_is_evicted_then_healed(tmp_path: Path) -> None:
    state = tmp_path / "hosts"
    prefix = f"x{os.getpid() % 1000}-"
    nodes = [f"{prefix}1", f"{prefix}2"]
    netns_before = set(netns.list_names())
    up = _kubeling("up", "--hosts", "--nodes", "2", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
                   "--cluster-cidr", CIDR, "--node-monitor-grace-period", "4",
                   "--default-unreachable-toleration-seconds", "3")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None and plan.hosts_subnet
        async with Client.from_kubeconfig(state / "kubeconfig", timeout=10) as client:
            listed, _ = await client.nodes.list_all()
            addresses = {n.metadata.name: next(a.address for a in n.status.addresses if a.type == "InternalIP")
                         for n in listed}
            assert addresses == {n: plan.node_ip(n) for n in nodes}  # each on the underlay
            await client.pods.create(_pod("server", nodes[0], "httpd", "-f", "-p", "8080", "-h", "/etc"))

            async def running(c: Client, name: str = "server") -> Any:
                p = await c.pods.get(name)
                return p if p.status.phase == "Running" else None
            server = await _until(client, "the server", running)
            await client.pods.create(_pod("client", nodes[1], "sh", "-c", "for i in $(seq 20); do timeout 2 wget -q "
                                          f"-O /dev/null http://{server.status.podIP}:8080/hostname && exit 0; "
                                          "sleep 0.5; done; exit 1", restart="Never"))

            async def finished(c: Client) -> Any:
                p = await c.pods.get("client")
                return p if p.status.phase in ("Succeeded", "Failed") else None
            assert (await _until(client, "the client", finished)).status.phase == "Succeeded"  # across hosts
            # and by a Service's name: host 2's kube-proxy, the cluster DNS on the control plane's address
            server.metadata.labels["app"] = "server"
            await client.pods.update(server)
            await client.services.create(core_pb2.Service(
                metadata=meta_pb2.ObjectMeta(name="server", namespace="default"),
                spec=core_pb2.ServiceSpec(selector={"app": "server"}, ports=[core_pb2.ServicePort(
                    port=80, targetPort=core_pb2.IntOrString(intVal=8080))])))
            await client.pods.create(_pod("by-name", nodes[1], "sh", "-c", "for i in $(seq 40); do timeout 2 wget -q "
                                          "-O /dev/null http://server.default.svc.cluster.local/hostname && exit 0; "
                                          "sleep 0.5; done; exit 1", restart="Never"))

            async def by_name(c: Client) -> Any:
                p = await c.pods.get("by-name")
                return p if p.status.phase in ("Succeeded", "Failed") else None
            assert (await _until(client, "the by-name client", by_name)).status.phase == "Succeeded"
            await _load_balancer(client, plan, nodes)
            await client.pods.create(_pod("sleeper", nodes[1], "sleep", "3600"))
            await _until(client, "the sleeper", lambda c: running(c, "sleeper"))

            _partition(nodes[1], True)
            partitioned = time.monotonic()
            try:
                async def unknown(c: Client) -> bool:
                    n = await c.nodes.get(nodes[1])
                    return any(x.type == "Ready" and x.status == "Unknown" for x in n.status.conditions) and \
                        any(t.key == "node.kubernetes.io/unreachable" and t.effect == "NoExecute"
                            for t in n.spec.taints)
                await _until(client, "the partitioned node to turn Unknown", unknown)
                became_unknown = time.monotonic() - partitioned

                async def evicted(c: Client) -> bool:
                    return (await c.pods.get("sleeper")).metadata.HasField("deletionTimestamp")
                await _until(client, "the sleeper's eviction", evicted)
                evicted_after = time.monotonic() - partitioned
                assert (await client.nodes.get(nodes[0])).status.conditions  # the other host is untouched
            finally:
                _partition(nodes[1], False)
            healed = time.monotonic()

            async def ready(c: Client) -> bool:
                n = await c.nodes.get(nodes[1])
                return any(x.type == "Ready" and x.status == "True" for x in n.status.conditions) and \
                    not n.spec.taints

            await _until(client, "the healed node to be Ready and untainted", ready)

            async def gone(c: Client) -> bool:
                try:
                    await c.pods.get("sleeper")
                    return False
                except errors.NotFound:
                    return True
            await _until(client, "the evicted pod to be removed by its kubelet", gone)
            print(f"partition: Unknown after {became_unknown:.1f}s, evicted after {evicted_after:.1f}s, "
                  f"Ready again {time.monotonic() - healed:.1f}s after healing")
    finally:
        down = _kubeling("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert set(netns.list_names()) == netns_before
    assert str(state) not in Path("/proc/self/mountinfo").read_text()  # no container's rootfs left mounted
    assert subprocess.run(["ip", "link", "show", bridge_of(str(state.resolve()))],
                          capture_output=True).returncode != 0
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""
