"""The kubelet certificate manager's arithmetic and files: the jittered rotation deadline
(upstream's 70–90 % of the certificate's life) and its combined PEM files."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from controllers.csrsigning import Authority
from kubelet.certificate import CLIENT, load_current, rotation_deadline, split_pem
from kubeling import csr, pki


def test_the_deadline_is_70_to_90_percent_into_the_life(tmp_path: Path) -> None:
    root = pki.ensure(tmp_path / "pki", {}).root
    authority = Authority.from_files(root / "ca.crt", root / "ca.key")
    request = csr.parse_request(csr.make_request("system:node:n", [csr.NODES_GROUP])[0])
    now = 1_700_000_000.0
    cert = x509.load_pem_x509_certificate(authority.sign(request, ["client auth"], 10 * 3600, now))
    start = now - 300  # backdated
    life = 10 * 3600
    assert rotation_deadline(cert, 0.0) == start + 0.7 * life
    assert rotation_deadline(cert, 1.0) == start + 0.9 * life
    for _ in range(100):
        assert start + 0.7 * life <= rotation_deadline(cert) <= start + 0.9 * life


def test_pem_files_hold_certificate_and_key_in_either_order(tmp_path: Path) -> None:
    request, key = csr.make_request("system:node:n", [csr.NODES_GROUP])
    root = pki.ensure(tmp_path / "pki", {}).root
    cert = Authority.from_files(root / "ca.crt", root / "ca.key").sign(csr.parse_request(request),
                                                                       ["client auth"], 3600)
    assert split_pem(cert + key) == (cert, key)
    assert split_pem(key + cert) == (cert, key)
    (tmp_path / "kubelet-client-current.pem").write_bytes(cert + key)
    assert load_current(tmp_path, CLIENT) == (cert, key)
    (tmp_path / "kubelet-client-current.pem").write_bytes(b"garbage")
    assert load_current(tmp_path, CLIENT) is None
