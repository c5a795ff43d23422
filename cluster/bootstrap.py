"""What a machine needs to join the cluster, as kubeadm's init phases `bootstrap-token` and
`upload-config kubelet` leave it, and `kubeling token create|list|delete` (kubeadm token):

- `kube-public/cluster-info`: a kubeconfig with the API's address and CA (no credentials),
  readable by anyone; the controller manager's bootstrap signer signs it with every token;
- `kube-system/kubelet-config`: the kubelet settings every node of this cluster shares
  (cluster DNS and domain, pod and service networks, heartbeats, certificate rotation),
  readable by nodes and bootstrap tokens;
- bootstrap tokens: Secrets `kube-system/bootstrap-token-<id>` (authentication and signing,
  the kubeadm default-node-token group, an expiration)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
from dataclasses import dataclass
from typing import Any

import yaml

from cluster import names
from cluster.plan import ClusterPlan
from kubeling import bootstraptoken, errors
from kubeling.app import EXIT_CONFIG
from kubeling.client import GRPC_EXTENSION, Client
from kubeling.timestamps import human_duration, parse_rfc3339, rfc3339
from protos.kubeling.v1 import core_pb2, meta_pb2, rbac_pb2

__all__ = ["install", "KUBELET_CONFIG", "create_token", "list_tokens", "delete_token", "parse_ttl", "add_parser",
           "cluster_info_kubeconfig", "kubelet_settings"]

KUBELET_CONFIG = "kubelet-config"  # kubeadm's name, in kube-system; the settings under the key "kubelet"
_RBAC = "rbac.authorization.k8s.io"


def cluster_info_kubeconfig(ca: bytes, rest: str, grpc: str) -> str:
    """kubeadm's cluster-info kubeconfig: one cluster (named ""), its CA, no user; the gRPC
    address in kubeling's extension."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "preferences": {}, "contexts": None, "users": None,
                           "current-context": "", "clusters": [{"name": "", "cluster": {
                               "server": f"https://{rest}",
                               "certificate-authority-data": base64.b64encode(ca).decode(),
                               "extensions": [{"name": GRPC_EXTENSION, "extension": {"address": grpc}}]}}]},
                          sort_keys=False)


def kubelet_settings(plan: ClusterPlan) -> dict[str, Any]:
    """The settings a joining kubelet takes from the cluster (KubeletConfiguration's keys)."""
    heartbeat = min(10.0, plan.node_monitor_grace_period / 4)
    return {"clusterCIDR": plan.cluster_cidr, "clusterDNS": [plan.dns_ip], "clusterDomain": plan.dns_domain,
            "serviceCIDR": plan.service_cidr, "nodeNetwork": plan.hosts_subnet, "podRoutes": plan.hosts,
            "nodeLeaseDurationSeconds": max(1, round(heartbeat * 4)), "nodeStatusUpdateFrequency": heartbeat,
            "rotateCertificates": True, "rotateServerCertificates": True}


async def _put_configmap(client: Client, namespace: str, name: str, data: dict[str, str]) -> None:
    try:
        current = await client.configmaps.get(name, namespace)
    except errors.NotFound:
        await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace),
                                                          data=data))
        return
    if all(current.data.get(k) == v for k, v in data.items()):
        return
    current.data.update(data)  # signatures the bootstrap signer wrote stay until it signs again
    await client.configmaps.update(current)


async def _reader_role(client: Client, namespace: str, role: str, configmap: str,
                       subjects: list[rbac_pb2.Subject]) -> None:
    """A Role reading one ConfigMap, bound to `subjects` (kubeadm's, made if missing)."""
    try:
        await client.roles.create(rbac_pb2.Role(
            metadata=meta_pb2.ObjectMeta(name=role, namespace=namespace),
            rules=[rbac_pb2.PolicyRule(verbs=["get"], apiGroups=[""], resources=["configmaps"],
                                       resourceNames=[configmap])]))
    except errors.AlreadyExists:
        pass
    try:
        await client.rolebindings.create(rbac_pb2.RoleBinding(
            metadata=meta_pb2.ObjectMeta(name=role, namespace=namespace), subjects=subjects,
            roleRef=rbac_pb2.RoleRef(apiGroup=_RBAC, kind="Role", name=role)))
    except errors.AlreadyExists:
        pass


async def install(client: Client, cluster_info: str, settings: dict[str, Any]) -> None:
    """cluster-info (`cluster_info_kubeconfig`) and kubelet-config (`kubelet_settings`) with
    who may read them (every `up`: brought up to date)."""
    await _put_configmap(client, bootstraptoken.CLUSTER_INFO_NAMESPACE, bootstraptoken.CLUSTER_INFO,
                         {"kubeconfig": cluster_info})
    await _reader_role(client, bootstraptoken.CLUSTER_INFO_NAMESPACE, "kubeadm:bootstrap-signer-clusterinfo",
                       bootstraptoken.CLUSTER_INFO, [rbac_pb2.Subject(kind="User", name="system:anonymous",
                                                                      apiGroup=_RBAC)])
    await _put_configmap(client, "kube-system", KUBELET_CONFIG, {"kubelet": yaml.safe_dump(settings, sort_keys=True)})
    await _reader_role(client, "kube-system", "kubeadm:kubelet-config", KUBELET_CONFIG,
                       [rbac_pb2.Subject(kind="Group", name="system:nodes", apiGroup=_RBAC),
                        rbac_pb2.Subject(kind="Group", name=bootstraptoken.GROUP, apiGroup=_RBAC)])


# ---------------------------------------------------------------- tokens


def parse_ttl(text: str) -> float:
    """kubeadm's --ttl: a duration (24h, 90m, 30s, 1h30m) or seconds; 0 never expires."""
    if text.replace(".", "", 1).isdigit():
        return float(text)
    total, number = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1}
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"--ttl {text!r}: a duration such as 24h, 90m or 30s is expected")
    if number:
        raise ValueError(f"--ttl {text!r}: a unit (h, m or s) is missing")
    return total


async def create_token(client: Client, token: str = "", ttl: float = 24 * 3600, description: str = "") -> str:
    token = token or bootstraptoken.generate()
    parsed = bootstraptoken.parse(token)
    if parsed is None:
        raise ValueError(f"the token {token!r} does not match the form [a-z0-9]{{6}}.[a-z0-9]{{16}}")
    token_id, secret = parsed
    data = {"token-id": token_id.encode(), "token-secret": secret.encode(),
            "usage-bootstrap-authentication": b"true", "usage-bootstrap-signing": b"true",
            "auth-extra-groups": bootstraptoken.DEFAULT_GROUP.encode()}
    if ttl > 0:
        data["expiration"] = rfc3339(time.time() + ttl).encode()
    if description:
        data["description"] = description.encode()
    await client.secrets.create(core_pb2.Secret(
        metadata=meta_pb2.ObjectMeta(name=bootstraptoken.SECRET_PREFIX + token_id, namespace=bootstraptoken.NAMESPACE),
        type=bootstraptoken.SECRET_TYPE, data=data))
    return token


@dataclass(frozen=True)
class Token:
    token_id: str
    expires: str  # RFC 3339, "" never
    usages: str
    description: str
    groups: str


async def list_tokens(client: Client) -> list[Token]:
    items = (await client.secrets.list(bootstraptoken.NAMESPACE,
                                       field_selector=f"type={bootstraptoken.SECRET_TYPE}")).items
    out = []
    for secret in items:
        data = {k: v.decode(errors="replace") for k, v in secret.data.items()}
        usages = [k.removeprefix("usage-bootstrap-") for k, v in sorted(data.items())
                  if k.startswith("usage-bootstrap-") and v == "true"]
        out.append(Token(data.get("token-id", ""), data.get("expiration", ""), ",".join(usages),
                         data.get("description", ""), data.get("auth-extra-groups", "")))
    return sorted(out, key=lambda t: t.token_id)


async def delete_token(client: Client, token: str) -> str:
    """Delete by id or whole token; the id deleted."""
    token_id = token.partition(".")[0]
    if not bootstraptoken.TOKEN.match(f"{token_id}.{'0' * 16}"):
        raise ValueError(f"{token!r} is neither a token id ([a-z0-9]{{6}}) nor a token")
    await client.secrets.delete(bootstraptoken.SECRET_PREFIX + token_id, bootstraptoken.NAMESPACE)
    return token_id


def _ttl_left(expires: str) -> str:
    if not expires:
        return "<forever>"
    left = parse_rfc3339(expires) - time.time()
    return human_duration(left) if left > 0 else "<invalid>"


async def _token_command(args: argparse.Namespace, plan: ClusterPlan) -> int:
    async with plan.admin_client(timeout=15) as client:
        if args.action == "create":
            token = await create_token(client, args.token, parse_ttl(args.ttl), args.description)
            if args.print_join_command:
                print(f"kubeling join {plan.rest} --token {token} --discovery-token-ca-cert-hash "
                      f"{bootstraptoken.ca_cert_hash((plan.pki / 'ca.crt').read_bytes())}")
            else:
                print(token)
        elif args.action == "list":
            rows = [("TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS")]
            rows += [(f"{t.token_id}.<secret>", _ttl_left(t.expires), t.expires or "<never>", t.usages,
                      t.description or "<none>", t.groups) for t in await list_tokens(client)]
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            for row in rows:
                print("   ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        else:
            for token in args.tokens:
                print(f"bootstrap token {await delete_token(client, token)!r} deleted")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    plan = ClusterPlan.load(names.state_dir_of(args))
    if plan is None:
        print(f"no cluster at {names.state_dir_of(args)}", file=sys.stderr)
        return EXIT_CONFIG
    if args.action == "delete" and not args.tokens:
        print("kubeling token delete: name the token ids to delete", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return asyncio.run(_token_command(args, plan))
    except ValueError as err:
        print(f"kubeling token {args.action}: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except errors.ApiError as err:
        print(f"kubeling token {args.action}: {err.message}", file=sys.stderr)
        return 1


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("token", help="bootstrap tokens machines join with (kubeadm token)")
    p.add_argument("action", choices=("create", "list", "delete"), help="create: a new token (printed); list: "
                                                                      "every token; delete: the tokens named")
    p.add_argument("tokens", nargs="*", help="delete: token ids (or whole tokens)")
    p.add_argument("--token", default="", help="create: this token instead of a random one")
    p.add_argument("--ttl", default="24h", help="create: how long it is valid (default 24h; 0: forever)")
    p.add_argument("--description", default="", help="create: what it is for")
    p.add_argument("--print-join-command", action="store_true",
                   help="create: print the whole `kubeling join` command, the CA's hash included")
    names.add_cluster_args(p)
    p.set_defaults(run=cmd_token)
