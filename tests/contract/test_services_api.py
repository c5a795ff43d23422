"""The Service API with the real kubectl: `kubectl create service`/`expose` (protobuf
bodies), defaults, upstream's printed columns, validation in upstream's words, ClusterIP
and node-port allocation that is durable (a second apiserver on the same etcd, a restart)
and released on delete, the repair of the bitmaps, and the `kubernetes` Service with its
Endpoints and EndpointSlice (kubectl cluster-info)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, scheme
from kubeling.client import Client
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl

SERVICE_RANGE = "10.97.0.0/24"


def _config(etcd: EtcdServer, prefix: str, **overrides: object) -> object:
    return apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0", service_cluster_ip_range=SERVICE_RANGE,
                            service_node_port_range="30100-30104", **overrides)


@pytest.fixture
async def server(etcd: EtcdServer, prefix: str) -> AsyncIterator[APIServer]:
    srv = APIServer(_config(etcd, prefix))  # type: ignore[arg-type]
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop(grace=0)


@pytest.fixture
def kubectl(server: APIServer, tmp_path: Path) -> Kubectl:
    return Kubectl(write_kubeconfig(tmp_path / "config", server.rest_address))


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _svc(name: str, *ports: core_pb2.ServicePort, **spec: object) -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                            spec=core_pb2.ServiceSpec(ports=list(ports), **spec))  # type: ignore[arg-type]


async def test_kubectl_creates_and_prints_services(kubectl: Kubectl) -> None:
    await kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    _, out, _ = await kubectl("get", "service", "web", "-o", "json")
    svc = json.loads(out)
    spec = svc["spec"]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network(SERVICE_RANGE)
    assert spec["clusterIPs"] == [spec["clusterIP"]] and spec["type"] == "ClusterIP"
    assert spec["ports"] == [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}]
    assert (spec["sessionAffinity"], spec["ipFamilies"], spec["ipFamilyPolicy"], spec["internalTrafficPolicy"]) == \
        ("None", ["IPv4"], "SingleStack", "Cluster")
    assert spec["selector"] == {"app": "web"}

    await kubectl("create", "service", "nodeport", "edge", "--tcp=443:8443", "--node-port=30102")
    _, out, _ = await kubectl("get", "svc", "edge", "-o", "json")
    edge = json.loads(out)["spec"]
    assert edge["ports"][0]["nodePort"] == 30102 and edge["externalTrafficPolicy"] == "Cluster"
    _, out, _ = await kubectl("get", "services")
    rows = {line.split()[0]: line.split() for line in out.strip().split("\n")[1:]}
    assert rows["edge"][1:5] == ["NodePort", edge["clusterIP"], "<none>", "443:30102/TCP"], out
    assert rows["web"][1:5] == ["ClusterIP", spec["clusterIP"], "<none>", "80/TCP"], out
    _, out, _ = await kubectl("get", "svc", "web", "-o", "wide")
    assert out.split("\n")[0].split()[-1] == "SELECTOR" and "app=web" in out

    # a strategic merge patch merges ports by port number (upstream's patchMergeKey)
    await kubectl("patch", "svc", "edge", "-p", json.dumps({"spec": {"ports": [{"port": 443, "nodePort": 30103}]}}))
    _, out, _ = await kubectl("get", "svc", "edge", "-o", "json")
    assert [(p["port"], p["targetPort"], p["nodePort"]) for p in json.loads(out)["spec"]["ports"]] == \
        [(443, 8443, 30103)]
    # a replace that leaves out what was allocated keeps it (upstream's patchAllocatedValues)
    manifest = json.loads(out)
    for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        manifest["spec"].pop(key)
    del manifest["spec"]["ports"][0]["nodePort"], manifest["metadata"]["resourceVersion"]
    await kubectl("replace", "-f", "-", stdin=json.dumps(manifest))
    _, out, _ = await kubectl("get", "svc", "edge", "-o", "json")
    replaced = json.loads(out)["spec"]
    assert (replaced["clusterIP"], replaced["ports"][0]["nodePort"]) == (edge["clusterIP"], 30103)

    # headless: no address, DNS lists the pods instead
    await kubectl("create", "service", "clusterip", "db", "--clusterip=None", "--tcp=5432")
    _, out, _ = await kubectl("get", "svc", "db", "-o", "jsonpath={.spec.clusterIP} {.spec.clusterIPs}")
    assert out == 'None ["None"]'
    await kubectl("create", "service", "externalname", "search", "--external-name=search.example.com")
    _, out, _ = await kubectl("get", "svc", "search")
    assert out.split("\n")[1].split()[1:4] == ["ExternalName", "<none>", "search.example.com"], out


async def test_kubectl_expose_a_pod_by_its_named_port(kubectl: Kubectl) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "labels": {"run": "app"}},
           "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"name": "http",
                                                                                  "containerPort": 80}]}]}}
    await kubectl("create", "-f", "-", stdin=json.dumps(pod))
    await kubectl("expose", "pod", "app", "--port=8000", "--target-port=http", "--name=app-svc")
    _, out, _ = await kubectl("get", "svc", "app-svc", "-o", "json")
    spec = json.loads(out)["spec"]
    assert spec["selector"] == {"run": "app"} and spec["ports"][0]["targetPort"] == "http"


async def test_validation_in_upstreams_words(kubectl: Kubectl, server: APIServer) -> None:
    async def refused(manifest: dict[str, object]) -> str:
        code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "Service", **manifest}), ok=False)
        assert code != 0
        return err

    err = await refused({"metadata": {"name": "noports"}, "spec": {"selector": {"a": "b"}}})
    assert 'The Service "noports" is invalid: spec.ports: Required value' in err, err
    err = await refused({"metadata": {"name": "twoports"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}})
    assert "spec.ports[0].name: Required value" in err, err
    err = await refused({"metadata": {"name": "bigport"}, "spec": {"ports": [{"port": 70000}]}})
    assert "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive" in err, err
    err = await refused({"metadata": {"name": "outside"}, "spec": {"clusterIP": "10.1.2.3", "ports": [{"port": 1}]}})
    assert ("failed to allocate IP 10.1.2.3: the provided IP (10.1.2.3) is not in the valid range. "
            f"The range of valid IPs is {SERVICE_RANGE}") in err, err
    err = await refused({"metadata": {"name": "np"}, "spec": {"ports": [{"port": 1, "nodePort": 30101}]}})
    assert "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'" in err, err
    err = await refused({"metadata": {"name": "np"}, "spec": {"type": "NodePort",
                                                              "ports": [{"port": 1, "nodePort": 31000}]}})
    assert "provided port is not in the valid range. The range of valid ports is 30100-30104" in err, err
    err = await refused({"metadata": {"name": "Caps"}, "spec": {"ports": [{"port": 1}]}})
    assert 'metadata.name: Invalid value: "Caps"' in err, err
    err = await refused({"metadata": {"name": "affinity"}, "spec": {"ports": [{"port": 1}],
                                                                    "sessionAffinity": "Sticky"}})
    assert 'spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"' in err, err

    await kubectl("create", "service", "clusterip", "fixed", "--tcp=80", "--clusterip=10.97.0.50")
    err = await refused({"metadata": {"name": "twin"}, "spec": {"clusterIP": "10.97.0.50", "ports": [{"port": 1}]}})
    assert "failed to allocate IP 10.97.0.50: provided IP is already allocated" in err, err
    patch = json.dumps({"spec": {"clusterIP": "10.97.0.51", "clusterIPs": ["10.97.0.51"]}})
    code, _, err = await kubectl("patch", "svc", "fixed", "-p", patch, ok=False)
    assert code != 0 and "spec.clusterIPs[0]: Invalid value: \"10.97.0.51\": may not change once set" in err, err
    # a failed create gives back what it took: nothing leaks
    ips = server.registries[scheme.SERVICES].hooks.ips
    assert {ip for ip in await ips.taken()} == {"10.97.0.1", "10.97.0.50"}


async def test_allocations_are_durable_released_and_exhausted(etcd: EtcdServer, prefix: str,
                                                              server: APIServer) -> None:
    client = Client(server.address)
    other = APIServer(_config(etcd, prefix))  # type: ignore[arg-type]
    await other.start()
    second = Client(other.address)
    try:
        # two apiservers on one etcd never hand out the same address or port
        made = await asyncio.gather(*(
            (client if i % 2 else second).services.create(_svc(f"s{i}", core_pb2.ServicePort(port=80), type="NodePort"))
            for i in range(5)))
        assert len({s.spec.clusterIP for s in made}) == 5
        assert sorted(s.spec.ports[0].nodePort for s in made) == [30100, 30101, 30102, 30103, 30104]
        with pytest.raises(errors.Invalid, match=r"spec.ports\[0\].nodePort: Invalid value: 0: range is full"):
            await client.services.create(_svc("s5", core_pb2.ServicePort(port=80), type="NodePort"))
        # many creates at once through one apiserver: its allocations take turns, none refused (200: the
        # old code ran out of compare-and-swap retries here)
        burst = await asyncio.gather(*(client.services.create(_svc(f"b{i}", core_pb2.ServicePort(port=80)))
                                       for i in range(200)))
        assert len({s.spec.clusterIP for s in burst} | {s.spec.clusterIP for s in made}) == 205
        # NodePort -> ClusterIP gives the port back; delete gives the address back
        s0 = await client.services.get("s0", "default")
        s0.spec.type = "ClusterIP"
        s0.spec.ports[0].nodePort = 0
        s0.spec.ClearField("externalTrafficPolicy")
        await client.services.update(s0)
        freed_port = made[0].spec.ports[0].nodePort
        s5 = await second.services.create(_svc("s5", core_pb2.ServicePort(port=80), type="NodePort"))
        assert s5.spec.ports[0].nodePort == freed_port
        await client.services.delete("s1", "default")
        ips = server.registries[scheme.SERVICES].hooks.ips
        assert made[1].spec.clusterIP not in await ips.taken()
    finally:
        await second.close()
        await other.stop(grace=0)
        await client.close()


async def test_repair_restores_lost_bits(server: APIServer) -> None:
    client = Client(server.address)
    try:
        svc = await client.services.create(_svc("kept", core_pb2.ServicePort(port=80), type="NodePort"))
        hooks = server.registries[scheme.SERVICES].hooks
        ips, ports = hooks.ips, hooks.ports
        await ips.release([svc.spec.clusterIP])  # as if etcd's bitmap were restored from an older backup
        await ports.release([str(svc.spec.ports[0].nodePort)])
        repair = next(c for c in server._election.controllers
                      if type(c).__name__ == "AllocationRepair")
        await repair.repair()
        assert svc.spec.clusterIP in await ips.taken() and str(svc.spec.ports[0].nodePort) in await ports.taken()
        # a bit no Service holds is a leak: freed after three passes, not before
        leaked = await ips.allocate()
        for _ in range(2):
            await repair.repair()
            assert leaked in await ips.taken()
        await repair.repair()
        assert leaked not in await ips.taken()
    finally:
        await client.close()


async def test_the_kubernetes_service(kubectl: Kubectl, server: APIServer) -> None:
    client = Client(server.address)
    try:
        async def published() -> bool:
            try:
                await client.endpointslices.get("kubernetes", "default")
                return True
            except errors.NotFound:
                return False

        await _eventually(published, "the kubernetes EndpointSlice")
        svc = await client.services.get("kubernetes", "default")
        assert svc.spec.clusterIP == "10.97.0.1" and svc.spec.ports[0].port == 443
        assert svc.spec.ports[0].targetPort.intVal == server.rest_port
        _, out, _ = await kubectl("get", "endpoints", "kubernetes")
        assert f"127.0.0.1:{server.rest_port}" in out.split("\n")[1], out
        _, out, _ = await kubectl("get", "endpointslices")
        assert out.split("\n")[1].split()[:4] == ["kubernetes", "IPv4", str(server.rest_port), "127.0.0.1"], out
        _, out, _ = await kubectl("cluster-info")
        assert f"Kubernetes control plane is running at http://{server.rest_address}" in out, out
        # deleted by someone: back within a reconcile
        await client.services.delete("kubernetes", "default")
        controller = next(c for c in server._election.controllers
                          if type(c).__name__ == "KubernetesService")
        await controller.reconcile()
        assert (await client.services.get("kubernetes", "default")).spec.clusterIP == "10.97.0.1"
    finally:
        await client.close()


async def test_load_balancer_fields_as_upstream(kubectl: Kubectl, server: APIServer) -> None:
    """type: LoadBalancer's defaults, its node ports (declined with allocateLoadBalancerNodePorts:
    false), the health-check node port of a Local policy (held while needed, then given back),
    the class that may not change, and the status that shows as EXTERNAL-IP."""
    client = Client(server.address)
    ports = server.registries[scheme.SERVICES].hooks.ports
    try:
        await kubectl("create", "service", "loadbalancer", "web", "--tcp=80")
        web = await client.services.get("web", "default")
        assert web.spec.allocateLoadBalancerNodePorts and web.spec.externalTrafficPolicy == "Cluster"
        assert 30100 <= web.spec.ports[0].nodePort <= 30104 and web.spec.healthCheckNodePort == 0
        _, out, _ = await kubectl("get", "svc", "web")
        assert out.split("\n")[1].split()[1:4] == ["LoadBalancer", web.spec.clusterIP, "<pending>"], out

        direct = await client.services.create(_svc("direct", core_pb2.ServicePort(port=80), type="LoadBalancer",
                                                   allocateLoadBalancerNodePorts=False))
        assert direct.spec.ports[0].nodePort == 0 and not direct.spec.allocateLoadBalancerNodePorts

        local = await client.services.create(_svc("local", core_pb2.ServicePort(port=80), type="LoadBalancer",
                                                  externalTrafficPolicy="Local"))
        check_port = local.spec.healthCheckNodePort
        assert 30100 <= check_port <= 30104 and check_port != local.spec.ports[0].nodePort
        assert str(check_port) in await ports.taken()
        # an update that leaves it out keeps it; Cluster gives it back
        local.spec.healthCheckNodePort = 0
        local = await client.services.update(local)
        assert local.spec.healthCheckNodePort == check_port
        local.spec.externalTrafficPolicy = "Cluster"
        local = await client.services.update(local)
        assert local.spec.healthCheckNodePort == 0 and str(check_port) not in await ports.taken()

        # the load balancer's status: an address is a VIP unless it says otherwise
        web.status.loadBalancer.ingress.add(ip="192.0.2.10")
        web = await client.services.update_status(web)
        assert web.status.loadBalancer.ingress[0].ipMode == "VIP"
        _, out, _ = await kubectl("get", "svc", "web")
        assert out.split("\n")[1].split()[3] == "192.0.2.10", out
        web.status.loadBalancer.ingress[0].ip = "not-an-ip"
        with pytest.raises(errors.Invalid, match=r"status.loadBalancer.ingress\[0\].ip: Invalid value"):
            await client.services.update_status(web)

        async def refused(manifest: dict[str, object]) -> str:
            code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad"}, **manifest}), ok=False)
            assert code != 0
            return err

        err = await refused({"spec": {"ports": [{"port": 1}], "allocateLoadBalancerNodePorts": True}})
        assert "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'" in err
        err = await refused({"spec": {"ports": [{"port": 1}], "loadBalancerClass": "example.com/lb"}})
        assert "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'" in err, err
        err = await refused({"spec": {"type": "NodePort", "ports": [{"port": 1}], "healthCheckNodePort": 30103}})
        assert ("spec.healthCheckNodePort: Forbidden: may only be set when `type` is 'LoadBalancer' and "
                "`externalTrafficPolicy` is 'Local'") in err, err
        err = await refused({"spec": {"ports": [{"port": 1}], "externalTrafficPolicy": "Local"}})
        assert ('spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible '
                "services") in err, err
        err = await refused({"spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                                      "ports": [{"port": 1}], "loadBalancerSourceRanges": ["10.0.0.0/33"]}})
        assert 'spec.loadBalancerSourceRanges[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR' in err, err
        # external IPs make a ClusterIP Service externally accessible: its policy defaults
        await kubectl("create", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
            "spec": {"ports": [{"port": 1}], "externalIPs": ["192.0.2.20"]}}))
        assert (await client.services.get("ext", "default")).spec.externalTrafficPolicy == "Cluster"

        classy = await client.services.create(_svc("classy", core_pb2.ServicePort(port=80), type="LoadBalancer",
                                                   allocateLoadBalancerNodePorts=False,
                                                   loadBalancerClass="example.com/lb"))
        code, _, err = await kubectl("patch", "svc", "classy", "-p", '{"spec":{"loadBalancerClass":"other.io/lb"}}',
                                     ok=False)
        assert code != 0 and 'spec.loadBalancerClass: Invalid value: "other.io/lb": may not change once set' in err
        # leaving the type behind takes the type's fields along
        classy.spec.type = "ClusterIP"
        classy = await client.services.update(classy)
        assert not classy.spec.HasField("loadBalancerClass")
        assert not classy.spec.HasField("allocateLoadBalancerNodePorts")
    finally:
        await client.close()
