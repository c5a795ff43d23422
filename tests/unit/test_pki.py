"""The cluster PKI (kubeling/pki.py): names as upstream's, keys private, every certificate
the CA's, a real TLS handshake with them, and `ensure` as an idempotent upgrade."""

from __future__ import annotations

import datetime
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeling import pki

NODES = {"node-1": ["172.28.0.11"], "node-2": ["172.28.0.12"]}


def _cert(root: Path, path: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((root / f"{path}.crt").read_bytes())


def _names(cert: x509.Certificate) -> tuple[str, list[str]]:
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return str(cn), [str(o) for o in orgs]


def _sans(cert: x509.Certificate) -> set[str]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in san.get_values_for_type(x509.DNSName)} | \
        {str(v) for v in san.get_values_for_type(x509.IPAddress)}


def test_identities_as_upstream_names_them(tmp_path: Path) -> None:
    made = pki.ensure(tmp_path, NODES, ["apiserver"])
    ca = _cert(tmp_path, "ca")
    expected = {"admin": ("kubernetes-admin", ["system:masters"]),
                "scheduler": ("system:kube-scheduler", []),
                "controller-manager": ("system:kube-controller-manager", []),
                "kube-proxy": ("system:kube-proxy", []), "kube-dns": ("system:kube-dns", []),
                "csi-hostpath": ("system:csi-hostpath", []), "network-policy": ("system:network-policy", []),
                "ingress-controller": ("system:ingress-controller", []),
                "metrics-server": ("system:metrics-server", []), "metrics-server-serving": ("metrics-server", []),
                "kubelet/node-1-client": ("system:node:node-1", ["system:nodes"]),
                "kubelet/node-2-client": ("system:node:node-2", ["system:nodes"]),
                "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ["kubeadm:cluster-admins"]),
                "apiserver-etcd-client": ("kube-apiserver-etcd-client", []),
                "apiserver": ("kube-apiserver", []), "etcd/server": ("etcd", [])}
    for path, subject in expected.items():
        cert = _cert(tmp_path, path)
        assert _names(cert) == subject, path
        cert.verify_directly_issued_by(ca)
        assert (tmp_path / f"{path}.key").stat().st_mode & 0o777 == 0o600, path
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        server = path in ("apiserver", "etcd/server", "metrics-server-serving") or \
            path.startswith("kubelet/") and "client" not in path
        assert (ExtendedKeyUsageOID.SERVER_AUTH in usages) == server, path
    assert {"127.0.0.1", "localhost", "apiserver", "kubernetes.default.svc", "10.96.0.1"} <= \
        _sans(_cert(tmp_path, "apiserver"))  # 10.96.0.1: the kubernetes Service, for in-cluster clients
    assert {"node-1", "172.28.0.11"} <= _sans(_cert(tmp_path, "kubelet/node-1"))
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "sa.key").stat().st_mode) == 0o600 and (tmp_path / "sa.pub").exists()
    # ca, sa, leaves, 2 node servings, the front-proxy CA and its client
    assert "ca" in made.issued and len(made.issued) == 2 + len(expected) + 2 + 2
    proxy_ca, proxy_client = _cert(tmp_path, "front-proxy-ca"), _cert(tmp_path, "front-proxy-client")
    proxy_client.verify_directly_issued_by(proxy_ca)  # its own CA, not the cluster's: only it may name users
    assert _names(proxy_client) == ("front-proxy-client", []) and proxy_ca.subject != ca.subject


def _handshake(tmp_path: Path, server_cert: str, client_cert: str | None, host: str,
               client_ca: Path | None = None) -> str:
    """A real TLS handshake over loopback: the server asks for a client certificate; returns
    the client's CN as the server saw it."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / f"{server_cert}.crt", tmp_path / f"{server_cert}.key")
    server.load_verify_locations(tmp_path / "ca.crt")
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(client_ca or tmp_path / "ca.crt")
    if client_cert:
        client.load_cert_chain(tmp_path / f"{client_cert}.crt", tmp_path / f"{client_cert}.key")
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server.wrap_socket(conn, server_side=True) as tls:
                der = tls.getpeercert(binary_form=True)
                assert der is not None
                seen.append(_names(x509.load_der_x509_certificate(der))[0])
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname()) as raw, \
                client.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.recv(2) == b"ok"
    finally:
        thread.join(10)
        listener.close()
    return seen[0]


def test_a_real_tls_handshake_and_what_is_refused(tmp_path: Path) -> None:
    pki.ensure(tmp_path, NODES, ["apiserver"])
    assert _handshake(tmp_path, "apiserver", "admin", "127.0.0.1") == "kubernetes-admin"
    assert _handshake(tmp_path, "apiserver", "kubelet/node-1-client", "apiserver") == "system:node:node-1"
    assert _handshake(tmp_path, "kubelet/node-1", "apiserver-kubelet-client", "172.28.0.11") == \
        "kube-apiserver-kubelet-client"
    with pytest.raises(ssl.SSLCertVerificationError):  # a name the certificate does not hold
        _handshake(tmp_path, "apiserver", "admin", "example.com")
    other = tmp_path / "other"
    pki.ensure(other, {}, [])
    with pytest.raises(ssl.SSLCertVerificationError):  # the server of another CA
        _handshake(tmp_path, "apiserver", "admin", "127.0.0.1", client_ca=other / "ca.crt")


def test_ensure_is_idempotent_and_upgrades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pki.ensure(tmp_path, {"node-1": []}, [])
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert pki.ensure(tmp_path, {"node-1": []}, []).issued == []
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before
    # A node joins, a server name is added, a certificate is lost: exactly those are issued.
    (tmp_path / "scheduler.crt").unlink()
    again = pki.ensure(tmp_path, {"node-1": [], "node-2": ["10.0.0.2"]}, ["apiserver"])
    assert sorted(again.issued) == ["apiserver", "etcd/server", "kubelet/node-2", "kubelet/node-2-client",
                                    "metrics-server-serving", "scheduler"]  # server names are its too
    # A year on, the leaves have expired (the CA lives ten): all are issued again, the CA kept.
    ca = (tmp_path / "ca.crt").read_bytes()
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=400)
    monkeypatch.setattr(pki, "_now", lambda: later)
    renewed = pki.ensure(tmp_path, {"node-1": []}, [])
    assert "ca" not in renewed.issued and "admin" in renewed.issued and (tmp_path / "ca.crt").read_bytes() == ca
    # A state dir whose CA was replaced: every certificate is issued by the new one.
    (tmp_path / "ca.key").unlink()
    fresh = pki.ensure(tmp_path, {"node-1": []}, [])
    assert "ca" in fresh.issued and "admin" in fresh.issued
    _cert(tmp_path, "admin").verify_directly_issued_by(_cert(tmp_path, "ca"))
