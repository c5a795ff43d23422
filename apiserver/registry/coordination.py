"""Leases (coordination.k8s.io/v1): node heartbeats and leader election."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from protos.kubeling.v1 import api_pb2, coordination_pb2

__all__ = ["LeaseStrategy"]


class LeaseStrategy(Strategy[coordination_pb2.Lease]):
    kind = "Lease"
    plural = "leases"
    namespaced = True
    garbage_collected = True
    has_status = False
    message = coordination_pb2.Lease
    list_message = api_pb2.LeaseList
    event_message = api_pb2.LeaseWatchEvent

    def validate(self, obj: coordination_pb2.Lease, check: Checker) -> None:
        spec = obj.spec
        if spec.HasField("leaseDurationSeconds") and spec.leaseDurationSeconds <= 0:
            check.invalid("spec.leaseDurationSeconds", spec.leaseDurationSeconds, "must be greater than 0")
        if spec.HasField("leaseTransitions") and spec.leaseTransitions < 0:
            check.invalid("spec.leaseTransitions", spec.leaseTransitions, "must be greater than or equal to 0")
