"""v1 ServiceAccounts: the identities pods run as (their tokens: `apiserver.auth.tokens`)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from protos.kubeling.v1 import api_pb2, core_pb2

__all__ = ["ServiceAccountStrategy"]


class ServiceAccountStrategy(Strategy[core_pb2.ServiceAccount]):
    kind = "ServiceAccount"
    plural = "serviceaccounts"
    namespaced = True
    has_status = False
    message = core_pb2.ServiceAccount
    list_message = api_pb2.ServiceAccountList
    event_message = api_pb2.ServiceAccountWatchEvent
