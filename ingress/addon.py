"""The IngressClass of kubeling's ingress controller, as an ingress addon's manifests install
it: `kubeling`, controller `kubeling.io/ingress-haproxy`, the cluster's default (Ingresses
naming no class get it from the DefaultIngressClass admission plugin)."""

from __future__ import annotations

import argparse
import json
import sys

from ingress.model import CONTROLLER, DEFAULT_CLASS_ANNOTATION
from kubeling import app, errors
from kubeling.client import Client
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["install_class", "CLASS_NAME", "build_parser", "main"]

CLASS_NAME = "kubeling"


async def install_class(client: Client, name: str = CLASS_NAME) -> custom_pb2.CustomResource:
    """Create the class if missing (idempotent; an existing one is left as it is)."""
    try:
        return await client.ingressclasses.get(name)
    except errors.NotFound:
        pass
    made = custom_pb2.CustomResource(
        apiVersion="networking.k8s.io/v1", kind="IngressClass",
        metadata=meta_pb2.ObjectMeta(name=name, annotations={DEFAULT_CLASS_ANNOTATION: "true"},
                                     labels={"addonmanager.kubernetes.io/mode": "EnsureExists"}),
        content=json.dumps({"spec": {"controller": CONTROLLER}}))
    try:
        return await client.ingressclasses.create(made)
    except errors.AlreadyExists:
        return await client.ingressclasses.get(name)


async def _install(args: argparse.Namespace) -> None:
    async with app.client_from(args) as client:
        await install_class(client, args.name)
    print(f"IngressClass {args.name}: controller {CONTROLLER}, the default")


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m ingress.addon", "install the ingress controller's IngressClass (the default)")
    p.add_argument("--kubeconfig", required=True, help="credentials that may create IngressClasses")
    p.add_argument("--name", default=CLASS_NAME, help="the class's name (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    """python -m ingress.addon --kubeconfig F: install the class and exit."""
    return app.run("ingress addon", args := build_parser().parse_args(argv), lambda: _install(args))


if __name__ == "__main__":
    sys.exit(main())
