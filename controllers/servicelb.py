"""The service load-balancer controller, as k3s's ServiceLB or MetalLB's layer-2 mode do it
for clusters without a cloud: a Service of `type: LoadBalancer` (of no
`loadBalancerClass`, or of the one this controller is told to claim) gets the addresses
of the nodes that can serve it in `status.loadBalancer.ingress` (ipMode VIP), and every
kube-proxy answers on them (KUBE-EXT chains, as for a cloud load balancer's VIP).

The nodes that can serve it: Ready, not labelled
`node.kubernetes.io/exclude-from-external-load-balancers` (upstream's service
controller's rule); for `externalTrafficPolicy: Local`, those with a ready endpoint of
it when any has one (clients then keep their address), else all of them, so that the
address stays put while a rollout moves the pods. A node's ExternalIP is its address
when it has one, else its InternalIP (k3s's choice). A Service that stops being a
LoadBalancer of this controller's has its ingress cleared, as upstream's controller
does. Events: EnsuringLoadBalancer, EnsuredLoadBalancer, DeletedLoadBalancer."""

from __future__ import annotations

import ipaddress
import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.discovery import SERVICE_NAME_LABEL
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, discovery_pb2

__all__ = ["ServiceLBController", "EXCLUDE_LABEL", "wanted_ingress", "balances"]

log = logging.getLogger(__name__)

EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


def balances(svc: core_pb2.Service, load_balancer_class: str = "") -> bool:
    """Whether this controller is the Service's load balancer."""
    if svc.spec.type != "LoadBalancer":
        return False
    if svc.spec.HasField("loadBalancerClass"):
        return bool(load_balancer_class) and svc.spec.loadBalancerClass == load_balancer_class
    return True


def _ready(node: core_pb2.Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def _address(node: core_pb2.Node) -> str:
    by_type: dict[str, str] = {}
    for a in node.status.addresses:
        by_type.setdefault(a.type, a.address)
    for kind in ("ExternalIP", "InternalIP"):
        try:
            if kind in by_type and ipaddress.ip_address(by_type[kind]).version == 4:
                return by_type[kind]
        except ValueError:
            continue
    return ""


def wanted_ingress(svc: core_pb2.Service, nodes: list[core_pb2.Node],
                   slices: list[discovery_pb2.EndpointSlice]) -> list[core_pb2.LoadBalancerIngress]:
    """The ingress addresses `svc` should have, sorted by number."""
    eligible = [n for n in nodes if _ready(n) and EXCLUDE_LABEL not in n.metadata.labels and _address(n)]
    if svc.spec.externalTrafficPolicy == "Local":
        serving = {e.nodeName for es in slices for e in es.endpoints
                   if e.nodeName and (not e.conditions.HasField("ready") or e.conditions.ready)}
        eligible = [n for n in eligible if n.metadata.name in serving] or eligible
    addresses = sorted({_address(n) for n in eligible}, key=ipaddress.IPv4Address)
    return [core_pb2.LoadBalancerIngress(ip=a, ipMode="VIP") for a in addresses]


class ServiceLBController:
    def __init__(self, client: Client, services: Informer[core_pb2.Service], nodes: Informer[core_pb2.Node],
                 slices: Informer[discovery_pb2.EndpointSlice], recorder: EventRecorder, workers: int = 2,
                 load_balancer_class: str = "") -> None:
        self.client = client
        self.services, self.nodes, self.slices = services, nodes, slices
        self.recorder = recorder
        self.load_balancer_class = load_balancer_class
        self.queue = WorkQueue("service-lb")
        self.workers = Workers(self.queue, self.sync, workers)
        services.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                             on_delete=self._enqueue)
        nodes.add_handler(on_add=self._all, on_update=self._node_changed, on_delete=self._all)
        slices.add_handler(on_add=self._slice, on_update=lambda old, new: self._slice(new), on_delete=self._slice)

    def _enqueue(self, svc: core_pb2.Service) -> None:
        self.queue.add(object_key(svc))

    def _all(self, _node: object = None) -> None:
        for svc in self.services.store.list():
            if svc.spec.type == "LoadBalancer":
                self._enqueue(svc)

    def _node_changed(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        # heartbeats change the node every few seconds: only what decides eligibility counts
        if (_ready(old), _address(old), EXCLUDE_LABEL in old.metadata.labels) != \
                (_ready(new), _address(new), EXCLUDE_LABEL in new.metadata.labels):
            self._all()

    def _slice(self, es: discovery_pb2.EndpointSlice) -> None:
        name = es.metadata.labels.get(SERVICE_NAME_LABEL)
        if name:
            self.queue.add(f"{es.metadata.namespace}/{name}")

    async def sync(self, key: str) -> None:
        svc = self.services.store.get(key)
        if svc is None:
            return
        if not balances(svc, self.load_balancer_class):
            # another type now (or another's class): the addresses it had are no longer served
            if svc.spec.type != "LoadBalancer" and svc.status.loadBalancer.ingress:
                await self._write(svc, [])
                self.recorder.object_event(svc, "v1", "Service", NORMAL, "DeletedLoadBalancer",
                                           "Deleted load balancer")
            return
        slices = [es for es in self.slices.store.by_index(INDEX_NAMESPACE, svc.metadata.namespace)
                  if es.metadata.labels.get(SERVICE_NAME_LABEL) == svc.metadata.name] \
            if svc.spec.externalTrafficPolicy == "Local" else []
        ingress = wanted_ingress(svc, self.nodes.store.list(), slices)
        if list(svc.status.loadBalancer.ingress) == ingress:
            return
        if not ingress:
            self.recorder.object_event(svc, "v1", "Service", WARNING, "SyncLoadBalancerFailed",
                                       "Error syncing load balancer: no Ready node to serve it")
        else:
            self.recorder.object_event(svc, "v1", "Service", NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer")
        await self._write(svc, ingress)
        if ingress:
            self.recorder.object_event(svc, "v1", "Service", NORMAL, "EnsuredLoadBalancer", "Ensured load balancer")
        log.info("service %s load balancer: %s", key, ", ".join(i.ip for i in ingress) or "none")

    async def _write(self, svc: core_pb2.Service, ingress: list[core_pb2.LoadBalancerIngress]) -> None:
        updated = core_pb2.Service()
        updated.CopyFrom(svc)
        del updated.status.loadBalancer.ingress[:]
        updated.status.loadBalancer.ingress.extend(ingress)
        try:
            await self.client.services.update_status(updated)
        except errors.NotFound:
            pass  # deleted meanwhile
