"""python -m clusterdns --kubeconfig FILE --listen HOST:PORT [--zone cluster.local] [--upstream HOST:PORT]"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from clusterdns.server import DNSConfig, DNSServer
from kubeling import telemetry
from kubeling.client import Client
from kubeling.netutil import host_port_arg
from kubeling.signals import wait_for_termination


def build_parser() -> argparse.ArgumentParser:
    d = DNSConfig()
    p = argparse.ArgumentParser(prog="python -m clusterdns", description="kubeling cluster DNS")
    p.add_argument("--kubeconfig", default="", help="credentials for the apiserver (system:kube-dns)")
    p.add_argument("--apiserver", type=host_port_arg, default=None, help="apiserver gRPC HOST:PORT, plain text")
    p.add_argument("--listen", type=host_port_arg, default=d.listen, help="UDP and TCP HOST:PORT (default %(default)s)")
    p.add_argument("--zone", default=d.zone, help="the cluster domain (default %(default)s)")
    p.add_argument("--upstream", type=lambda t: host_port_arg(t) if t else t, default="",
                   help="forward other names to this HOST:PORT (default: refuse them)")
    p.add_argument("--port-file", default="", help="write the bound port here once serving")
    p.add_argument("--log-level", default="INFO")
    return p


async def _serve(args: argparse.Namespace) -> None:
    client = Client.from_kubeconfig(args.kubeconfig) if args.kubeconfig else Client(args.apiserver)
    server = DNSServer(client, DNSConfig(listen=args.listen, zone=args.zone, upstream=args.upstream))
    try:
        await server.start()
        if args.port_file:
            with open(args.port_file, "w") as f:
                f.write(str(server.port))
        await wait_for_termination()
    finally:
        await server.stop()
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.apiserver and not args.kubeconfig:
        parser.error("--apiserver or --kubeconfig is required")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup("cluster-dns")
    try:
        asyncio.run(_serve(args))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
