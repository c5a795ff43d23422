"""A cluster's plan: ports and names chosen once per `up`, and each component's command line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kubelet.config import KubeletConfig
from kubeling.atomicfile import replace_file
from kubeling.etcd import etcd_binary
from kubeling.netutil import free_port

__all__ = ["CLUSTER_CIDR", "DEFAULT_STATE_DIR", "ClusterPlan", "commands", "new_plan"]

DEFAULT_STATE_DIR = Path.home() / ".kubeling"
CLUSTER_CIDR = "10.88.0.0/16"


@dataclass
class ClusterPlan:
    """Ports and names, chosen once per `up` and written to cluster.json."""

    state_dir: str
    nodes: list[str]
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    scheduler_metrics_port: int
    rest_port: int = 0  # the Kubernetes REST API (kubectl)
    cluster_cidr: str = CLUSTER_CIDR
    otlp_endpoint: str = ""  # every component exports its spans here ("" : nowhere)
    registry_config_dir: str = ""  # the kubelets' registry mirrors (hosts.toml directory); "" : none
    supervisor_pid: int = 0
    ready: bool = False
    error: str = ""
    components: dict[str, int] = field(default_factory=dict)  # name -> pid, kept current by the supervisor

    @property
    def apiserver(self) -> str:
        return f"127.0.0.1:{self.apiserver_port}"

    @property
    def rest(self) -> str:
        return f"127.0.0.1:{self.rest_port}"

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    def kubelet_config(self, node: str) -> KubeletConfig:
        return KubeletConfig(node_name=node, apiserver=self.apiserver, root_dir=self.root / "kubelet",
                             pod_logs_dir=self.root / "pod-logs", runc_root=self.runc_root(node),
                             cluster_cidr=self.cluster_cidr)

    def runc_root(self, node: str) -> Path:
        return self.root / "runc" / node

    def save(self) -> None:
        replace_file(self.root / "cluster.json", json.dumps(asdict(self), indent=2).encode(), 0o644)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterPlan | None:
        try:
            return cls(**json.loads((state_dir / "cluster.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None


def new_plan(state_dir: Path, nodes: int, prefix: str, cluster_cidr: str, otlp_endpoint: str = "",
             registry_config_dir: str = "") -> ClusterPlan:
    return ClusterPlan(state_dir=str(state_dir), nodes=[f"{prefix}{i}" for i in range(1, nodes + 1)],
                       etcd_port=free_port(), etcd_peer_port=free_port(), apiserver_port=free_port(),
                       rest_port=free_port(), scheduler_metrics_port=free_port(), cluster_cidr=cluster_cidr,
                       otlp_endpoint=otlp_endpoint, registry_config_dir=registry_config_dir)


def _python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def commands(plan: ClusterPlan) -> dict[str, list[str]]:
    """Each component's command line, in start order."""
    root = plan.root
    client, peer = f"http://127.0.0.1:{plan.etcd_port}", f"http://127.0.0.1:{plan.etcd_peer_port}"
    out = {
        "etcd": [etcd_binary(), "--name", "kubeling", "--data-dir", str(root / "etcd"),
                 "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                 "--initial-advertise-peer-urls", peer, "--initial-cluster", f"kubeling={peer}",
                 "--log-level", "warn"],
        "apiserver": _python("apiserver", "--etcd", f"127.0.0.1:{plan.etcd_port}", "--listen", plan.apiserver,
                             "--rest-listen", plan.rest, "--cluster-cidr", plan.cluster_cidr),
        "scheduler": _python("scheduler", "--apiserver", plan.apiserver,
                             "--metrics-listen", f"127.0.0.1:{plan.scheduler_metrics_port}"),
    }
    for node in plan.nodes:
        config = plan.kubelet_config(node)
        out[f"kubelet-{node}"] = _python("kubelet", "--node-name", node, "--apiserver", plan.apiserver,
                                         "--root-dir", str(config.root_dir), "--pod-logs-dir",
                                         str(config.pod_logs_dir), "--runc-root", str(config.runc_root),
                                         "--cluster-cidr", plan.cluster_cidr,
                                         *(["--registry-config-dir", plan.registry_config_dir]
                                           if plan.registry_config_dir else []))
    return out
