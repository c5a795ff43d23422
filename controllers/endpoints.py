"""The Endpoints controller, as upstream's pkg/controller/endpoint: the legacy v1
Endpoints object (named as its Service) that older clients still read. Ready pods'
addresses go to `addresses`, the others to `notReadyAddresses` (all to `addresses` when
the Service publishes not-ready addresses); terminating pods are left out unless it
does; addresses with the same resolved ports share a subset (upstream's RepackSubsets)."""

from __future__ import annotations

import logging

from controllers.endpointutil import find_port, pod_ready, queue_services_of_pods, selects, should_be_endpoint
from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["EndpointsController", "desired_subsets", "HEADLESS_LABEL"]

log = logging.getLogger(__name__)

HEADLESS_LABEL = "service.kubernetes.io/headless"
MAX_CAPACITY = 1000  # upstream truncates an Endpoints object beyond this many addresses

PortSet = tuple[tuple[str, int, str], ...]


def desired_subsets(svc: core_pb2.Service, pods: list[core_pb2.Pod]) -> list[core_pb2.EndpointSubset]:
    publish = svc.spec.publishNotReadyAddresses
    ready: dict[PortSet, list[core_pb2.EndpointAddress]] = {}
    not_ready: dict[PortSet, list[core_pb2.EndpointAddress]] = {}
    count = 0
    for pod in sorted(pods, key=lambda p: p.status.podIP):
        if not should_be_endpoint(pod, include_terminating=publish) or count >= MAX_CAPACITY:
            continue
        ports: list[tuple[str, int, str]] = []
        for port in svc.spec.ports:
            number = find_port(pod, port)
            if number is not None:
                ports.append((port.name, number, port.protocol or "TCP"))
        if svc.spec.ports and not ports:
            continue  # none of the Service's ports exists on this pod
        address = core_pb2.EndpointAddress(
            ip=pod.status.podIP, targetRef=meta_pb2.ObjectReference(
                kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid))
        if pod.spec.nodeName:
            address.nodeName = pod.spec.nodeName
        if pod.spec.hostname and pod.spec.subdomain == svc.metadata.name:
            address.hostname = pod.spec.hostname
        (ready if publish or pod_ready(pod) else not_ready).setdefault(tuple(sorted(ports)), []).append(address)
        count += 1
    subsets = []
    for key in sorted(set(ready) | set(not_ready)):
        subsets.append(core_pb2.EndpointSubset(
            addresses=ready.get(key, []), notReadyAddresses=not_ready.get(key, []),
            ports=[core_pb2.EndpointPort(name=name, port=number, protocol=protocol) for name, number, protocol in key]))
    return subsets


class EndpointsController:
    def __init__(self, client: Client, services: Informer[core_pb2.Service], pods: Informer[core_pb2.Pod],
                 endpoints: Informer[core_pb2.Endpoints], workers: int = 2) -> None:
        self.client = client
        self.services, self.pods, self.endpoints = services, pods, endpoints
        self.queue = WorkQueue("endpoints")
        self.workers = Workers(self.queue, self.sync, workers)
        services.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                             on_delete=self._enqueue)
        queue_services_of_pods(pods, services, self.queue.add)

    def _enqueue(self, svc: core_pb2.Service) -> None:
        self.queue.add(object_key(svc))

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        svc = self.services.store.get(key)
        if svc is None or svc.metadata.HasField("deletionTimestamp"):
            # upstream deletes the Endpoints of a Service that is gone (only ones it manages:
            # a selector-less Service's were never its own, but they go with their Service too)
            if key in self.endpoints.store.keys():
                try:
                    await self.client.endpoints.delete(name, namespace)
                except errors.NotFound:
                    pass
            return
        if not svc.spec.selector or svc.spec.type == "ExternalName":
            return  # someone else writes them
        pods = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, namespace)
                if selects(svc, dict(p.metadata.labels))]
        subsets = desired_subsets(svc, pods)
        labels = dict(svc.metadata.labels)
        if svc.spec.clusterIP == "None":
            labels[HEADLESS_LABEL] = ""
        current = self.endpoints.store.get(key)
        if current is None:
            try:
                await self.client.endpoints.create(core_pb2.Endpoints(
                    metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace, labels=labels), subsets=subsets))
            except errors.AlreadyExists:
                self.queue.add_after(key, 0.05)  # the informer is behind: judge again on its copy
            return
        if list(current.subsets) == subsets and dict(current.metadata.labels) == labels:
            return
        updated = core_pb2.Endpoints()
        updated.CopyFrom(current)
        del updated.subsets[:]
        updated.subsets.extend(subsets)
        updated.metadata.labels.clear()
        updated.metadata.labels.update(labels)
        await self.client.endpoints.update(updated)  # a conflict (a stale copy) retries the sync
