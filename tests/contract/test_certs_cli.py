"""`kubeling certs check-expiration` and `kubeling certs renew`, as kubeadm's, on a PKI
`kubeling certs` wrote: every certificate listed with its end and CA; renewed ones have a
new key and a new year, the same subject and names, the same CA; the kubeconfigs that
embed them follow; an apiserver serving the renewed certificate takes the renewed admin's.
Bad input is refused in one line."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import yaml
from cryptography import x509

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling.client import Client
from tests.conftest import apiserver_config


def _kubeling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, timeout=120)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _embedded(conf: Path) -> bytes:
    return base64.b64decode(yaml.safe_load(conf.read_text())["users"][0]["user"]["client-certificate-data"])


async def test_check_expiration_and_renew(tmp_path: Path, etcd: EtcdServer, prefix: str) -> None:
    root, pki = tmp_path, tmp_path / "pki"
    made = _kubeling("certs", "--dir", str(root), "--api", "127.0.0.1:1", "--rest", "127.0.0.1:2",
                     "--node", "n1=10.0.0.2")
    assert made.returncode == 0, made.stderr

    listed = _kubeling("certs", "check-expiration", "--dir", str(root))
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["ca"][-1] == "-" and rows["front-proxy-ca"][-1] == "-"
    assert rows["apiserver"][-1] == "ca" and rows["front-proxy-client"][-1] == "front-proxy-ca"
    assert rows["kubelet/n1-client"][-2] in ("364d", "365d") and rows["ca"][-2] in ("3649d", "3650d")

    ca, admin, serving = _cert(pki / "ca.crt"), _cert(pki / "admin.crt"), _cert(pki / "apiserver.crt")
    one = _kubeling("certs", "renew", "apiserver", "--dir", str(root))
    assert one.returncode == 0 and "certificate apiserver renewed" in one.stdout, one.stderr
    renewed = _cert(pki / "apiserver.crt")
    assert renewed.serial_number != serving.serial_number and renewed.public_key() != serving.public_key()
    assert renewed.subject == serving.subject
    assert set(renewed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value) == \
        set(serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    renewed.verify_directly_issued_by(ca)
    assert _cert(pki / "admin.crt").serial_number == admin.serial_number  # only what was named

    every = _kubeling("certs", "renew", "all", "--dir", str(root))
    assert every.returncode == 0 and "certificate admin renewed" in every.stdout, every.stderr
    assert f"kubeconfig {root / 'admin.conf'} updated" in every.stdout
    assert _cert(pki / "ca.crt").serial_number == ca.serial_number  # CAs are not renewed
    assert _cert(pki / "admin.crt").serial_number != admin.serial_number
    assert _embedded(root / "admin.conf") == (pki / "admin.crt").read_bytes()
    assert _embedded(root / "kubelet-n1.conf") == (pki / "kubelet" / "n1-client.crt").read_bytes()

    # the renewed serving certificate and the renewed admin's, in use together
    server = APIServer(apiserver_config(etcd, prefix, tls_cert_file=str(pki / "apiserver.crt"),
                                        tls_private_key_file=str(pki / "apiserver.key"),
                                        client_ca_file=str(pki / "ca.crt"), authorization_mode="Node,RBAC"))
    await server.start()
    try:
        conf = yaml.safe_load((root / "admin.conf").read_text())
        conf["clusters"][0]["cluster"]["extensions"][0]["extension"]["address"] = server.address  # gRPC
        (tmp_path / "admin-here.conf").write_text(yaml.safe_dump(conf))
        async with Client.from_kubeconfig(tmp_path / "admin-here.conf") as client:
            assert "default" in {ns.metadata.name for ns in (await client.namespaces.list_all())[0]}
    finally:
        await server.stop(grace=0)


def test_bad_certs_input_is_refused_in_one_line(tmp_path: Path) -> None:
    assert _kubeling("certs", "--dir", str(tmp_path), "--api", "127.0.0.1:1", "--rest", "127.0.0.1:2").returncode == 0
    unknown = _kubeling("certs", "renew", "nosuch", "--dir", str(tmp_path))
    assert unknown.returncode == 2 and "no certificate nosuch under" in unknown.stderr, unknown.stderr
    half = _kubeling("certs", "--dir", str(tmp_path))
    assert half.returncode == 2 and "--dir, --api and --rest are required" in half.stderr
    nowhere = _kubeling("certs", "check-expiration", "--state-dir", str(tmp_path / "none"))
    assert nowhere.returncode == 2 and "no cluster was made in" in nowhere.stderr
    assert "Traceback" not in unknown.stderr + half.stderr + nowhere.stderr
