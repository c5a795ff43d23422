"""Columnar node state for plugins that judge all nodes at once (numpy).

Row i is snapshot.node_list[i]. The snapshot keeps the table in step: changed nodes
rewrite their row, a change in the set of nodes rebuilds it. Plugins read the columns
in `filter_batch` / `score_batch`; anything a column cannot answer goes per node.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.framework.types import NodeInfo

__all__ = ["NodeTable"]

_INT_COLUMNS = ("alloc_cpu", "alloc_mem", "alloc_eph", "alloc_pods", "req_cpu", "req_mem", "req_eph",
                "nz_cpu", "nz_mem", "pods", "affinity_pods", "anti_affinity_pods")
_BOOL_COLUMNS = ("unschedulable", "hard_taints", "soft_taints", "has_images", "has_ports", "has_scalar")


class NodeTable:
    alloc_cpu: np.ndarray
    alloc_mem: np.ndarray
    alloc_eph: np.ndarray
    alloc_pods: np.ndarray
    req_cpu: np.ndarray
    req_mem: np.ndarray
    req_eph: np.ndarray
    nz_cpu: np.ndarray
    nz_mem: np.ndarray
    pods: np.ndarray
    affinity_pods: np.ndarray       # pods with any pod (anti-)affinity term
    anti_affinity_pods: np.ndarray  # pods with a required anti-affinity term
    unschedulable: np.ndarray
    hard_taints: np.ndarray   # a NoSchedule or NoExecute taint
    soft_taints: np.ndarray   # a PreferNoSchedule taint
    has_images: np.ndarray
    has_ports: np.ndarray     # some host port in use
    has_scalar: np.ndarray    # extended resources allocatable or requested

    def __init__(self) -> None:
        self.rebuild([])

    def __len__(self) -> int:
        return len(self.alloc_cpu)

    def rebuild(self, infos: Sequence[NodeInfo]) -> None:
        n = len(infos)
        for name in _INT_COLUMNS:
            setattr(self, name, np.zeros(n, dtype=np.int64))
        for name in _BOOL_COLUMNS:
            setattr(self, name, np.zeros(n, dtype=bool))
        for i, info in enumerate(infos):
            self.set_row(i, info)

    def set_row(self, i: int, info: NodeInfo) -> None:
        a, r, z = info.allocatable, info.requested, info.non_zero_requested
        self.alloc_cpu[i], self.alloc_mem[i], self.alloc_eph[i] = a.milli_cpu, a.memory, a.ephemeral_storage
        self.alloc_pods[i] = a.allowed_pod_number
        self.req_cpu[i], self.req_mem[i], self.req_eph[i] = r.milli_cpu, r.memory, r.ephemeral_storage
        self.nz_cpu[i], self.nz_mem[i] = z.milli_cpu, z.memory
        self.pods[i] = len(info.pods)
        self.affinity_pods[i] = info.pods_with_affinity
        self.anti_affinity_pods[i] = info.pods_with_required_anti_affinity
        node = info.node
        taints = node.spec.taints if node is not None else ()
        self.unschedulable[i] = bool(node is not None and node.spec.unschedulable)
        self.hard_taints[i] = any(t.effect in ("NoSchedule", "NoExecute") for t in taints)
        self.soft_taints[i] = any(t.effect == "PreferNoSchedule" for t in taints)
        self.has_images[i] = bool(info.image_states)
        self.has_ports[i] = bool(info.used_ports)
        self.has_scalar[i] = bool(a.scalar) or bool(r.scalar)
