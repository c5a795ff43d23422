"""A token service for the registry's Bearer auth, for tests.

Debian ships the registry (docker-registry) but no token server, so the test
provides the authorization-server half of the Docker token protocol: GET
<realm>?service=S&scope=repository:NAME:ACTIONS with Basic credentials answers
{"token": JWT} whose RS256 signature and x5c header the real registry verifies
against the certificate it is configured with. Keys and signatures come from
the openssl command, so no crypto library is needed.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ISSUER = "kubeling-test-token-service"
SERVICE = "kubeling-test-registry"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenRequest:
    user: str  # "" when anonymous
    scope: str
    service: str
    granted: bool


@dataclass
class TokenService:
    directory: Path
    username: str
    password: str
    requests: list[TokenRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def certificate(self) -> Path:
        return self.directory / "token.crt"

    @property
    def realm(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def registry_auth_yaml(self) -> str:
        return (f"auth:\n  token:\n    realm: {self.realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
                f"    rootcertbundle: {self.certificate}\n")

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=kubeling-test-token", "-keyout", str(self.directory / "token.key"),
                        "-out", str(self.certificate)], check=True, capture_output=True)
        der = subprocess.run(["openssl", "x509", "-in", str(self.certificate), "-outform", "DER"],
                             check=True, capture_output=True).stdout
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                user, password = "", ""
                header = self.headers.get("Authorization", "")
                if header.startswith("Basic "):
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                granted = url.path == "/token" and user == service.username and password == service.password
                service.requests.append(TokenRequest(user, query.get("scope", ""), query.get("service", ""),
                                                     granted))
                if not granted:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"token": service._token(der, user, query.get("scope", "")),
                                   "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _token(self, der: bytes, user: str, scope: str) -> str:
        access = []
        if scope.count(":") >= 2:
            kind, rest = scope.split(":", 1)
            name, actions = rest.rsplit(":", 1)
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
        claims = {"iss": ISSUER, "sub": user, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": uuid.uuid4().hex, "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.directory / "token.key")],
                                   input=signing_input.encode(), check=True, capture_output=True).stdout
        return f"{signing_input}.{_b64url(signature)}"
