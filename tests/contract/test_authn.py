"""Authentication on a TLS apiserver (apiserver/auth/authentication.py, kubeling/servingtls.py): client
certificates from the cluster PKI (kubeling/pki.py), static tokens and anonymous requests,
seen through `kubectl auth whoami` (SelfSubjectReview), raw HTTPS and the gRPC client."""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apiserver.endpoints.rest.server import SELF_SUBJECT_REVIEWS
from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, pki
from kubeling.client import Client, TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl

TOKENS = 'secret-jane,jane,uid-jane,"devs,qa"\nsecret-bob,bob,uid-bob\n'


async def _server(etcd: EtcdServer, prefix: str, root: Path, anonymous: bool = True) -> APIServer:
    (root / "tokens.csv").write_text(TOKENS)
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        tls_cert_file=str(root / "apiserver.crt"),
                                        tls_private_key_file=str(root / "apiserver.key"),
                                        client_ca_file=str(root / "ca.crt"),
                                        token_auth_file=str(root / "tokens.csv"), anonymous_auth=anonymous))
    await server.start()
    return server


@pytest.fixture
async def secure(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[tuple[APIServer, Path]]:
    root = tmp_path / "pki"
    pki.ensure(root, {"node-1": ["127.0.0.1"]})
    server = await _server(etcd, prefix, root)
    try:
        yield server, root
    finally:
        await server.stop(grace=0)


def _tls(root: Path, identity: str | None = None, token: str = "") -> TLSConfig:
    return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt" if identity else None,
                                root / f"{identity}.key" if identity else None, token)


async def _whoami(server: APIServer, root: Path, tmp_path: Path, tls: TLSConfig) -> tuple[int, dict[str, object]]:
    config = write_kubeconfig(tmp_path / f"kc-{len(list(tmp_path.iterdir()))}", server.rest_address, tls=tls)
    code, out, err = await Kubectl(config)("auth", "whoami", "-o", "json", ok=False)
    return code, json.loads(out) if code == 0 else {"error": err}


async def test_who_kubectl_is_by_certificate_token_or_nothing(secure: tuple[APIServer, Path],
                                                              tmp_path: Path) -> None:
    server, root = secure
    code, review = await _whoami(server, root, tmp_path, _tls(root, "admin"))
    assert code == 0 and review["status"] == {"userInfo": {
        "username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}}, review
    code, review = await _whoami(server, root, tmp_path, _tls(root, token="secret-jane"))
    assert code == 0 and review["status"] == {"userInfo": {
        "username": "jane", "uid": "uid-jane", "groups": ["devs", "qa", "system:authenticated"]}}, review
    # No credentials at all (kubectl would prompt for a password): the review over raw HTTPS.
    status, body = await asyncio.to_thread(_https, server, root, {}, None, None, "POST", SELF_SUBJECT_REVIEWS)
    assert status == 201 and json.loads(body)["status"] == {"userInfo": {
        "username": "system:anonymous", "groups": ["system:unauthenticated"]}}, body
    code, review = await _whoami(server, root, tmp_path, _tls(root, token="wrong"))
    assert code != 0 and "Unauthorized" in str(review["error"]), review
    # AlwaysAllow (the default): anything may be done, and can-i says so.
    admin = Kubectl(write_kubeconfig(tmp_path / "can-i", server.rest_address, tls=_tls(root, token="secret-bob")))
    assert (await admin("auth", "can-i", "delete", "nodes", ok=False))[:2] == (0, "yes\n")


def _https(server: APIServer, root: Path, headers: dict[str, str], cert: tuple[Path, Path] | None = None,
           ca: Path | None = None, method: str = "GET",
           path: str = "/api/v1/namespaces/default/pods") -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(ca or root / "ca.crt"))
    if cert:
        ctx.load_cert_chain(*cert)
    host, _, port = server.rest_address.rpartition(":")
    import http.client
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


async def test_what_is_refused_and_the_server_keeps_serving(secure: tuple[APIServer, Path], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server, root = secure
    call = asyncio.to_thread
    for header in ("Bearer", "Bearer ", "Basic amFuZTpwdw==", "garbage \x7f", "Bearer " + "x" * 4000):
        status, body = await call(_https, server, root, {"Authorization": header})
        # an unknown token: 401; a byte no header may hold: 400; else anonymous
        wanted = 401 if header.startswith("Bearer x") else 400 if "\x7f" in header else 200
        assert status == wanted, (header[:20], status, body[:200])
    status, body = await call(_https, server, root, {"Authorization": "Bearer wrong"})
    assert status == 401 and json.loads(body) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                  "status": "Failure", "message": "Unauthorized",
                                                  "reason": "Unauthorized", "code": 401}
    # A header past the limit: a 400, or the connection closed while the client still writes
    # the rest (the server answers after 8 KiB, not after 100); either way it serves on.
    try:
        status, _ = await call(_https, server, root, {"X-Huge": "y" * 100_000})
        assert 400 <= status < 500
    except (ssl.SSLError, ConnectionError):
        pass
    assert (await call(_https, server, root, {}))[0] == 200
    # Plain HTTP to the TLS port, a certificate of another CA, an expired one, a server
    # name the certificate does not hold: refused in the handshake.
    assert not (await call(_plain_http, server)).startswith(b"HTTP/1.1 200")
    other = tmp_path / "other"
    pki.ensure(other, {})
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await call(_https, server, root, {}, (other / "admin.crt", other / "admin.key"))
    old = tmp_path / "old"
    old.mkdir()
    for name in ("ca.crt", "ca.key"):
        shutil.copy(root / name, old / name)
    long_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=400)
    monkeypatch.setattr(pki, "_now", lambda: long_ago)
    pki.ensure(old, {})
    monkeypatch.undo()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await call(_https, server, root, {}, (old / "admin.crt", old / "admin.key"))
    with pytest.raises(ssl.SSLCertVerificationError):  # the client checks the server's names
        await call(_https, server, root, {}, None, other / "ca.crt")
    assert (await call(_https, server, root, {}, (root / "admin.crt", root / "admin.key")))[0] == 200
    # TLS clients that stop mid-handshake (half a ClientHello, left hanging, or garbage),
    # on both listeners: the server goes on serving everyone else meanwhile.
    stalled = [await asyncio.to_thread(_half_handshake, address, payload)
               for address in (server.rest_address, server.address)
               for payload in (_CLIENT_HELLO_START, b"\x16\x03\x01\xff\xff" + b"\x00" * 50, b"\xff" * 300)]
    try:
        assert (await call(_https, server, root, {}))[0] == 200
        async with Client(server.address, tls=_tls(root, "admin"), timeout=10) as client:
            assert (await client.namespaces.get("default")).metadata.name == "default"
    finally:
        for sock in stalled:
            sock.close()


# The first bytes of a TLS 1.2 ClientHello record (its length promises more than follows).
_CLIENT_HELLO_START = bytes.fromhex("160301020001000200") + b"\x03\x03" + b"\x00" * 20


def _half_handshake(address: str, payload: bytes) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(payload)
    return sock


async def test_grpc_needs_a_client_certificate(secure: tuple[APIServer, Path], tmp_path: Path) -> None:
    server, root = secure
    async with Client(server.address, tls=_tls(root, "kubelet/node-1-client")) as client:
        assert (await client.namespaces.get("default")).metadata.name == "default"
    for tls in (_tls(root), _tls(root, token="secret-jane")):  # no certificate: the handshake fails
        async with Client(server.address, tls=tls, timeout=5, wait_for_ready=False) as client:
            with pytest.raises(errors.ServiceUnavailable):
                await client.namespaces.get("default")
    # A kubeconfig with the admin's certificate: Client.from_kubeconfig reaches the gRPC API.
    config = write_kubeconfig(tmp_path / "kc", server.rest_address, server.address, tls=_tls(root, "admin"))
    assert config.stat().st_mode & 0o777 == 0o600
    async with Client.from_kubeconfig(config) as client:
        assert (await client.namespaces.get("default")).metadata.name == "default"


async def test_without_anonymous_requests(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    root = tmp_path / "pki"
    pki.ensure(root, {})
    server = await _server(etcd, prefix, root, anonymous=False)
    try:
        for path in ("/api/v1/namespaces", "/healthz"):
            status, body = await asyncio.to_thread(_https, server, root, {}) if path != "/healthz" else \
                await asyncio.to_thread(_get, server, root, path)
            assert status == 401 and b'"reason":"Unauthorized"' in body, (path, status, body)
        status, _ = await asyncio.to_thread(_https, server, root, {"Authorization": "Bearer secret-bob"})
        assert status == 200
    finally:
        await server.stop(grace=0)


def _plain_http(server: APIServer) -> bytes:
    host, _, port = server.rest_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return raw.recv(100)
        except (ConnectionError, TimeoutError):
            return b""


def _get(server: APIServer, root: Path, path: str) -> tuple[int, bytes]:
    import http.client
    host, _, port = server.rest_address.rpartition(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=str(root / "ca.crt")),
                                       timeout=10)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


async def test_rbac_over_the_default_roles(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    """--authorization-mode RBAC: what upstream's bootstrap policy grants, and the words of a refusal."""
    root = tmp_path / "pki"
    pki.ensure(root, {"node-1": ["127.0.0.1"]})
    (root / "tokens.csv").write_text(TOKENS)
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        tls_cert_file=str(root / "apiserver.crt"),
                                        tls_private_key_file=str(root / "apiserver.key"),
                                        client_ca_file=str(root / "ca.crt"), token_auth_file=str(root / "tokens.csv"),
                                        authorization_mode="RBAC"))
    await server.start()
    try:
        jane = {"Authorization": "Bearer secret-jane"}
        status, body = await asyncio.to_thread(_https, server, root, jane)
        assert status == 403 and json.loads(body) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "code": 403, "message": 'pods is forbidden: User "jane" cannot list resource "pods" in API group "" '
                                    'in the namespace "default"'}, body
        admin = (root / "admin.crt", root / "admin.key")
        assert (await asyncio.to_thread(_https, server, root, {}, admin))[0] == 200  # system:masters
        assert (await asyncio.to_thread(_https, server, root, jane, None, None, "GET", "/api"))[0] == 200
        status, body = await asyncio.to_thread(_https, server, root, {}, None, None, "GET", "/api")
        assert status == 403 and b'forbidden: User \\"system:anonymous\\" cannot get path \\"/api\\"' in body, body
        assert (await asyncio.to_thread(_https, server, root, {}, None, None, "GET", "/healthz"))[0] == 200
        assert (await asyncio.to_thread(_https, server, root, jane, None, None, "POST", SELF_SUBJECT_REVIEWS))[0] == 201
        # `kubectl auth can-i` (SelfSubjectAccessReview) and `--list` (SelfSubjectRulesReview).
        as_jane = Kubectl(write_kubeconfig(tmp_path / "jane", server.rest_address, tls=_tls(root, token="secret-jane")))
        as_admin = Kubectl(write_kubeconfig(tmp_path / "admin", server.rest_address, tls=_tls(root, "admin")))
        assert (await as_jane("auth", "can-i", "list", "pods", ok=False))[:2] == (1, "no\n")
        assert (await as_admin("auth", "can-i", "list", "pods", ok=False))[:2] == (0, "yes\n")
        assert (await as_jane("auth", "can-i", "get", "/healthz", ok=False))[:2] == (0, "yes\n")
        _, listed, _ = await as_jane("auth", "can-i", "--list")
        assert "selfsubjectaccessreviews.authorization.k8s.io" in listed and "pods " not in listed, listed
        # gRPC: the scheduler reads pods but creates none; a node has no role bound yet.
        async with Client(server.address, tls=_tls(root, "scheduler")) as client:
            assert (await client.pods.list_all())[0] == []
            with pytest.raises(errors.Forbidden, match='User "system:kube-scheduler" cannot create resource "pods"'):
                from tests.objects import pod
                await client.pods.create(pod("p"))
        async with Client(server.address, tls=_tls(root, "kubelet/node-1-client")) as client:
            with pytest.raises(errors.Forbidden, match='cannot get resource "namespaces" in API group "" at the '
                                                       'cluster scope'):
                await client.namespaces.get("default")
    finally:
        await server.stop(grace=0)
