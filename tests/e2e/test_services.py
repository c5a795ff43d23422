"""Services on a whole secured cluster (issue 23): two nodes, the controller manager's
EndpointSlice controller, kube-proxy and the cluster DNS, driven with the real kubectl.

A Deployment of busybox httpd on one node behind a ClusterIP Service, reached by name
from a pod on the other node with requests spread over both endpoints; a pod turned
unready leaves the slice and gets no more traffic; a pod reaches itself through its
Service (hairpin); a headless Service's name lists the
pods; a NodePort answers on the node's address from the host; `kubectl port-forward
svc/` and `cluster-info`; the pods' resolv.conf and Service environment; the official
Python client's load_incluster_config() from a pod's network namespace with its token;
deleting the Service removes every rule of its."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from cni import netns
from controllers.manager import ControllerManager
from kubeling.kubeconfig import write_kubeconfig
from proxy.iptables import svc_chain
from proxy.serviceinfo import service_ports
from tests.e2e.conftest import DNS_IP, Cluster, ServiceNetwork, tls_of
from tests.e2e.kubectl import Kubectl
from tests.e2e.test_workloads import get_json, until

# busybox httpd answering with its pod's name; Ready while /www/ready exists
HTTPD = ("mkdir -p /www && hostname > /www/index.html && touch /www/ready && "
         "trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait")
SLEEP = "trap 'exit 0' TERM; while true; do sleep 1; done"

# the official client, run with the pod's network, environment and ServiceAccount files
# (load_incluster_config() is this loader on the files' usual paths)
IN_CLUSTER = """
import sys
from kubernetes import client
from kubernetes.config.incluster_config import InClusterConfigLoader
from tests.wait import until
InClusterConfigLoader(token_filename=sys.argv[1], cert_filename=sys.argv[2]).load_and_set()
try:
    pods = client.CoreV1Api().list_namespaced_pod("default")
    print("ok", len(pods.items))
except client.ApiException as err:
    print("status", err.status)
"""


def _pod_netns(ip: str) -> str:
    for name in netns.list_names():
        out = subprocess.run(["ip", "-n", name, "-o", "-4", "addr"], capture_output=True, text=True).stdout
        if f" {ip}/" in out:
            return name
    raise AssertionError(f"no network namespace holds {ip}")


async def _fetch(url: str) -> str:
    def get() -> str:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode().strip())
    return await asyncio.to_thread(get)


async def test_services_end_to_end(cluster: Cluster, service_network: ServiceNetwork,
                                   controllers: ControllerManager, tmp_path: Path) -> None:
    net = service_network
    one = await cluster.add_node(1, **net.node_settings())
    two = await cluster.add_node(2, **net.node_settings())
    kubectl = Kubectl(write_kubeconfig(tmp_path / "kubeconfig", cluster.apiserver.rest_address,
                                       cluster.apiserver.address, tls=tls_of(cluster.pki, "admin")))
    host_one, host_two = one.config.node_name, two.config.node_name

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": host_one}, "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "httpd", "image": "busybox", "command": ["sh", "-c", HTTPD],
                            "ports": [{"name": "http", "containerPort": 8080}],
                            "readinessProbe": {"exec": {"command": ["test", "-f", "/www/ready"]},
                                               "periodSeconds": 1}}]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(deployment))
    await kubectl("expose", "deployment", "web", "--port=80", "--target-port=8080")
    client_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
                  "spec": {"nodeName": host_two, "terminationGracePeriodSeconds": 1,
                           "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", SLEEP]}]}}
    await kubectl("create", "-f", "-", stdin=json.dumps(client_pod))

    async def ready_pods() -> list[dict[str, object]] | None:
        pods = (await get_json(kubectl, "pods", "-l", "app=web"))["items"]
        ready = [p for p in pods if not p["metadata"].get("deletionTimestamp")
                 and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                 and p["spec"].get("nodeName") == host_one]
        return ready if len(ready) == 2 else None

    pods = await until(ready_pods, "two ready web pods on node one")
    names = sorted(str(p["metadata"]["name"]) for p in pods)
    await cluster.wait_pod("client", lambda p: p.status.phase == "Running")

    async def endpoints(service: str = "web") -> list[tuple[str, bool]]:
        slices = (await get_json(kubectl, "endpointslices", "-l", f"kubernetes.io/service-name={service}"))["items"]
        return sorted((e["targetRef"]["name"], e["conditions"].get("ready", False))
                      for s in slices for e in s.get("endpoints") or [])

    await until(lambda: _eq(endpoints(), [(n, True) for n in names]), "both pods ready in the slice")

    # the pod's resolv.conf and Service environment
    _, resolv, _ = await kubectl("exec", "client", "--", "cat", "/etc/resolv.conf")
    assert f"nameserver {DNS_IP}" in resolv and "search default.svc.cluster.local svc.cluster.local cluster.local" \
        in resolv and "options ndots:5" in resolv, resolv
    _, env, _ = await kubectl("exec", "client", "--", "env")
    assert "KUBERNETES_SERVICE_HOST=10.96.0.1" in env and "KUBERNETES_SERVICE_PORT=443" in env, env

    # by name, from the other node, spread over both endpoints
    loop = "for i in $(seq 24); do timeout 5 wget -q -O - http://web.default.svc.cluster.local; done"

    async def answers(script: str) -> list[str]:
        _, out, _ = await kubectl("exec", "client", "--", "sh", "-c", script)
        return out.split()

    async def both() -> bool:
        return sorted(set(await answers(loop))) == names

    await until(both, "requests to web.default.svc.cluster.local answered by both pods")
    assert set(await answers("timeout 5 wget -q -O - http://web")) <= set(names)  # the search path

    # a headless Service lists the pods
    await kubectl("create", "service", "clusterip", "web-headless", "--clusterip=None", "--tcp=8080")
    await kubectl("patch", "service", "web-headless", "-p", json.dumps({"spec": {"selector": {"app": "web"}}}))
    ips = sorted(str(p["status"]["podIP"]) for p in pods)

    async def listed() -> bool:
        _, out, _ = await kubectl("exec", "client", "--", "nslookup", "web-headless.default.svc.cluster.local",
                                  ok=False)
        return sorted(set(re.findall(r"Address: (\d+\.\d+\.\d+\.\d+)", out))) == ips

    await until(listed, "the headless Service's name to list both pod IPs")

    # a NodePort from the host, on the node's address
    await kubectl("expose", "deployment", "web", "--name=web-np", "--type=NodePort", "--port=80",
                  "--target-port=8080")
    node_port = (await get_json(kubectl, "service", "web-np"))["spec"]["ports"][0]["nodePort"]

    async def node_port_answers() -> bool:
        try:
            return await _fetch(f"http://{net.address}:{node_port}/") in names
        except OSError:
            return False

    await until(node_port_answers, "the NodePort to answer from the host")

    # kubectl port-forward svc/web: to a pod behind it, on the target port
    forward = await kubectl.start("port-forward", "svc/web", ":80")
    try:
        assert forward.stdout is not None
        line = (await asyncio.wait_for(forward.stdout.readline(), 20)).decode()
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
        assert match, line
        assert await _fetch(f"http://127.0.0.1:{match.group(1)}/") in names
    finally:
        forward.kill()
        await forward.wait()
    _, info, _ = await kubectl("cluster-info")
    assert f"Kubernetes control plane is running at https://{cluster.apiserver.rest_address}" in info, info
    assert "CoreDNS is running at" in info, info

    # a pod turned unready leaves the slice and gets no more traffic
    await kubectl("exec", names[0], "--", "rm", "/www/ready")
    await until(lambda: _eq(endpoints(), [(names[0], False), (names[1], True)]), "the unready pod out of service")

    async def only_ready() -> bool:
        return set(await answers(loop)) == {names[1]}

    await until(only_ready, "all requests on the ready pod")
    # hairpin: the ready pod reaches itself through its own Service
    _, out, _ = await kubectl("exec", names[1], "--", "sh", "-c", "timeout 5 wget -q -O - http://web")
    assert out.strip() == names[1]

    # in-cluster clients: the official client from the client pod's network, env and token
    _, token, _ = await kubectl("exec", "client", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
    _, ca, _ = await kubectl("exec", "client", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text(ca)
    client_ip = (await get_json(kubectl, "pod", "client"))["status"]["podIP"]
    pod_env = dict(line.split("=", 1) for line in env.splitlines() if line.startswith("KUBERNETES_SERVICE_"))

    async def in_cluster() -> str:
        proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", _pod_netns(client_ip), sys.executable, "-c", IN_CLUSTER,
            str(tmp_path / "token"), str(tmp_path / "ca.crt"), env=pod_env, stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
        return out.decode().strip()

    assert await in_cluster() == "status 403"  # known (its token), not yet allowed
    await kubectl("create", "rolebinding", "default-view", "--clusterrole=view", "--serviceaccount=default:default")
    await until(lambda: _startswith(in_cluster(), "ok "), "the in-cluster client allowed to list pods")

    # deleting the Service removes every rule of its
    svc = (await get_json(kubectl, "service", "web"))
    [port] = [p for p in service_ports(net.proxy.services.store.list(), net.proxy.slices.store.list())
              if p.name == "web"]
    chain = svc_chain(port)
    assert chain in subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    await kubectl("delete", "service", "web")

    async def rules_gone() -> bool:
        saved = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        return chain not in saved and svc["spec"]["clusterIP"] + "/32" not in saved

    await until(rules_gone, "the deleted Service's rules to go")
    await kubectl("delete", "deployment", "web")


async def _eq(value: object, expected: object) -> bool:
    return await value == expected  # type: ignore[misc]


async def _startswith(value: object, prefix: str) -> bool:
    return str(await value).startswith(prefix)  # type: ignore[misc]
