"""The DefaultTolerationSeconds admission plugin, as upstream's: every new pod tolerates
`node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable` (NoExecute) for 300
seconds unless it says otherwise, so that a node's short absence does not evict it at
once and a long one does (the controller manager's taint eviction)."""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.admission.chain import CREATE, AdmissionAttributes
from kubeling.taints import tolerates
from protos.kubeling.v1 import core_pb2

__all__ = ["DefaultTolerationSeconds", "NOT_READY", "UNREACHABLE"]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


@dataclass
class DefaultTolerationSeconds:
    not_ready_seconds: int = 300  # --default-not-ready-toleration-seconds
    unreachable_seconds: int = 300  # --default-unreachable-toleration-seconds
    resources: frozenset[str] = frozenset({"pods"})

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        for key, seconds in ((NOT_READY, self.not_ready_seconds), (UNREACHABLE, self.unreachable_seconds)):
            taint = core_pb2.Taint(key=key, effect="NoExecute")
            if not any(tolerates(t, taint) for t in pod.spec.tolerations):
                pod.spec.tolerations.add(key=key, operator="Exists", effect="NoExecute", tolerationSeconds=seconds)
