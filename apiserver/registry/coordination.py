"""Leases (coordination.k8s.io/v1): node heartbeats and leader election."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import scheme
from protos.kubeling.v1 import coordination_pb2

__all__ = ["STRATEGIES", "LeaseStrategy"]


class LeaseStrategy(Strategy[coordination_pb2.Lease]):
    resource = scheme.LEASES

    def validate(self, obj: coordination_pb2.Lease, check: Checker) -> None:
        spec = obj.spec
        if spec.HasField("leaseDurationSeconds") and spec.leaseDurationSeconds <= 0:
            check.invalid("spec.leaseDurationSeconds", spec.leaseDurationSeconds, "must be greater than 0")
        if spec.HasField("leaseTransitions") and spec.leaseTransitions < 0:
            check.invalid("spec.leaseTransitions", spec.leaseTransitions, "must be greater than or equal to 0")


# This group's resources, for the registry's table.
STRATEGIES = (LeaseStrategy,)
