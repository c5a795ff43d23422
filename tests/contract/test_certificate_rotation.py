"""The kubelet's certificate manager against a TLS apiserver (`Node,RBAC`) and the controller
manager's approver and signer, on a real etcd: a node whose client certificate is near its
end renews it through a CertificateSigningRequest without a restart — a watch opened before
goes on through the rotation, new calls use the new certificate, the old channel closes
when the old certificate expires and an informer resumes on the new one without a gap —
and a renewed serving certificate is presented to new connections while a connection
opened before goes on."""

from __future__ import annotations

import asyncio
import base64
import ssl
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from controllers.csrsigning import Authority
from cri.server import CRIServer
from kubelet.certificate import CLIENT, SERVER, CertificateManager, ClientCredentials, load_current, split_pem
from kubelet.runtime import Runtime
from kubelet.server import DaemonServer
from kubeling import csr, dynamic
from kubeling.client import Client, TLSConfig
from kubeling.informer import Informer
from kubeling.servingtls import ServingTLS
from tests.contract.secured import secured_control_plane, tls
from tests.objects import pod
from tests.wait import until

LEFT = 25.0  # seconds the node's first client certificate has left: past its rotation deadline already


@dataclass
class _Cluster:
    server: APIServer
    root: Path
    admin: Client


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[_Cluster]:
    root = tmp_path / "pki"
    async with secured_control_plane(etcd, prefix, root, {"node-1": ["127.0.0.1"]}) as (server, admin):
        yield _Cluster(server, root, admin)


def _short_lived_node_certificate(root: Path) -> tuple[bytes, bytes, float]:
    """node-1's client certificate, signed by the cluster CA, ending LEFT seconds from now."""
    request, key = csr.make_request("system:node:node-1", [csr.NODES_GROUP])
    now = time.time()
    cert = Authority.from_files(root / "ca.crt", root / "ca.key").sign(
        csr.parse_request(request), ["digital signature", "client auth"], LEFT, now)
    return cert, key, now + LEFT


async def test_a_client_certificate_renews_itself_without_a_restart(cluster: _Cluster, tmp_path: Path) -> None:
    cert, key, ends = _short_lived_node_certificate(cluster.root)
    ca = (cluster.root / "ca.crt").read_bytes()
    client = Client(cluster.server.address, tls=TLSConfig(ca, cert, key), timeout=10)
    credentials = ClientCredentials(client)
    informer = Informer(client.pods, field_selector="spec.nodeName=node-1")
    seen: list[tuple[str, str]] = []

    async def watch() -> None:  # a stream opened before the rotation
        async for ev in client.pods.watch("default", field_selector="spec.nodeName=node-1", resource_version="0"):
            seen.append((ev.type, ev.object.metadata.name))

    await informer.start()
    await informer.wait_synced(10)
    watching = asyncio.create_task(watch())
    cert_dir = tmp_path / "kubelet-pki"
    manager = CertificateManager(client, "node-1", cert_dir, CLIENT, cert, credentials.use)
    try:
        manager.start()
        await until(lambda: manager.rotations == 1, "the client certificate renewed", timeout=20)
        assert time.time() < ends, "renewed before the old one ended (the test's premise)"

        # what it asked for, and what it keeps
        requests = [r for r in (await cluster.admin.certificatesigningrequests.list()).items
                    if dynamic.content_of(r)["spec"]["username"] == "system:node:node-1"]
        assert len(requests) == 1
        spec = dynamic.content_of(requests[0])["spec"]
        conditions = dynamic.content_of(requests[0])["status"]["conditions"]
        assert spec["signerName"] == csr.KUBE_APISERVER_CLIENT_KUBELET and conditions[0]["reason"] == "AutoApproved"
        current = cert_dir / "kubelet-client-current.pem"
        assert current.is_symlink() and stat.S_IMODE(current.stat().st_mode) == 0o600
        new_cert, new_key = split_pem(current.read_bytes())
        assert client.tls is not None and client.tls.cert == new_cert and client.tls.key == new_key
        assert load_current(cert_dir, CLIENT) == (new_cert, new_key), "what a restarted kubelet takes"
        renewed = x509.load_pem_x509_certificate(new_cert)
        assert renewed.subject.rfc4514_string() == "CN=system:node:node-1,O=system:nodes"
        assert renewed.not_valid_after_utc.timestamp() > ends + 3600

        # the stream opened before goes on through the rotation; the old channel stays until
        # the old certificate ends
        await cluster.admin.pods.create(pod("after-rotation", node="node-1"))
        await until(lambda: ("ADDED", "after-rotation") in seen, "the old stream's event after the rotation")
        assert not watching.done() and credentials.retiring == 1

        # then it closes; the informer resumes on the new channel without missing a change
        await until(lambda: credentials.retiring == 0, "the old channel closed at the old certificate's end",
                    timeout=LEFT + 10)
        assert time.time() >= ends - 1
        await cluster.admin.pods.create(pod("after-expiry", node="node-1"))
        await until(lambda: informer.store.get("default/after-expiry") is not None,
                    "the informer's event on the new channel")
        assert informer.store.get("default/after-rotation") is not None
        assert (await client.pods.get("after-expiry")).metadata.name == "after-expiry"
    finally:
        watching.cancel()
        await manager.stop()
        await credentials.stop()
        await informer.stop()
        await client.close()


async def test_a_renewed_serving_certificate_reaches_new_connections_only(cluster: _Cluster, cri_server: CRIServer,
                                                                           tmp_path: Path) -> None:
    root = cluster.root
    runtime = Runtime(cri_server.address)
    daemon = DaemonServer(runtime, lambda namespace, name: None, "127.0.0.1", 0,
                          ServingTLS(root / "kubelet/node-1.crt", root / "kubelet/node-1.key", root / "ca.crt"))
    await daemon.start()
    node = Client(cluster.server.address, tls=tls(root, "kubelet/node-1-client"), timeout=10)
    cert_dir = tmp_path / "kubelet-pki"
    manager = CertificateManager(node, "node-1", cert_dir, SERVER, (root / "kubelet/node-1.crt").read_bytes(),
                                 lambda c, k: daemon.use_certificate(cert_dir / "kubelet-server-current.pem"),
                                 addresses=("node-1", "127.0.0.1"))
    context = ssl.create_default_context(cafile=str(root / "ca.crt"))
    before = await _Connection.open(context, daemon.port)
    try:
        assert (await before.healthz()).startswith(b"HTTP/1.1 200")
        old_serial = before.peer().serial_number

        rotation = asyncio.create_task(manager.rotate(timeout=20))

        async def requested() -> bool:
            return bool((await cluster.admin.certificatesigningrequests.list()).items)
        await until(requested, "the serving certificate's request")
        request = (await cluster.admin.certificatesigningrequests.list()).items[0]
        content = dynamic.content_of(request)
        assert content["spec"]["signerName"] == csr.KUBELET_SERVING and not content.get("status", {}).get("conditions")
        content.setdefault("status", {})["conditions"] = [{"type": "Approved", "status": "True", "reason": "Test"}]
        dynamic.set_content(request, content)
        await cluster.admin.certificatesigningrequests.update_approval(request)  # a person's approval
        await rotation

        after = await _Connection.open(context, daemon.port)
        renewed = after.peer()
        assert renewed.serial_number != old_serial and renewed.subject.rfc4514_string() == \
            "CN=system:node:node-1,O=system:nodes"
        names = renewed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.DNSName) == ["node-1"]
        assert (await after.healthz()).startswith(b"HTTP/1.1 200")
        after.close()
        # the connection opened before the rotation goes on with the old certificate
        assert (await before.healthz()).startswith(b"HTTP/1.1 200")
        assert before.peer().serial_number == old_serial
        kept = load_current(cert_dir, SERVER)
        assert kept is not None and kept[0] == renewed.public_bytes(serialization.Encoding.PEM)
    finally:
        before.close()
        await manager.stop()
        await node.close()
        await daemon.stop()
        await runtime.close()


@dataclass
class _Connection:
    """One kept-alive HTTPS connection to the daemon endpoint."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @classmethod
    async def open(cls, context: ssl.SSLContext, port: int) -> _Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"))

    def peer(self) -> x509.Certificate:
        return x509.load_der_x509_certificate(self.writer.get_extra_info("ssl_object").getpeercert(binary_form=True))

    async def healthz(self) -> bytes:
        self.writer.write(b"GET /healthz HTTP/1.1\r\nHost: node-1\r\n\r\n")
        async with asyncio.timeout(10):
            return await self.reader.read(4096)

    def close(self) -> None:
        self.writer.close()


async def test_a_denied_request_is_told_and_retried(cluster: _Cluster, tmp_path: Path) -> None:
    node = Client(cluster.server.address, tls=tls(cluster.root, "kubelet/node-1-client"), timeout=10)
    manager = CertificateManager(node, "node-1", tmp_path / "pki", SERVER,
                                 (cluster.root / "kubelet/node-1.crt").read_bytes(), lambda c, k: asyncio.sleep(0),
                                 addresses=("node-1",))
    try:
        rotation = asyncio.create_task(manager.rotate(timeout=20))

        async def requested() -> bool:
            return bool((await cluster.admin.certificatesigningrequests.list()).items)
        await until(requested, "the request")
        request = (await cluster.admin.certificatesigningrequests.list()).items[0]
        content = dynamic.content_of(request)
        content.setdefault("status", {})["conditions"] = [{"type": "Denied", "status": "True", "reason": "NotYou",
                                                           "message": "no serving certificates here"}]
        dynamic.set_content(request, content)
        await cluster.admin.certificatesigningrequests.update_approval(request)
        with pytest.raises(RuntimeError, match="denied: NotYou no serving certificates here"):
            await rotation
        assert manager.rotations == 0 and not (tmp_path / "pki" / "kubelet-server-current.pem").exists()
    finally:
        await node.close()


def test_base64_of_the_request_is_what_the_signer_reads() -> None:
    request, _ = csr.make_request("system:node:n", [csr.NODES_GROUP], dns_names=["n"], ips=["10.0.0.1"])
    parsed = csr.parse_request(csr.request_bytes(base64.b64encode(request).decode()))
    assert csr.kubelet_serving_problem(parsed, ["digital signature", "server auth"]) == ""
    assert csr.kubelet_client_problem(parsed, ["digital signature", "client auth"]) == "DNS subjectAltNames are " \
                                                                                       "not allowed"
