"""The certificate controllers of the controller manager against a TLS apiserver with
`Node,RBAC` on a real etcd, each party with its own certificate: a node's request for its
own client certificate is approved (SubjectAccessReview on selfnodeclient) and signed by
the cluster CA, and the new certificate logs the node in; a node asking for another node's
certificate is left pending; a serving certificate and a user's client certificate wait for
`kubectl certificate approve`, then are signed with the requested names and lifetime; a
request that does not fit its signer fails with upstream's reason; bad signing flags are
refused in one line."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import csr, dynamic, errors
from kubeling.client import Client, TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import custom_pb2
from tests.contract.secured import secured_control_plane, tls
from tests.e2e.kubectl import Kubectl
from tests.wait import until


@dataclass
class _Cluster:
    server: APIServer
    root: Path
    admin: Client
    node: Client  # node-1's kubelet, by its client certificate
    kubectl: Kubectl


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[_Cluster]:
    root = tmp_path / "pki"
    # one worker: requests are judged in the order they came, so a later one being done says an
    # earlier one was judged (the tests' markers)
    async with secured_control_plane(etcd, prefix, root, {"node-1": ["127.0.0.1"]}, manager={"workers": 1}) \
            as (server, admin):
        node = Client(server.address, tls=tls(root, "kubelet/node-1-client"))
        kubectl = Kubectl(write_kubeconfig(tmp_path / "config", server.rest_address, tls=tls(root, "admin")))
        try:
            yield _Cluster(server, root, admin, node, kubectl)
        finally:
            await node.close()


def _request(name: str, signer: str, request_pem: bytes, usages: list[str], **spec: Any) -> custom_pb2.CustomResource:
    return dynamic.new({"metadata": {"name": name}, "spec": {
        "request": base64.b64encode(request_pem).decode(), "signerName": signer, "usages": usages, **spec}})


def _spec_status(obj: custom_pb2.CustomResource) -> tuple[dict[str, Any], dict[str, Any]]:
    content = dynamic.content_of(obj)
    return content.get("spec") or {}, content.get("status") or {}


async def _issued(client: Client, name: str) -> x509.Certificate:
    found: list[x509.Certificate] = []

    async def issued() -> bool:
        _, status = _spec_status(await client.certificatesigningrequests.get(name))
        if status.get("certificate"):
            found.append(x509.load_pem_x509_certificate(base64.b64decode(status["certificate"])))
        return bool(found)

    await until(issued, f"csr {name} issued", timeout=20)
    return found[0]


def _verify(cert: x509.Certificate, root: Path) -> None:
    ca = x509.load_pem_x509_certificate((root / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)


async def test_a_nodes_own_client_certificate_is_approved_signed_and_logs_it_in(cluster: _Cluster,
                                                                                 tmp_path: Path) -> None:
    request, key = csr.make_request("system:node:node-1", ["system:nodes"])
    await cluster.node.certificatesigningrequests.create(_request(
        "node-1-client", csr.KUBE_APISERVER_CLIENT_KUBELET, request, ["digital signature", "client auth"]))
    cert = await _issued(cluster.node, "node-1-client")
    spec, status = _spec_status(await cluster.admin.certificatesigningrequests.get("node-1-client"))
    approved = [c for c in status["conditions"] if c["type"] == "Approved"]
    assert approved and approved[0]["reason"] == "AutoApproved" and "self kubelet client" in approved[0]["message"]
    assert spec["username"] == "system:node:node-1"
    _verify(cert, cluster.root)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:node-1"
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    lifetime = (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
    assert lifetime == 365 * 24 * 3600, "a year (--cluster-signing-duration), backdated 5 minutes"

    # the new certificate is the node: its own Node reachable, another's not
    tls = TLSConfig((cluster.root / "ca.crt").read_bytes(), base64.b64decode(status["certificate"]), key)
    async with Client(cluster.server.address, tls=tls, timeout=10) as renewed:
        with pytest.raises(errors.NotFound):
            await renewed.nodes.get("node-1")  # allowed (not there yet), not Forbidden
        with pytest.raises(errors.Forbidden):
            await renewed.secrets.list("kube-system")


async def test_a_request_for_another_nodes_certificate_stays_pending(cluster: _Cluster) -> None:
    request, _ = csr.make_request("system:node:node-2", ["system:nodes"])
    await cluster.node.certificatesigningrequests.create(_request(
        "node-2-by-node-1", csr.KUBE_APISERVER_CLIENT_KUBELET, request, ["digital signature", "client auth"]))
    # a marker the approver handles after it: once the marker is approved, the first was judged
    own, _ = csr.make_request("system:node:node-1", ["system:nodes"])
    await cluster.node.certificatesigningrequests.create(_request(
        "marker", csr.KUBE_APISERVER_CLIENT_KUBELET, own, ["digital signature", "client auth"]))
    await _issued(cluster.node, "marker")
    _, status = _spec_status(await cluster.admin.certificatesigningrequests.get("node-2-by-node-1"))
    assert not status.get("conditions") and not status.get("certificate"), status


async def test_serving_and_user_certificates_wait_for_a_person_then_are_signed(cluster: _Cluster) -> None:
    serving, _ = csr.make_request("system:node:node-1", ["system:nodes"], dns_names=["node-1"], ips=["10.0.0.7"])
    await cluster.node.certificatesigningrequests.create(_request(
        "node-1-serving", csr.KUBELET_SERVING, serving, ["digital signature", "server auth"]))
    user, user_key = csr.make_request("jane", ["team-a"])
    await cluster.admin.certificatesigningrequests.create(_request(
        "jane", csr.KUBE_APISERVER_CLIENT, user, ["client auth"], expirationSeconds=900))
    own, _ = csr.make_request("system:node:node-1", ["system:nodes"])  # judged by the approver after those
    await cluster.node.certificatesigningrequests.create(_request(
        "marker", csr.KUBE_APISERVER_CLIENT_KUBELET, own, ["digital signature", "client auth"]))
    await _issued(cluster.node, "marker")
    for name in ("node-1-serving", "jane"):
        _, status = _spec_status(await cluster.admin.certificatesigningrequests.get(name))
        assert not status.get("conditions") and not status.get("certificate"), "only a person approves these"
    await cluster.kubectl("certificate", "approve", "node-1-serving", "jane")
    cert = await _issued(cluster.admin, "node-1-serving")
    _verify(cert, cluster.root)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["node-1"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])

    jane = await _issued(cluster.admin, "jane")
    now = dt.datetime.now(dt.timezone.utc)
    assert abs((jane.not_valid_after_utc - now).total_seconds() - 900) < 60, "the requested 15 minutes, not backdated"
    _, status = _spec_status(await cluster.admin.certificatesigningrequests.get("jane"))
    kubeconfig = write_kubeconfig(cluster.root.parent / "jane.conf", cluster.server.rest_address, tls=TLSConfig(
        (cluster.root / "ca.crt").read_bytes(), base64.b64decode(status["certificate"]), user_key))
    _, out, _ = await Kubectl(kubeconfig)("auth", "whoami", "-o", "json")
    info = json.loads(out)["status"]["userInfo"]
    assert info["username"] == "jane" and "team-a" in info["groups"]
    _, out, _ = await cluster.kubectl("get", "csr", "jane", "--no-headers")
    assert out.split()[-1] == "Approved,Issued", out


async def test_a_request_that_does_not_fit_its_signer_fails(cluster: _Cluster) -> None:
    wrong, _ = csr.make_request("system:node:node-1", ["not-nodes"])
    await cluster.admin.certificatesigningrequests.create(_request(
        "wrong-org", csr.KUBE_APISERVER_CLIENT_KUBELET, wrong, ["digital signature", "client auth"]))
    await cluster.kubectl("certificate", "approve", "wrong-org")

    async def failed() -> bool:
        _, status = _spec_status(await cluster.admin.certificatesigningrequests.get("wrong-org"))
        return any(c["type"] == "Failed" for c in status.get("conditions") or [])

    await until(failed, "the Failed condition", timeout=20)
    _, status = _spec_status(await cluster.admin.certificatesigningrequests.get("wrong-org"))
    failure = [c for c in status["conditions"] if c["type"] == "Failed"][0]
    assert (failure["reason"], failure["message"]) == ("SignerValidationFailure",
                                                       "subject organization is not system:nodes")
    assert not status.get("certificate")
    _, out, _ = await cluster.kubectl("get", "csr", "wrong-org", "--no-headers")
    assert out.split()[-1] == "Approved,Failed", out


@pytest.mark.parametrize(("args", "words"), [
    (["--cluster-signing-cert-file", "/nonexistent.crt"], "--cluster-signing-cert-file and "
                                                          "--cluster-signing-key-file go together"),
    (["--cluster-signing-cert-file", "/nonexistent.crt", "--cluster-signing-key-file", "/nonexistent.key"],
     "No such file or directory"),
    (["--cluster-signing-cert-file", "/etc/hostname", "--cluster-signing-key-file", "/etc/hostname"],
     "--cluster-signing-cert-file/--cluster-signing-key-file:"),
])
def test_bad_signing_flags_are_refused_in_one_line(args: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, "-m", "controllers", "--apiserver", "127.0.0.1:1", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
