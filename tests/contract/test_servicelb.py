"""The service load-balancer controller against a real apiserver, with the controller
manager's EndpointSlice controller (no kubelets: nodes' and pods' status written as
kubelets would): a LoadBalancer Service gets the addresses of the Ready nodes not excluded
from load balancers (ExternalIP before InternalIP), one of another class is left alone, a
Local one the nodes with its endpoints, a node turning NotReady leaves, and a Service
that is no longer a LoadBalancer loses its addresses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controllers.manager import ControllerManager
from controllers.servicelb import EXCLUDE_LABEL
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.wait import until


async def _node_status(client: Client, name: str, change: Callable[[core_pb2.Node], None]) -> core_pb2.Node:
    """A read-modify-write of a node's status, again after a conflict (the node IPAM writes
    the node's pod CIDR meanwhile), as client-go's RetryOnConflict."""
    for _ in range(10):
        node = await client.nodes.get(name)
        change(node)
        try:
            return await client.nodes.update_status(node)
        except errors.Conflict:
            continue
    raise AssertionError(f"node {name}: ten conflicts in a row")


async def _node(client: Client, name: str, *addresses: tuple[str, str], ready: bool = True,
                labels: dict[str, str] | None = None) -> core_pb2.Node:
    await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name, labels=labels or {})))

    def status(node: core_pb2.Node) -> None:
        node.status.addresses.extend(core_pb2.NodeAddress(type=t, address=a) for t, a in addresses)
        node.status.conditions.add(type="Ready", status="True" if ready else "False")
    return await _node_status(client, name, status)


async def _ingress(client: Client, name: str, want: list[str], what: str) -> None:
    async def check() -> Any:
        svc = await client.services.get(name, "default")
        got = [i.ip for i in svc.status.loadBalancer.ingress]
        assert all(i.ipMode == "VIP" for i in svc.status.loadBalancer.ingress)
        return got == want
    await until(check, what, 20.0)


def _lb(name: str, **spec: Any) -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.ServiceSpec(
        type="LoadBalancer", selector={"app": name}, ports=[core_pb2.ServicePort(port=80)], **spec))


async def test_load_balancers_get_the_addresses_of_the_nodes_that_serve_them(client: Client,
                                                                           manager: ControllerManager) -> None:
    await _node(client, "node-a", ("InternalIP", "192.0.2.11"))
    await _node(client, "node-b", ("InternalIP", "10.0.0.12"), ("ExternalIP", "192.0.2.12"))
    await _node(client, "node-c", ("InternalIP", "192.0.2.13"), labels={EXCLUDE_LABEL: ""})
    await _node(client, "node-d", ("InternalIP", "192.0.2.14"), ready=False)

    await client.services.create(_lb("web"))
    await _ingress(client, "web", ["192.0.2.11", "192.0.2.12"], "the Ready, included nodes' addresses")

    async def reasons() -> set[str]:  # events are written after the status, in the background
        events = await client.events.list("default", field_selector="involvedObject.name=web")
        return {e.reason for e in events.items}
    await until(reasons, "the load balancer's events", 20.0,
                check=lambda seen: {"EnsuringLoadBalancer", "EnsuredLoadBalancer"} <= seen)

    await client.services.create(_lb("theirs", loadBalancerClass="example.com/metal"))
    # a Local Service: the node with its ready pod, once the pod has a slice
    await client.services.create(_lb("local", externalTrafficPolicy="Local"))
    pod = await client.pods.create(core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name="local-1", namespace="default", labels={"app": "local"}),
        spec=core_pb2.PodSpec(nodeName="node-b", containers=[core_pb2.Container(name="c", image="busybox")])))
    pod.status.phase = "Running"
    pod.status.podIP = "10.244.2.5"
    pod.status.conditions.add(type="Ready", status="True")
    await client.pods.update_status(pod)
    await _ingress(client, "local", ["192.0.2.12"], "only the node with a local endpoint")

    # node-a goes NotReady: it serves nothing any more
    await _node_status(client, "node-a", lambda node: setattr(node.status.conditions[0], "status", "False"))
    await _ingress(client, "web", ["192.0.2.12"], "the NotReady node left out")
    assert not (await client.services.get("theirs", "default")).status.loadBalancer.ingress

    web = await client.services.get("web", "default")
    web.spec.type = "ClusterIP"
    for port in web.spec.ports:
        port.nodePort = 0
    await client.services.update(web)
    await _ingress(client, "web", [], "no load balancer for a ClusterIP Service")
