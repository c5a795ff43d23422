"""Serving TLS (`--tls-cert-file`, `--tls-private-key-file`) and client certificate
verification (`--client-ca-file`), as the apiserver and the kubelet take them: for HTTP
listeners (Python's ssl) and the apiserver's gRPC one (gRPC's credentials); and the
context of an HTTPS client with a certificate of its own (the apiserver to kubelets).

REST asks for a client certificate and verifies one that is presented (a request without
one goes on to tokens and anonymous, as upstream). gRPC's server credentials can only
ignore client certificates or require them: with a client CA, every gRPC client presents
one (the components and `kubeling.Client` do); tokens and anonymous requests are REST's.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["ServingTLS", "client_context", "peer_common_name"]


@dataclass(frozen=True)
class ServingTLS:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None

    def check(self) -> None:
        """Fail at start, naming the file, rather than at the first handshake."""
        self.ssl_context()

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            raise ValueError(f"--tls-cert-file {self.cert_file} / --tls-private-key-file {self.key_file}: "
                             f"{err}") from None
        if self.client_ca_file is not None:
            try:
                ctx.load_verify_locations(self.client_ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(f"--client-ca-file {self.client_ca_file}: {err}") from None
            ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def grpc_credentials(self) -> grpc.ServerCredentials:
        ca = self.client_ca_file.read_bytes() if self.client_ca_file is not None else None
        return grpc.ssl_server_credentials([(self.key_file.read_bytes(), self.cert_file.read_bytes())],
                                           root_certificates=ca, require_client_auth=ca is not None)


def client_context(ca_file: Path, cert_file: Path | None = None, key_file: Path | None = None) -> ssl.SSLContext:
    """An HTTPS client's context: the server verified against ca_file (and its name), this
    client's certificate presented when given."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file))
        if cert_file is not None and key_file is not None:
            ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"client TLS from {ca_file}, {cert_file}, {key_file}: {err}") from None
    return ctx


def peer_common_name(peercert: object) -> str | None:
    """The CN of a verified peer certificate as ssl's getpeercert() gives it (None: none presented)."""
    if not isinstance(peercert, dict):
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
