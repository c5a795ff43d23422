"""`kubeling join ADDRESS --token ID.SECRET --discovery-token-ca-cert-hash sha256:HEX`: this
machine (or network namespace) becomes a node of a running cluster, as with kubeadm join:

1. discovery: cluster-info is read from ADDRESS without credentials and without trusting
   the server; it is trusted only when the bootstrap signer's signature with this token
   verifies (the cluster knows the token) and the hash of its CA's public key is one of
   the pinned hashes (the CA is the one expected); then it is read again over TLS verified
   by that CA;
2. TLS bootstrap: with the token, a CertificateSigningRequest for `system:node:<name>`
   (approved by the controller manager's approver, signed by the cluster CA), and the
   cluster's kubelet settings (kube-system/kubelet-config);
3. as the node, a serving certificate for its name and address (kubelet-serving);
4. the state dir written (kubeconfig, certificates 0600, kubelet config) and the kubelet
   started in the foreground (exec: run it under a service manager), its certificates
   renewing themselves from then on.

`kubeling reset --state-dir DIR` undoes it on the machine: the kubelet's pods, sandboxes,
mounts and bridge, then the state dir (the Node object stays, as after kubeadm reset:
`kubectl delete node`)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import ssl
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from cluster.cleanup import clean_kubelet
from kubelet.config import KubeletConfig
from kubeling import bootstraptoken, csr, names
from kubeling.app import EXIT_CONFIG
from kubeling.atomicfile import replace_file
from kubeling.client import GRPC_EXTENSION, TLSConfig
from kubeling.kubeconfig import write_kubeconfig

__all__ = ["add_parsers", "JoinError", "discover", "ClusterInfo"]

_CLUSTER_INFO = f"/api/v1/namespaces/{bootstraptoken.CLUSTER_INFO_NAMESPACE}/configmaps/{bootstraptoken.CLUSTER_INFO}"
_KUBELET_CONFIG = "/api/v1/namespaces/kube-system/configmaps/kubelet-config"
_CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
_JOIN_FILE = "join.json"


class JoinError(Exception):
    """Why the machine cannot join, in one line."""


@dataclass(frozen=True)
class ClusterInfo:
    kubeconfig: str
    server: str  # host:port of the REST API
    grpc: str  # host:port of the gRPC API
    ca: bytes


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # discovery trusts what it reads only once it verified it
    return context


def _verified(ca: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca.decode())


async def _get(session: aiohttp.ClientSession, url: str, context: ssl.SSLContext,
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with session.get(url, ssl=context, headers=headers or {}) as reply:
        text = await reply.text()
        try:
            return reply.status, json.loads(text)
        except ValueError:
            return reply.status, text


def _parse_cluster_info(kubeconfig: str) -> ClusterInfo:
    try:
        config = yaml.safe_load(kubeconfig)
        cluster = config["clusters"][0]["cluster"]
        server = str(cluster["server"]).removeprefix("https://")
        ca = base64.b64decode(cluster["certificate-authority-data"])
    except (KeyError, IndexError, TypeError, ValueError, yaml.YAMLError) as err:
        raise JoinError(f"the cluster-info kubeconfig is malformed: {err}") from None
    grpc = next((str((e.get("extension") or {}).get("address", "")) for e in cluster.get("extensions") or []
                 if e.get("name") == GRPC_EXTENSION), "")
    if not grpc:
        raise JoinError("the cluster-info kubeconfig names no gRPC address (not a kubeling cluster?)")
    return ClusterInfo(kubeconfig, server, grpc, ca)


async def discover(address: str, token: str, pins: list[str], unsafe_skip: bool, timeout: float) -> ClusterInfo:
    """cluster-info from `address`, trusted by the token's signature and the CA pin (kubeadm's
    token discovery)."""
    token_id, token_secret = bootstraptoken.parse(token) or ("", "")
    deadline = time.monotonic() + timeout
    problem = ""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        while True:
            try:
                status, body = await _get(session, f"https://{address}{_CLUSTER_INFO}", _insecure())
                data = body.get("data") or {} if isinstance(body, dict) else {}
                if status != 200:
                    problem = f"reading cluster-info from {address}: HTTP {status}"
                elif bootstraptoken.JWS_PREFIX + token_id not in data:
                    problem = (f"there is no JWS signed token in the cluster-info ConfigMap. This token id "
                               f"{token_id!r} is invalid for this cluster, can't connect")
                else:
                    break
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
                problem = f"reading cluster-info from {address}: {err or type(err).__name__}"
            if time.monotonic() > deadline:
                raise JoinError(problem)
            await asyncio.sleep(1)
        kubeconfig = str(data.get("kubeconfig", ""))
        if not bootstraptoken.signature_valid(data[bootstraptoken.JWS_PREFIX + token_id], kubeconfig, token_id,
                                              token_secret):
            raise JoinError("failed to verify JWS signature of received cluster info object, can't trust this API "
                            "Server")
        info = _parse_cluster_info(kubeconfig)
        if not unsafe_skip:
            found = bootstraptoken.ca_cert_hash(info.ca)
            if found not in pins:
                raise JoinError(f'cluster CA found in cluster-info ConfigMap is invalid: none of the public keys '
                                f'"{found}" are pinned')
        # again, now over TLS the CA verifies: the same cluster-info, from a server that holds its key
        try:
            status, again = await _get(session, f"https://{address}{_CLUSTER_INFO}", _verified(info.ca))
        except (aiohttp.ClientError, OSError) as err:
            raise JoinError(f"the API at {address} does not present a certificate of the cluster's CA: {err}") \
                from None
        if status != 200 or (again.get("data") or {}).get("kubeconfig") != kubeconfig:
            raise JoinError("cluster-info changed between the untrusted and the trusted read; try again")
    return info


async def _request_certificate(session: aiohttp.ClientSession, base: str, context: ssl.SSLContext,
                               headers: dict[str, str], signer: str, usages: list[str], request_pem: bytes,
                               timeout: float) -> bytes:
    """A CertificateSigningRequest created over REST and waited for; the certificate (PEM)."""
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": "node-csr-"},
            "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": signer, "usages": usages}}
    async with session.post(base + _CSRS, json=body, ssl=context, headers=headers) as reply:
        made = await reply.json(content_type=None)
        if reply.status != 201:
            raise JoinError(f"the cluster refused the certificate request ({signer}): "
                            f"{made.get('message', made) if isinstance(made, dict) else made}")
    name = made["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while True:
        status, current = await _get(session, f"{base}{_CSRS}/{name}", context, headers)
        state = current.get("status") or {} if status == 200 and isinstance(current, dict) else {}
        for condition in state.get("conditions") or []:
            if condition.get("type") in ("Denied", "Failed"):
                raise JoinError(f"certificate request {name} {condition['type'].lower()}: "
                                f"{condition.get('reason', '')} {condition.get('message', '')}".strip())
        if state.get("certificate"):
            return base64.b64decode(state["certificate"])
        if time.monotonic() > deadline:
            raise JoinError(f"certificate request {name} ({signer}) was not issued within {timeout:.0f}s: is it "
                            "approved? (kubectl get csr)")
        await asyncio.sleep(0.5)


def _node_ip(address: str) -> str:
    """The address this machine reaches the API from (its route's source)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 9))
        return str(probe.getsockname()[0])


@dataclass(frozen=True)
class Joined:
    node_name: str
    node_ip: str
    state_dir: str

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    def kubelet_config(self) -> KubeletConfig:
        """What the kubelet runs with (the cluster's settings from the file written)."""
        root, pki = self.root, self.root / "pki"
        config = KubeletConfig(node_name=self.node_name, kubeconfig=root / "kubelet.conf", node_ip=self.node_ip,
                               address=self.node_ip, root_dir=root / "kubelet", pod_logs_dir=root / "pod-logs",
                               runc_root=root / "runc", tls_cert_file=pki / "kubelet.crt",
                               tls_private_key_file=pki / "kubelet.key", client_ca_file=pki / "ca.crt", cert_dir=pki)
        config.apply(yaml.safe_load((root / "kubelet-config.yaml").read_text()) or {})
        return config

    def kubelet_argv(self) -> list[str]:
        c, root = self.kubelet_config(), self.root
        return [sys.executable, "-m", "kubelet", "--node-name", c.node_name, "--kubeconfig", str(c.kubeconfig),
                "--config", str(root / "kubelet-config.yaml"), "--node-ip", c.node_ip, "--address", c.address,
                "--root-dir", str(c.root_dir), "--pod-logs-dir", str(c.pod_logs_dir), "--runc-root", str(c.runc_root),
                "--tls-cert-file", str(c.tls_cert_file), "--tls-private-key-file", str(c.tls_private_key_file),
                "--client-ca-file", str(c.client_ca_file), "--cert-dir", str(c.cert_dir)]


async def join(address: str, token: str, pins: list[str], unsafe_skip: bool, node_name: str, node_ip: str,
               state_dir: Path, timeout: float) -> Joined:
    info = await discover(address, token, pins, unsafe_skip, timeout)
    node_ip = node_ip or _node_ip(info.server)
    print(f"cluster-info verified: the API at {info.server}, its CA "
          f"{'unpinned (as asked)' if unsafe_skip else 'pinned'}", flush=True)
    base, context = f"https://{info.server}", _verified(info.ca)
    with_token = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        status, settings = await _get(session, base + _KUBELET_CONFIG, context, with_token)
        if status == 401:
            raise JoinError("the bootstrap token was refused (401): expired, deleted, or mistyped")
        if status != 200:
            raise JoinError(f"reading the cluster's kubelet settings: HTTP {status}: "
                            f"{settings.get('message', settings) if isinstance(settings, dict) else settings}")
        request, key = csr.make_request(f"system:node:{node_name}", [csr.NODES_GROUP])
        cert = await _request_certificate(session, base, context, with_token, csr.KUBE_APISERVER_CLIENT_KUBELET,
                                          ["digital signature", "client auth"], request, timeout)
        print(f"client certificate issued for system:node:{node_name}", flush=True)
        pki = state_dir / "pki"
        pki.mkdir(parents=True, exist_ok=True, mode=0o700)
        replace_file(pki / "ca.crt", info.ca, 0o644)
        replace_file(pki / "client.pem", cert + key)
        replace_file(pki / "kubelet-client-current.pem", cert + key)
        as_node = _verified(info.ca)
        as_node.load_cert_chain(pki / "client.pem")
        serving_request, serving_key = csr.make_request(f"system:node:{node_name}", [csr.NODES_GROUP],
                                                        dns_names=[node_name], ips=[node_ip])
        serving = await _request_certificate(session, base, as_node, {}, csr.KUBELET_SERVING,
                                             ["digital signature", "server auth"], serving_request, timeout)
        print(f"serving certificate issued for {node_name} ({node_ip})", flush=True)
    (pki / "client.pem").unlink()
    replace_file(pki / "kubelet.crt", serving)
    replace_file(pki / "kubelet.key", serving_key)
    write_kubeconfig(state_dir / "kubelet.conf", info.server, info.grpc, tls=TLSConfig(info.ca, cert, key))
    data = settings.get("data") or {}
    replace_file(state_dir / "kubelet-config.yaml", str(data.get("kubelet", "")).encode(), 0o644)
    joined = Joined(node_name, node_ip, str(state_dir))
    replace_file(state_dir / _JOIN_FILE, json.dumps(asdict(joined), indent=2).encode(), 0o644)
    joined.kubelet_config().check()
    return joined


def cmd_join(args: argparse.Namespace) -> int:
    if bootstraptoken.parse(args.token) is None:
        print("kubeling join: --token: the form is [a-z0-9]{6}.[a-z0-9]{16}", file=sys.stderr)
        return EXIT_CONFIG
    pins = [p.lower() for p in args.discovery_token_ca_cert_hash]
    bad = [p for p in pins if not (p.startswith("sha256:") and len(p) == 71)]
    if bad or (not pins and not args.discovery_token_unsafe_skip_ca_verification):
        print("kubeling join: --discovery-token-ca-cert-hash sha256:<64 hex digits> is required (or "
              "--discovery-token-unsafe-skip-ca-verification)" + (f"; not one: {bad[0]}" if bad else ""),
              file=sys.stderr)
        return EXIT_CONFIG
    problems = names.dns1123_subdomain(args.node_name)
    if problems:
        print(f"kubeling join: --node-name {args.node_name!r}: {problems[0]}", file=sys.stderr)
        return EXIT_CONFIG
    state_dir = Path(args.state_dir)
    if (state_dir / _JOIN_FILE).exists():
        print(f"kubeling join: {state_dir} already holds a joined node (kubeling reset --state-dir {state_dir})",
              file=sys.stderr)
        return EXIT_CONFIG
    try:
        joined = asyncio.run(join(args.address, args.token, pins, args.discovery_token_unsafe_skip_ca_verification,
                                  args.node_name, args.node_ip, state_dir, args.timeout))
    except JoinError as err:
        print(f"kubeling join: {err}", file=sys.stderr)
        return 1
    argv = joined.kubelet_argv()
    if args.no_start:
        print("joined; start the kubelet with:\n  " + " ".join(argv), flush=True)
        return 0
    print(f"node {args.node_name} joined: starting its kubelet", flush=True)
    os.execv(argv[0], argv)


def cmd_reset(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    try:
        joined = Joined(**json.loads((state_dir / _JOIN_FILE).read_text()))
    except (OSError, ValueError, TypeError) as err:
        print(f"kubeling reset: {state_dir} holds no joined node ({err})", file=sys.stderr)
        return EXIT_CONFIG
    asyncio.run(clean_kubelet(joined.kubelet_config(), remove_bridge=True))
    shutil.rmtree(state_dir)
    print(f"node {joined.node_name}: its pods, sandboxes and state removed from this machine; the Node object "
          f"stays (kubectl delete node {joined.node_name})")
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("join", help="this machine as a node of a running cluster (kubeadm join)")
    p.add_argument("address", help="the cluster's API, HOST:PORT (what `kubeling token create "
                                   "--print-join-command` prints)")
    p.add_argument("--token", required=True, help="a bootstrap token, ID.SECRET (kubeling token create)")
    p.add_argument("--discovery-token-ca-cert-hash", action="append", default=[],
                   help="sha256:<hex> of the cluster CA's public key (repeatable): the CA is trusted only if pinned")
    p.add_argument("--discovery-token-unsafe-skip-ca-verification", action="store_true",
                   help="trust the CA the token's signature vouches for without a pin")
    p.add_argument("--node-name", default=socket.gethostname(), help="the Node's name (default: the hostname)")
    p.add_argument("--node-ip", default="", help="its address (default: the one this machine reaches the API from)")
    p.add_argument("--state-dir", default="/var/lib/kubeling/join", help="where its kubeconfig, certificates and "
                                                                         "kubelet state go")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for discovery and each certificate")
    p.add_argument("--no-start", action="store_true", help="write everything, print the kubelet's command, exit")
    p.set_defaults(run=cmd_join)
    r = commands.add_parser("reset", help="undo `kubeling join` on this machine")
    r.add_argument("--state-dir", default="/var/lib/kubeling/join", help="the joined node's state dir")
    r.set_defaults(run=cmd_reset)
