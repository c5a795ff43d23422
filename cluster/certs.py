"""`kubeling certs`: the cluster PKI and a kubeconfig per client, written to a directory,
as kubeadm's `init phase certs` and `init phase kubeconfig` do — for deployments that
start the components themselves (docker-compose's one-shot `certs` service). `up` makes
the same files under its state dir (cluster.plan).

  DIR/pki/...                  kubeling.pki's layout (the CA, serving and client certificates)
  DIR/admin.conf               kubernetes-admin (system:masters), for users
  DIR/scheduler.conf           system:kube-scheduler
  DIR/controller-manager.conf  system:kube-controller-manager
  DIR/kube-proxy.conf          system:kube-proxy
  DIR/kube-dns.conf            system:kube-dns
  DIR/network-policy.conf      system:network-policy (the network policy controllers)
  DIR/ingress-controller.conf  system:ingress-controller
  DIR/csi-hostpath.conf        system:csi-hostpath (the hostpath CSI driver's sidecars)
  DIR/metrics-server.conf      system:metrics-server
  DIR/super-admin.conf         kubernetes-admin at the components' address (addons)
  DIR/kubelet-<node>.conf      system:node:<node>
  DIR/audit-policy.yaml        what the apiserver audits (apiserver.audit's default policy)
  DIR/encryption-config.yaml   the key Secrets are encrypted with in etcd (aescbc, made once)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from apiserver.audit import DEFAULT_POLICY
from apiserver.storage.encryption import new_aescbc_config
from kubeling import pki
from kubeling.atomicfile import replace_file
from kubeling.client import TLSConfig
from kubeling.kubeconfig import write_kubeconfig

__all__ = ["add_parser", "write_credentials", "AUDIT_POLICY", "ENCRYPTION_CONFIG"]


def _tls(root: Path, identity: str) -> TLSConfig:
    return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key")


AUDIT_POLICY = "audit-policy.yaml"
ENCRYPTION_CONFIG = "encryption-config.yaml"


def write_credentials(root: Path, certs: Path, nodes: dict[str, list[str]], *, rest: str, grpc: str,
                      admin: Path, admin_rest: str = "", admin_grpc: str = "",
                      server_names: tuple[str, ...] = ()) -> list[str]:
    """The PKI under `certs` and the kubeconfigs under `root` (the admin's at `admin`,
    for users reaching the API at admin_rest/admin_grpc, by default the components'
    addresses); what was (re)issued."""
    issued = pki.ensure(certs, nodes, server_names).issued
    write_kubeconfig(admin, admin_rest or rest, admin_grpc or grpc, tls=_tls(certs, "admin"))
    # kubeadm's super-admin.conf: the same identity, at the components' address (for
    # in-cluster tooling such as the DNS addon's one-shot)
    write_kubeconfig(root / "super-admin.conf", rest, grpc, tls=_tls(certs, "admin"))
    write_kubeconfig(root / "scheduler.conf", rest, grpc, tls=_tls(certs, "scheduler"))
    write_kubeconfig(root / "controller-manager.conf", rest, grpc, tls=_tls(certs, "controller-manager"))
    write_kubeconfig(root / "kube-proxy.conf", rest, grpc, tls=_tls(certs, "kube-proxy"))
    write_kubeconfig(root / "kube-dns.conf", rest, grpc, tls=_tls(certs, "kube-dns"))
    write_kubeconfig(root / "network-policy.conf", rest, grpc, tls=_tls(certs, "network-policy"))
    write_kubeconfig(root / "ingress-controller.conf", rest, grpc, tls=_tls(certs, "ingress-controller"))
    write_kubeconfig(root / "csi-hostpath.conf", rest, grpc, tls=_tls(certs, "csi-hostpath"))
    write_kubeconfig(root / "metrics-server.conf", rest, grpc, tls=_tls(certs, "metrics-server"))
    for node in nodes:
        write_kubeconfig(root / f"kubelet-{node}.conf", rest, grpc, tls=_tls(certs, f"kubelet/{node}-client"))
    # what the apiserver audits (--audit-policy-file): the default policy, unless one is there
    policy = root / AUDIT_POLICY
    if not policy.exists():
        replace_file(policy, yaml.safe_dump(DEFAULT_POLICY, sort_keys=False).encode(), 0o644)
    # Secrets encrypted in etcd (--encryption-provider-config): a key made once, kept with
    # the PKI (without it, what it encrypted cannot be read)
    encryption = root / ENCRYPTION_CONFIG
    if not encryption.exists():
        replace_file(encryption, yaml.safe_dump(new_aescbc_config(), sort_keys=False).encode(), 0o600, durable=True)
    return issued


def _node(text: str) -> tuple[str, str]:
    name, sep, address = text.partition("=")
    if not name or (sep and not address):
        raise argparse.ArgumentTypeError(f"expected NAME or NAME=ADDRESS, got {text!r}")
    return name, address


def cmd_certs(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    nodes = {name: [address] if address else [] for name, address in args.node}
    issued = write_credentials(root, root / "pki", nodes, rest=args.rest, grpc=args.api, admin=root / "admin.conf",
                               admin_rest=args.admin_rest, admin_grpc=args.admin_api,
                               server_names=tuple(args.server_name))
    print(f"{root}: {', '.join(issued) if issued else 'every certificate current'}")
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("certs", help="write the cluster PKI and the components' kubeconfigs to a directory")
    p.add_argument("--dir", required=True, help="where (pki/ and the .conf files); existing files are kept "
                                                "when current")
    p.add_argument("--node", type=_node, action="append", default=[],
                   help="NAME=ADDRESS of a kubelet (its serving certificate names both); repeatable")
    p.add_argument("--server-name", action="append", default=[],
                   help="another name or address the apiserver and etcd are reached by; repeatable")
    p.add_argument("--api", required=True, help="the apiserver's gRPC address HOST:PORT, as components reach it")
    p.add_argument("--rest", required=True, help="its REST address HOST:PORT, as components reach it")
    p.add_argument("--admin-api", default="", help="the gRPC address users reach (default --api)")
    p.add_argument("--admin-rest", default="", help="the REST address users reach (default --rest)")
    p.set_defaults(run=cmd_certs)
