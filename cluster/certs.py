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
import datetime
import json
import sys
from pathlib import Path

import yaml

from apiserver.audit import DEFAULT_POLICY
from apiserver.storage.encryption import new_aescbc_config
from cluster import names
from kubeling import pki
from kubeling.app import EXIT_CONFIG
from kubeling.atomicfile import replace_file
from kubeling.client import TLSConfig
from kubeling.kubeconfig import replace_client_certificates, write_kubeconfig

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


def _pki_of(args: argparse.Namespace) -> tuple[Path, list[Path]] | str:
    """The PKI root the command is about and the kubeconfigs that embed its certificates:
    --dir's, else the cluster's (its state dir's, and the user's it was merged into)."""
    if args.dir:
        root = Path(args.dir)
        return root / "pki", sorted(root.glob("*.conf"))
    try:
        state_dir = names.state_dir_of(args)
    except names.ClusterNameError as err:
        return str(err)
    try:  # the plan's file (cluster.plan imports this module: read, not imported)
        plan = json.loads((state_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return f"no cluster was made in {state_dir} (or give --dir)"
    kubeconfigs = [*sorted(state_dir.glob("*.conf")), state_dir / "kubeconfig"]
    if plan.get("user_kubeconfig"):
        kubeconfigs.append(Path(plan["user_kubeconfig"]))
    return state_dir / "pki", [k for k in kubeconfigs if k.is_file()]


def _residual(end: datetime.datetime) -> str:
    left = end - datetime.datetime.now(datetime.timezone.utc)
    if left.total_seconds() <= 0:
        return "expired"
    return f"{left.days}d" if left.days else f"{int(left.total_seconds() // 3600)}h"


def cmd_check_expiration(args: argparse.Namespace) -> int:
    found = _pki_of(args)
    if isinstance(found, str):
        print(f"kubeling certs: {found}", file=sys.stderr)
        return EXIT_CONFIG
    root, _ = found
    listed = pki.expirations(root)
    if not listed:
        print(f"kubeling certs: no certificates under {root}", file=sys.stderr)
        return 1
    rows = [("CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY")]
    for e in listed:
        rows.append((e.path, e.not_after.strftime("%b %d, %Y %H:%M UTC"), _residual(e.not_after),
                     e.authority or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_renew(args: argparse.Namespace) -> int:
    found = _pki_of(args)
    if isinstance(found, str):
        print(f"kubeling certs: {found}", file=sys.stderr)
        return EXIT_CONFIG
    root, kubeconfigs = found
    which = [] if args.which == ["all"] else args.which
    before = {e.path: (root / f"{e.path}.crt").read_bytes() for e in pki.expirations(root) if e.authority}
    try:
        renewed = pki.renew(root, which)
    except ValueError as err:
        print(f"kubeling certs renew: {err}", file=sys.stderr)
        return EXIT_CONFIG
    new = {before[path]: ((root / f"{path}.crt").read_bytes(), (root / f"{path}.key").read_bytes())
           for path in renewed}
    for path in renewed:
        print(f"certificate {path} renewed")
    for kubeconfig in kubeconfigs:
        if replace_client_certificates(kubeconfig, new):
            print(f"kubeconfig {kubeconfig} updated")
    print("Done renewing certificates. Restart the components to use them (`kubeling down`, then `kubeling up`; "
          "compose: `docker compose restart`).")
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    if args.action == "check-expiration":
        return cmd_check_expiration(args)
    if args.action == "renew":
        return cmd_renew(args)
    if args.which:
        print(f"kubeling certs: unexpected {' '.join(args.which)}", file=sys.stderr)
        return EXIT_CONFIG
    if not (args.dir and args.api and args.rest):
        print("kubeling certs: --dir, --api and --rest are required to write the PKI and kubeconfigs",
              file=sys.stderr)
        return EXIT_CONFIG
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    nodes = {name: [address] if address else [] for name, address in args.node}
    issued = write_credentials(root, root / "pki", nodes, rest=args.rest, grpc=args.api, admin=root / "admin.conf",
                               admin_rest=args.admin_rest, admin_grpc=args.admin_api,
                               server_names=tuple(args.server_name))
    print(f"{root}: {', '.join(issued) if issued else 'every certificate current'}")
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("certs", help="write the cluster PKI and the components' kubeconfigs to a directory; "
                                          "check-expiration; renew, as kubeadm's")
    p.add_argument("action", nargs="?", default="write", choices=["write", "check-expiration", "renew"],
                   help="write (default): the PKI and kubeconfigs under --dir; check-expiration: each certificate's "
                        "end (--dir's, or a cluster's); renew [all|NAME...]: issue them again for a year, new keys, "
                        "kubeconfigs that embed them updated")
    p.add_argument("which", nargs="*", help="renew: `all` (default) or certificate names as check-expiration lists "
                                            "them")
    names.add_cluster_args(p)
    p.add_argument("--dir", default="", help="where (pki/ and the .conf files); existing files are kept "
                                             "when current")
    p.add_argument("--node", type=_node, action="append", default=[],
                   help="NAME=ADDRESS of a kubelet (its serving certificate names both); repeatable")
    p.add_argument("--server-name", action="append", default=[],
                   help="another name or address the apiserver and etcd are reached by; repeatable")
    p.add_argument("--api", default="", help="write: the apiserver's gRPC address HOST:PORT, as components reach it")
    p.add_argument("--rest", default="", help="write: its REST address HOST:PORT, as components reach it")
    p.add_argument("--admin-api", default="", help="the gRPC address users reach (default --api)")
    p.add_argument("--admin-rest", default="", help="the REST address users reach (default --rest)")
    p.set_defaults(run=cmd_certs)
