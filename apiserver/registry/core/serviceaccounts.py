"""v1 ServiceAccounts: the identities pods run as (their tokens: `apiserver.auth.tokens`)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["ServiceAccountStrategy"]


class ServiceAccountStrategy(Strategy[core_pb2.ServiceAccount]):
    resource = scheme.SERVICEACCOUNTS
