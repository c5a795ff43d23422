"""python -m apiserver --etcd HOST:PORT [--listen HOST:PORT] ..."""

from __future__ import annotations

import argparse
import logging
import sys

import uvloop

from apiserver.auth.authorization import parse_modes
from apiserver.server import APIServer, Config
from kubeling import telemetry
from kubeling.netutil import cidr_arg, host_port_arg, ip_arg
from kubeling.signals import wait_for_termination

__all__ = ["build_parser", "main"]


def endpoints(text: str) -> str:
    for part in text.split(","):
        host_port_arg(part.strip())
    return text


def modes(text: str) -> str:
    try:
        parse_modes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def build_parser() -> argparse.ArgumentParser:
    d = Config()
    p = argparse.ArgumentParser(prog="python -m apiserver",
                                description="kubeling apiserver: the Kubernetes API over etcd, in gRPC")
    p.add_argument("--etcd", type=endpoints, default=d.etcd,
                   help="etcd client endpoint HOST:PORT, or every member's, comma-separated (the apiserver moves "
                        "to another when the one it uses goes; default %(default)s)")
    p.add_argument("--listen", type=host_port_arg, default=d.listen,
                   help="gRPC listen address (default %(default)s; port 0 picks one)")
    p.add_argument("--metrics-listen", type=lambda t: host_port_arg(t) if t else t, default=d.metrics_listen,
                   help="HTTP address for /metrics, /healthz, /readyz (default: off)")
    p.add_argument("--rest-listen", type=lambda t: host_port_arg(t) if t else t, default=d.rest_listen,
                   help="HTTP address of the Kubernetes REST API that kubectl uses (default: off; port 0 picks one)")
    p.add_argument("--etcd-prefix", default=d.etcd_prefix, help="key prefix in etcd (default %(default)s)")
    p.add_argument("--compaction-interval", type=float, default=d.compaction_interval,
                   help="seconds between etcd compactions, 0 disables (default %(default)s)")
    p.add_argument("--bookmark-interval", type=float, default=d.bookmark_interval,
                   help="seconds between watch bookmarks (default %(default)s)")
    p.add_argument("--watch-cache-size", type=int, default=d.watch_cache_size,
                   help="events kept per resource (default %(default)s)")
    p.add_argument("--watcher-buffer", type=int, default=d.watcher_buffer,
                   help="events a watcher may lag before it is ended (default %(default)s)")
    p.add_argument("--event-ttl", type=float, default=d.event_ttl,
                   help="seconds Events are kept after their last write, 0: forever (default %(default)s)")
    p.add_argument("--cluster-cidr", type=cidr_arg, default=d.cluster_cidr,
                   help="CIDR nodes' pod CIDRs are allocated from; empty: none (default %(default)s)")
    p.add_argument("--node-cidr-mask-size", type=int, default=d.node_cidr_mask_size,
                   help="prefix length of each node's pod CIDR (default %(default)s)")
    p.add_argument("--service-cluster-ip-range", type=cidr_arg, default=d.service_cluster_ip_range,
                   help="Services' ClusterIPs come out of it, never overlapping --cluster-cidr (default %(default)s)")
    p.add_argument("--service-node-port-range", default=d.service_node_port_range,
                   help="node ports come out of it (default %(default)s)")
    p.add_argument("--advertise-address", type=ip_arg, default=d.advertise_address,
                   help="the address the kubernetes Service's endpoints name (default: the REST listener's host)")
    p.add_argument("--advertise-port", type=int, default=d.advertise_port,
                   help="their port (default: the REST port; another when a load balancer is in front)")
    p.add_argument("--etcd-wait", type=float, default=d.etcd_wait,
                   help="seconds to wait for etcd at start (default %(default)s)")
    p.add_argument("--tls-cert-file", default="", help="serving certificate (PEM) for gRPC and REST; "
                                                         "default: plain text")
    p.add_argument("--tls-private-key-file", default="", help="its private key (PEM)")
    p.add_argument("--client-ca-file", default="",
                   help="authenticate client certificates signed by this CA (user = CN, groups = O); "
                        "gRPC clients must then present one")
    p.add_argument("--token-auth-file", default="",
                   help="static bearer tokens, upstream's CSV: token,user,uid[,\"group1,group2\"]")
    p.add_argument("--anonymous-auth", type=boolean, default=True,
                   help="serve unauthenticated REST requests as system:anonymous (default true)")
    p.add_argument("--authorization-mode", type=modes, default=d.authorization_mode,
                   help="comma-separated, asked in order: AlwaysAllow, Node (kubelets), RBAC (the stored roles "
                        "and bindings); e.g. Node,RBAC (default %(default)s)")
    p.add_argument("--enable-admission-plugins", default=d.admission_plugins,
                   help="comma-separated admission plugins: NodeRestriction, ServiceAccount, "
                        "DefaultTolerationSeconds (default %(default)s)")
    p.add_argument("--default-not-ready-toleration-seconds", type=int, default=d.default_not_ready_toleration_seconds,
                   help="DefaultTolerationSeconds: how long pods tolerate a not-ready node (default %(default)s)")
    p.add_argument("--default-unreachable-toleration-seconds", type=int,
                   default=d.default_unreachable_toleration_seconds,
                   help="DefaultTolerationSeconds: how long pods tolerate an unreachable node (default %(default)s)")
    p.add_argument("--kubelet-client-certificate", default="", help="the apiserver's client certificate for "
                                                                     "the kubelets (logs, exec, port-forward)")
    p.add_argument("--kubelet-client-key", default="", help="its private key")
    p.add_argument("--kubelet-certificate-authority", default="",
                   help="verify the kubelets' serving certificates against this CA (all three: HTTPS)")
    p.add_argument("--etcd-cafile", default="", help="verify etcd's serving certificate against this CA")
    p.add_argument("--etcd-certfile", default="", help="the apiserver's client certificate for etcd")
    p.add_argument("--etcd-keyfile", default="", help="its private key (all three: TLS to etcd)")
    p.add_argument("--service-account-signing-key-file", default="",
                   help="the ECDSA P-256 key ServiceAccount tokens are signed with (the PKI's sa.key); default: "
                        "one made at start")
    p.add_argument("--service-account-issuer", default=d.service_account_issuer,
                   help="the tokens' iss (default %(default)s)")
    p.add_argument("--api-audiences", default="", help="audiences the API accepts, comma-separated (default: "
                                                       "the issuer)")
    p.add_argument("--port-file", default="", help="write the bound gRPC port here once serving")
    p.add_argument("--log-level", default="INFO")
    return p


async def _serve(args: argparse.Namespace) -> None:
    cfg = Config(etcd=args.etcd, listen=args.listen, metrics_listen=args.metrics_listen, rest_listen=args.rest_listen,
                 etcd_prefix=args.etcd_prefix, compaction_interval=args.compaction_interval,
                 bookmark_interval=args.bookmark_interval, watch_cache_size=args.watch_cache_size,
                 watcher_buffer=args.watcher_buffer, etcd_wait=args.etcd_wait, event_ttl=args.event_ttl,
                 cluster_cidr=args.cluster_cidr, node_cidr_mask_size=args.node_cidr_mask_size,
                 service_cluster_ip_range=args.service_cluster_ip_range,
                 service_node_port_range=args.service_node_port_range, advertise_address=args.advertise_address,
                 advertise_port=args.advertise_port,
                 tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
                 client_ca_file=args.client_ca_file, token_auth_file=args.token_auth_file,
                 anonymous_auth=args.anonymous_auth, authorization_mode=args.authorization_mode,
                 admission_plugins=args.enable_admission_plugins,
                 default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
                 default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
                 kubelet_client_certificate=args.kubelet_client_certificate,
                 kubelet_client_key=args.kubelet_client_key,
                 kubelet_certificate_authority=args.kubelet_certificate_authority,
                 etcd_cafile=args.etcd_cafile, etcd_certfile=args.etcd_certfile, etcd_keyfile=args.etcd_keyfile,
                 service_account_signing_key_file=args.service_account_signing_key_file,
                 service_account_issuer=args.service_account_issuer, api_audiences=args.api_audiences)
    server = APIServer(cfg)
    await server.start()
    if args.port_file:
        with open(args.port_file, "w") as f:
            f.write(f"{server.port}\n")
            if server.rest_port:
                f.write(f"{server.rest_port}\n")
    await wait_for_termination()
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup("apiserver")
    try:
        # uvloop: the apiserver spends most of its time in event-loop callbacks (gRPC's and
        # ours); with it the e2e scheduler benchmark ran 492-500 vs 431-463 pods/s.
        uvloop.run(_serve(args))
    except (OSError, RuntimeError, ConnectionError, ValueError) as err:
        print(f"apiserver: {err}", file=sys.stderr)
        return 1
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
