"""The CSR cleaner's judgement (upstream's cleaner deadlines) on requests at given ages."""

from __future__ import annotations

import base64
import time
from pathlib import Path

from cryptography import x509

from controllers.csrcleaner import why_done
from controllers.csrsigning import Authority
from kubeling import csr, pki

HOUR = 3600.0


def _at(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_requests_are_done_at_upstreams_deadlines(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    assert why_done({}, now - 23 * HOUR, now) == ""
    assert why_done({}, now - 25 * HOUR, now) == "pending for more than a day"

    def approved(ago: float, certificate: str = "") -> dict[str, object]:
        return {"status": {"conditions": [{"type": "Approved", "status": "True", "lastUpdateTime": _at(now - ago)}],
                           **({"certificate": certificate} if certificate else {})}}

    assert why_done(approved(2 * HOUR), now - 3 * HOUR, now) == "", "approved, not issued: kept for the signer"
    root = pki.ensure(tmp_path / "pki", {}).root
    authority = Authority.from_files(root / "ca.crt", root / "ca.key")
    request = csr.parse_request(csr.make_request("u")[0])
    fresh = base64.b64encode(authority.sign(request, ["client auth"], 600, now)).decode()
    assert why_done(approved(0.5 * HOUR, fresh), now - HOUR, now) == ""
    assert why_done(approved(1.5 * HOUR, fresh), now - HOUR, now) == "issued more than an hour ago"
    expired = base64.b64encode(authority.sign(request, ["client auth"], 600, now - 0.5 * HOUR)).decode()
    assert why_done(approved(0.5 * HOUR, expired), now - HOUR, now) == "its certificate expired"
    for kind, reason in (("Denied", "denied more than an hour ago"), ("Failed", "failed more than an hour ago")):
        content = {"status": {"conditions": [{"type": kind, "status": "True", "lastUpdateTime": _at(now - 2 * HOUR)}]}}
        assert why_done(content, now - 3 * HOUR, now) == reason
        content["status"]["conditions"][0]["lastUpdateTime"] = _at(now - 0.5 * HOUR)
        assert why_done(content, now - 3 * HOUR, now) == ""


def test_the_authority_backdates_and_caps_lifetimes(tmp_path: Path) -> None:
    root = pki.ensure(tmp_path / "pki", {}).root
    authority = Authority.from_files(root / "ca.crt", root / "ca.key")
    request = csr.parse_request(csr.make_request("u")[0])
    now = time.time()
    short = x509.load_pem_x509_certificate(authority.sign(request, ["client auth"], 600, now))
    assert short.not_valid_before_utc.timestamp() == int(now - 300) and short.not_valid_after_utc.timestamp() == \
        int(now + 600), "short-lived: starts 5 minutes early, ends on time"
    long = x509.load_pem_x509_certificate(authority.sign(request, ["client auth"], 20 * 365 * 24 * HOUR, now))
    assert long.not_valid_after_utc == authority.certificate.not_valid_after_utc, "never past the CA's own end"
