"""A pod's QoS class (pkg/apis/core/helper/qos) and the OOM score adjustment the kubelet
gives its containers by it (pkg/kubelet/qos/policy.go): Guaranteed and critical pods
-997, BestEffort 1000, Burstable between 2 and 999 — the larger its memory request
against the node's memory, the less likely the kernel picks it."""

from __future__ import annotations

from pathlib import Path

from kubeling import podresources
from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["qos_class", "oom_score_adj", "oom_score_floor", "GUARANTEED_OOM_ADJ", "BEST_EFFORT_OOM_ADJ"]

_CAP_SYS_RESOURCE = 24
GUARANTEED_OOM_ADJ = -997
BEST_EFFORT_OOM_ADJ = 1000
_CRITICAL_PRIORITY = 2000000000


def qos_class(pod: Pod) -> str:
    """BestEffort, Burstable or Guaranteed, from cpu and memory (as the apiserver reckons it)."""
    return podresources.qos_class(pod.spec)


def oom_score_floor(status: Path = Path("/proc/self/status"), own: Path = Path("/proc/self/oom_score_adj")) -> int:
    """The lowest adjustment this kubelet can give: -1000 with CAP_SYS_RESOURCE; without it
    (a kubelet in a container or user namespace that lacks it) the kernel refuses to go
    below the kubelet's own, and runc then fails to start the container — so, as
    upstream's kubelet does in a user namespace, no container is given less."""
    for line in status.read_text().splitlines():
        if line.startswith("CapEff:") and int(line.split()[1], 16) & (1 << _CAP_SYS_RESOURCE):
            return -1000
    return int(own.read_text().strip() or 0)


def oom_score_adj(pod: Pod, container: core_pb2.Container, memory_capacity: int, floor: int = -1000) -> int:
    """upstream's GetContainerOOMScoreAdjust, not below `floor` (oom_score_floor)."""
    return max(floor, _oom_score_adj(pod, container, memory_capacity))


def _oom_score_adj(pod: Pod, container: core_pb2.Container, memory_capacity: int) -> int:
    if pod.spec.priority >= _CRITICAL_PRIORITY:
        return GUARANTEED_OOM_ADJ
    qos = qos_class(pod)
    if qos == "Guaranteed":
        return GUARANTEED_OOM_ADJ
    if qos == "BestEffort":
        return BEST_EFFORT_OOM_ADJ
    try:
        request = parse_quantity(container.resources.requests.get("memory", "0")).int_value()
    except QuantityError:
        request = 0
    adjust = 1000 - (1000 * request) // max(1, memory_capacity)
    # a Burstable container stays above Guaranteed ones and below BestEffort ones
    return min(999, max(2, adjust))
