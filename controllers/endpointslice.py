"""The EndpointSlice controller, as upstream's pkg/controller/endpointslice: for every
Service with a selector, the pods it selects as endpoints in EndpointSlices it owns.

An endpoint is a pod with an IP: ready when the pod is Ready (or the Service publishes
not-ready addresses) and not terminating, serving when Ready, terminating while it is
being deleted (upstream keeps terminating pods, so that kube-proxy can drain them).
Pods whose named ports resolve to different numbers go to different slices (a slice
has one port list); at most 100 endpoints per slice. Slices are updated in place when
their content changes, created and deleted as the endpoints need (the reconciler's
outcome, without its placement heuristics)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from controllers.controllerref import controller_ref
from controllers.endpointutil import find_port, pod_ready, queue_services_of_pods, selects, should_be_endpoint
from kubeling import errors
from kubeling.client import Client
from kubeling.discovery import MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2

__all__ = ["EndpointSliceController", "desired_slices", "pair_slices", "MANAGED_BY", "CONTROLLER_NAME",
           "MAX_ENDPOINTS_PER_SLICE"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
MANAGED_BY = CONTROLLER_NAME
MAX_ENDPOINTS_PER_SLICE = 100  # upstream's --max-endpoints-per-slice default
# How long the informer may take to show our own writes before they are no longer waited for.
WRITE_VISIBLE_WITHIN = 5.0
ZONE_LABEL = "topology.kubernetes.io/zone"

PortKey = tuple[tuple[str, str, int], ...]  # (name, protocol, port) per Service port


@dataclass
class DesiredSlice:
    ports: list[discovery_pb2.EndpointSlicePort]
    endpoints: list[discovery_pb2.Endpoint]


def _endpoint(svc: core_pb2.Service, pod: core_pb2.Pod, nodes: Informer[core_pb2.Node]) -> discovery_pb2.Endpoint:
    terminating = pod.metadata.HasField("deletionTimestamp")
    serving = svc.spec.publishNotReadyAddresses or pod_ready(pod)
    endpoint = discovery_pb2.Endpoint(
        addresses=[pod.status.podIP],
        conditions=discovery_pb2.EndpointConditions(ready=serving and not terminating, serving=serving,
                                                    terminating=terminating),
        targetRef=meta_pb2.ObjectReference(kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name,
                                           uid=pod.metadata.uid))
    if pod.spec.nodeName:
        endpoint.nodeName = pod.spec.nodeName
        node = nodes.store.get(pod.spec.nodeName)
        if node is not None and ZONE_LABEL in node.metadata.labels:
            endpoint.zone = node.metadata.labels[ZONE_LABEL]
    if pod.spec.hostname and pod.spec.subdomain == svc.metadata.name:
        endpoint.hostname = pod.spec.hostname
    return endpoint


def desired_slices(svc: core_pb2.Service, pods: list[core_pb2.Pod],
                   nodes: Informer[core_pb2.Node]) -> list[DesiredSlice]:
    """The slices the Service's pods call for, grouped by resolved ports, in a stable order."""
    groups: dict[PortKey, list[discovery_pb2.Endpoint]] = {}
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        if not should_be_endpoint(pod, include_terminating=True):
            continue
        if pod.status.podIP and ":" in pod.status.podIP:
            continue  # IPv4 slices only (single-stack clusters)
        resolved: list[tuple[str, str, int]] = []
        for port in svc.spec.ports:
            number = find_port(pod, port)
            if number is not None:
                resolved.append((port.name, port.protocol or "TCP", number))
        groups.setdefault(tuple(resolved), []).append(_endpoint(svc, pod, nodes))
    out: list[DesiredSlice] = []
    for key, endpoints in sorted(groups.items()):
        ports = [discovery_pb2.EndpointSlicePort(name=name, protocol=protocol, port=number)
                 for name, protocol, number in key]
        for start in range(0, len(endpoints), MAX_ENDPOINTS_PER_SLICE):
            out.append(DesiredSlice(ports, endpoints[start:start + MAX_ENDPOINTS_PER_SLICE]))
    if not out and svc.spec.selector:
        # a Service without endpoints still has a slice saying so (upstream's placeholder)
        out.append(DesiredSlice([], []))
    return out


def _port_key(ports: list[discovery_pb2.EndpointSlicePort]) -> tuple[tuple[str, str, int], ...]:
    return tuple((p.name, p.protocol, p.port) for p in ports)


def pair_slices(wanted: list[DesiredSlice], existing: list[discovery_pb2.EndpointSlice]) -> \
        list[tuple[DesiredSlice | None, discovery_pb2.EndpointSlice | None]]:
    """Which existing slice becomes which wanted one: a slice keeps its ports when a wanted
    slice has the same (as upstream's reconciler matches by ports), others are reused in
    name order, then the rest created (None for the existing) or deleted (None for the
    wanted). Matching by position alone made two slices swap their contents, one write
    after the other, whenever a new slice's name sorted first: for a moment both had the
    same ports and the other ports had no endpoints."""
    free = list(existing)
    pairs: list[tuple[DesiredSlice | None, discovery_pb2.EndpointSlice | None]] = []
    unmatched: list[DesiredSlice] = []
    for desired in wanted:
        key = _port_key(desired.ports)
        same = next((es for es in free if _port_key(list(es.ports)) == key), None)
        if same is None:
            unmatched.append(desired)
            continue
        free.remove(same)
        pairs.append((desired, same))
    for desired in unmatched:
        pairs.append((desired, free.pop(0) if free else None))
    pairs += [(None, es) for es in free]
    return pairs


class EndpointSliceController:
    def __init__(self, client: Client, services: Informer[core_pb2.Service], pods: Informer[core_pb2.Pod],
                 slices: Informer[discovery_pb2.EndpointSlice], nodes: Informer[core_pb2.Node],
                 workers: int = 2) -> None:
        self.client = client
        self.services, self.pods, self.slices, self.nodes = services, pods, slices, nodes
        self.queue = WorkQueue("endpointslice")
        # per Service: the slices it wrote, by name -> (resourceVersion, "": deleted; when)
        # (upstream's endpointSliceTracker: a sync on a cache that misses them would duplicate them)
        self._written: dict[str, dict[str, tuple[str, float]]] = {}
        self.workers = Workers(self.queue, self.sync, workers)
        services.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                             on_delete=self._enqueue)
        queue_services_of_pods(pods, services, self.queue.add)
        slices.add_handler(on_add=self._slice_changed, on_update=lambda old, new: self._slice_changed(new),
                           on_delete=self._slice_changed)

    def _enqueue(self, svc: core_pb2.Service) -> None:
        self.queue.add(object_key(svc))

    def _slice_changed(self, es: discovery_pb2.EndpointSlice) -> None:
        if es.metadata.labels.get(MANAGED_BY_LABEL) == MANAGED_BY and SERVICE_NAME_LABEL in es.metadata.labels:
            self.queue.add(f"{es.metadata.namespace}/{es.metadata.labels[SERVICE_NAME_LABEL]}")

    def _owned(self, namespace: str, name: str) -> list[discovery_pb2.EndpointSlice]:
        return sorted((es for es in self.slices.store.by_index(INDEX_NAMESPACE, namespace)
                       if es.metadata.labels.get(SERVICE_NAME_LABEL) == name
                       and es.metadata.labels.get(MANAGED_BY_LABEL) == MANAGED_BY),
                      key=lambda es: es.metadata.name)

    def _cache_behind(self, key: str) -> bool:
        namespace = key.partition("/")[0]
        now = time.monotonic()
        for name, (rv, when) in self._written.get(key, {}).items():
            if now - when > WRITE_VISIBLE_WITHIN:
                continue
            cached = self.slices.store.get(f"{namespace}/{name}")
            if (cached is not None) if not rv else \
                    (cached is None or int(cached.metadata.resourceVersion) < int(rv)):
                return True
        self._written.pop(key, None)
        return False

    def _wrote(self, key: str, es: discovery_pb2.EndpointSlice, deleted: bool = False) -> None:
        self._written.setdefault(key, {})[es.metadata.name] = (
            "" if deleted else es.metadata.resourceVersion, time.monotonic())

    async def sync(self, key: str) -> None:
        if self._cache_behind(key):
            self.queue.add_after(key, 0.05)  # our last writes are not in the informer yet
            return
        namespace, _, name = key.partition("/")
        svc = self.services.store.get(key)
        existing = self._owned(namespace, name)
        if svc is None or not svc.spec.selector or svc.spec.type == "ExternalName" \
                or svc.metadata.HasField("deletionTimestamp"):
            for es in existing:  # upstream leaves this to the garbage collector; at once is kinder
                await self._delete(key, es)
            return
        pods = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, namespace)
                if selects(svc, dict(p.metadata.labels))]
        wanted = desired_slices(svc, pods, self.nodes)
        labels = {k: v for k, v in svc.metadata.labels.items() if k not in (SERVICE_NAME_LABEL, MANAGED_BY_LABEL)}
        labels[SERVICE_NAME_LABEL] = name
        labels[MANAGED_BY_LABEL] = MANAGED_BY
        for desired, current in pair_slices(wanted, existing):
            if desired is None:
                if current is not None:
                    await self._delete(key, current)
            elif current is None:
                es = discovery_pb2.EndpointSlice(
                    metadata=meta_pb2.ObjectMeta(generateName=f"{name}-", namespace=namespace, labels=labels,
                                                 ownerReferences=[controller_ref(svc, "v1", "Service")]),
                    addressType="IPv4", ports=desired.ports, endpoints=desired.endpoints)
                self._wrote(key, await self.client.endpointslices.create(es))
            else:
                await self._update(key, svc, current, desired, labels)

    async def _update(self, key: str, svc: core_pb2.Service, current: discovery_pb2.EndpointSlice,
                      desired: DesiredSlice, labels: dict[str, str]) -> None:
        if list(current.ports) == desired.ports and list(current.endpoints) == desired.endpoints \
                and dict(current.metadata.labels) == labels:
            return
        es = discovery_pb2.EndpointSlice()
        es.CopyFrom(current)
        del es.ports[:]
        es.ports.extend(desired.ports)
        del es.endpoints[:]
        es.endpoints.extend(desired.endpoints)
        es.metadata.labels.clear()
        es.metadata.labels.update(labels)
        if not any(ref.uid == svc.metadata.uid for ref in es.metadata.ownerReferences):
            del es.metadata.ownerReferences[:]
            es.metadata.ownerReferences.append(controller_ref(svc, "v1", "Service"))
        self._wrote(key, await self.client.endpointslices.update(es))  # a conflict retries the whole sync

    async def _delete(self, key: str, es: discovery_pb2.EndpointSlice) -> None:
        try:
            await self.client.endpointslices.delete(es.metadata.name, es.metadata.namespace)
        except errors.NotFound:
            pass
        self._wrote(key, es, deleted=True)
