"""What registers the metrics server with the aggregator, as metrics-server's manifests do:
a selector-less Service `kube-system/metrics-server` whose EndpointSlice names where the
server listens (it runs outside the pod network here), and the APIService
`v1beta1.metrics.k8s.io` pointing at it, its caBundle the CA of the server's certificate
(written with the installer's credentials, idempotently)."""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

from kubeling import app, dynamic, errors
from kubeling.client import Client
from kubeling.discovery import SERVICE_NAME_LABEL
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2

__all__ = ["register", "build_parser", "main", "NAME", "NAMESPACE", "APISERVICE"]

NAME, NAMESPACE = "metrics-server", "kube-system"
APISERVICE = "v1beta1.metrics.k8s.io"
LABELS = {"k8s-app": "metrics-server"}


async def register(client: Client, address: str, port: int, ca_pem: bytes) -> None:
    svc_port = core_pb2.ServicePort(name="https", protocol="TCP", port=443,
                                    targetPort=core_pb2.IntOrString(intVal=port))
    try:
        svc = await client.services.get(NAME, NAMESPACE)
        del svc.spec.ports[:]
        svc.spec.ports.append(svc_port)
        await client.services.update(svc)
    except errors.NotFound:
        await client.services.create(core_pb2.Service(
            metadata=meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE, labels=LABELS),
            spec=core_pb2.ServiceSpec(ports=[svc_port])))
    es = discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE, labels={**LABELS, SERVICE_NAME_LABEL: NAME}),
        addressType="IPv6" if ":" in address else "IPv4",
        endpoints=[discovery_pb2.Endpoint(addresses=[address],
                                          conditions=discovery_pb2.EndpointConditions(ready=True))],
        ports=[discovery_pb2.EndpointSlicePort(name="https", protocol="TCP", port=port)])
    try:
        current = await client.endpointslices.get(NAME, NAMESPACE)
        es.metadata.resourceVersion = current.metadata.resourceVersion
        await client.endpointslices.update(es)
    except errors.NotFound:
        await client.endpointslices.create(es)
    apiservice = dynamic.new({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": APISERVICE, "labels": LABELS},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                 "service": {"namespace": NAMESPACE, "name": NAME, "port": 443},
                 "caBundle": base64.b64encode(ca_pem).decode()}})
    try:
        current_api = await client.apiservices.get(APISERVICE)
        apiservice.metadata.resourceVersion = current_api.metadata.resourceVersion
        await client.apiservices.update(apiservice)
    except errors.NotFound:
        await client.apiservices.create(apiservice)


async def _register(args: argparse.Namespace) -> None:
    async with app.client_from(args) as client:
        await register(client, args.address, args.port, Path(args.ca_file).read_bytes())
    print(f"{APISERVICE}: {NAMESPACE}/{NAME} -> {args.address}:{args.port}")


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m metricsserver.addon", "register the metrics server with the aggregator")
    p.add_argument("--kubeconfig", required=True, help="credentials that may write Services and APIServices")
    p.add_argument("--address", required=True, help="where the metrics server listens")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca-file", required=True, help="the CA of the metrics server's serving certificate")
    return p


def main(argv: list[str] | None = None) -> int:
    """python -m metricsserver.addon --kubeconfig F --address A --port P --ca-file CA: register and exit."""
    return app.run("metrics-server addon", args := build_parser().parse_args(argv), lambda: _register(args))


if __name__ == "__main__":
    sys.exit(main())
