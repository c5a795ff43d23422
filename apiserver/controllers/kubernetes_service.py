"""The `kubernetes` Service in `default`: the API's ClusterIP (the service range's first
address, port 443) and its endpoints, the apiserver's advertised address (upstream's
kubernetesservice controller with its endpoint reconciler). In-cluster clients find the
API through it (KUBERNETES_SERVICE_HOST, kubernetes.default.svc).

Elected: the leading apiserver writes its own address; when another takes over, its
address replaces the last one's (the lease reconciler's outcome with one live apiserver
per lease period; several apiservers of `kubeling up` sit behind HAProxy anyway).
"""

from __future__ import annotations

import logging

from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.discovery import SERVICE_NAME_LABEL
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2

__all__ = ["KubernetesService", "NAME", "NAMESPACE"]

log = logging.getLogger(__name__)

NAME, NAMESPACE = "kubernetes", "default"
PORT_NAME = "https"


class KubernetesService:
    def __init__(self, services: Registry[core_pb2.Service], endpoints: Registry[core_pb2.Endpoints],
                 slices: Registry[discovery_pb2.EndpointSlice], cluster_ip: str, address: str, port: int,
                 interval: float = 10.0) -> None:
        self.services, self.endpoints, self.slices = services, endpoints, slices
        self.cluster_ip, self.address, self.port = cluster_ip, address, port
        self._loop = Periodic("kubernetes-service", interval, self.reconcile, first_at_start=True)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def reconcile(self) -> None:
        await self._service()
        await self._endpoints()
        await self._slice()

    def _meta(self) -> meta_pb2.ObjectMeta:
        return meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE,
                                   labels={"component": "apiserver", "provider": "kubernetes"})

    async def _service(self) -> None:
        want = core_pb2.ServicePort(name=PORT_NAME, protocol="TCP", port=443,
                                    targetPort=core_pb2.IntOrString(intVal=self.port))
        try:
            svc = await self.services.get(NAMESPACE, NAME)
        except errors.NotFound:
            svc = core_pb2.Service(metadata=self._meta(), spec=core_pb2.ServiceSpec(
                type="ClusterIP", clusterIP=self.cluster_ip, ports=[want], sessionAffinity="None"))
            try:
                await self.services.create(svc)
                log.info("created the kubernetes Service (%s:443)", self.cluster_ip)
            except errors.AlreadyExists:
                pass
            return
        if list(svc.spec.ports) != [want]:  # the target port moves with the apiserver
            del svc.spec.ports[:]
            svc.spec.ports.append(want)
            await self.services.update(svc)

    async def _endpoints(self) -> None:
        want = [core_pb2.EndpointSubset(addresses=[core_pb2.EndpointAddress(ip=self.address)],
                                        ports=[core_pb2.EndpointPort(name=PORT_NAME, port=self.port,
                                                                     protocol="TCP")])]
        try:
            current = await self.endpoints.get(NAMESPACE, NAME)
        except errors.NotFound:
            try:
                await self.endpoints.create(core_pb2.Endpoints(metadata=self._meta(), subsets=want))
            except errors.AlreadyExists:
                pass
            return
        if list(current.subsets) != want:
            del current.subsets[:]
            current.subsets.extend(want)
            await self.endpoints.update(current)

    async def _slice(self) -> None:
        endpoint = discovery_pb2.Endpoint(addresses=[self.address],
                                          conditions=discovery_pb2.EndpointConditions(ready=True))
        port = discovery_pb2.EndpointSlicePort(name=PORT_NAME, protocol="TCP", port=self.port)
        try:
            current = await self.slices.get(NAMESPACE, NAME)
        except errors.NotFound:
            meta = self._meta()
            meta.labels[SERVICE_NAME_LABEL] = NAME
            try:
                await self.slices.create(discovery_pb2.EndpointSlice(
                    metadata=meta, addressType="IPv4", endpoints=[endpoint], ports=[port]))
            except errors.AlreadyExists:
                pass
            return
        if list(current.endpoints) != [endpoint] or list(current.ports) != [port]:
            del current.endpoints[:]
            current.endpoints.append(endpoint)
            del current.ports[:]
            current.ports.append(port)
            await self.slices.update(current)
