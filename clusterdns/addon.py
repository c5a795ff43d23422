"""The `kube-dns` Service in kube-system, as kubeadm's DNS addon installs it: a fixed
ClusterIP (the kubelets' --cluster-dns), ports 53 over UDP and TCP, and — the server
running outside the pod network here — a selector-less Service whose EndpointSlice and
Endpoints name where the server listens (written with the installer's credentials)."""

from __future__ import annotations

import argparse
import sys

from kubeling import app, errors
from kubeling.client import Client
from kubeling.discovery import SERVICE_NAME_LABEL
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2

__all__ = ["publish", "build_parser", "main", "NAME", "NAMESPACE"]

NAME, NAMESPACE = "kube-dns", "kube-system"
LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}


async def publish(client: Client, cluster_ip: str, address: str, port: int) -> None:
    """Create or correct the Service, its EndpointSlice and Endpoints (idempotent)."""
    ports = [core_pb2.ServicePort(name="dns", protocol="UDP", port=53, targetPort=core_pb2.IntOrString(intVal=port)),
             core_pb2.ServicePort(name="dns-tcp", protocol="TCP", port=53,
                                  targetPort=core_pb2.IntOrString(intVal=port))]
    meta = meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE, labels=LABELS)
    try:
        svc = await client.services.get(NAME, NAMESPACE)
        if svc.spec.clusterIP != cluster_ip:
            await client.services.delete(NAME, NAMESPACE)  # a ClusterIP cannot change: made again
            raise errors.NotFound("recreate")
        del svc.spec.ports[:]
        svc.spec.ports.extend(ports)
        await client.services.update(svc)
    except errors.NotFound:
        await client.services.create(core_pb2.Service(metadata=meta, spec=core_pb2.ServiceSpec(
            clusterIP=cluster_ip, ports=ports)))
    slice_meta = meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE,
                                     labels={**LABELS, SERVICE_NAME_LABEL: NAME})
    es = discovery_pb2.EndpointSlice(
        metadata=slice_meta, addressType="IPv4",
        endpoints=[discovery_pb2.Endpoint(addresses=[address],
                                          conditions=discovery_pb2.EndpointConditions(ready=True))],
        ports=[discovery_pb2.EndpointSlicePort(name="dns", protocol="UDP", port=port),
               discovery_pb2.EndpointSlicePort(name="dns-tcp", protocol="TCP", port=port)])
    endpoints = core_pb2.Endpoints(metadata=meta, subsets=[core_pb2.EndpointSubset(
        addresses=[core_pb2.EndpointAddress(ip=address)],
        ports=[core_pb2.EndpointPort(name="dns", protocol="UDP", port=port),
               core_pb2.EndpointPort(name="dns-tcp", protocol="TCP", port=port)])])
    for resource, obj in ((client.endpointslices, es), (client.endpoints, endpoints)):
        try:
            current = await resource.get(NAME, NAMESPACE)
            obj.metadata.resourceVersion = current.metadata.resourceVersion
            await resource.update(obj)
        except errors.NotFound:
            await resource.create(obj)


async def _publish(args: argparse.Namespace) -> None:
    async with app.client_from(args) as client:
        await publish(client, args.cluster_ip, args.address, args.port)
    print(f"kube-dns: {args.cluster_ip}:53 -> {args.address}:{args.port}")


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m clusterdns.addon", "publish the kube-dns Service, its EndpointSlice and Endpoints")
    p.add_argument("--kubeconfig", required=True, help="credentials that may write Services in kube-system")
    p.add_argument("--cluster-ip", default="10.96.0.10", help="kube-dns's ClusterIP (the kubelets' --cluster-dns)")
    p.add_argument("--address", required=True, help="where the DNS server listens")
    p.add_argument("--port", type=int, default=53)
    return p


def main(argv: list[str] | None = None) -> int:
    """python -m clusterdns.addon --kubeconfig F --cluster-ip IP --address A --port P: publish and exit."""
    return app.run("kube-dns addon", args := build_parser().parse_args(argv), lambda: _publish(args))


if __name__ == "__main__":
    sys.exit(main())
