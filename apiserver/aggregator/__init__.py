"""API aggregation (upstream's kube-aggregator, in the apiserver as upstream runs it): the
APIServices kept (apiservices), the extension apiservers followed (remote), and requests
for their group-versions proxied to them (proxy)."""

from apiserver.aggregator.apiservices import APIServiceStatus, LocalAPIServices
from apiserver.aggregator.proxy import AggregatorProxy, aggregated_request_info, group_version_of
from apiserver.aggregator.remote import Backend, ProxyIdentity, RemoteAPIs

__all__ = ["APIServiceStatus", "LocalAPIServices", "AggregatorProxy", "aggregated_request_info", "group_version_of",
           "Backend", "ProxyIdentity", "RemoteAPIs"]
