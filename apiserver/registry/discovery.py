"""discovery.k8s.io/v1 EndpointSlices: defaults and validation as upstream's pkg/apis/discovery."""

from __future__ import annotations

from apiserver.registry.core.services import PROTOCOLS, check_addresses
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import names, scheme
from protos.kubeling.v1 import discovery_pb2

__all__ = ["EndpointSliceStrategy", "STRATEGIES"]

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
MAX_ENDPOINTS_PER_SLICE = 1000  # upstream's validation limit (the controller puts 100 in one)


class EndpointSliceStrategy(Strategy[discovery_pb2.EndpointSlice]):
    resource = scheme.ENDPOINTSLICES

    def default(self, obj: discovery_pb2.EndpointSlice) -> None:
        for port in obj.ports:
            if not port.HasField("protocol"):
                port.protocol = "TCP"

    def validate(self, obj: discovery_pb2.EndpointSlice, check: Checker) -> None:
        check.unsupported("addressType", obj.addressType, ADDRESS_TYPES)
        if len(obj.endpoints) > MAX_ENDPOINTS_PER_SLICE:
            check.add("endpoints", f"Too many: {len(obj.endpoints)}: must have at most {MAX_ENDPOINTS_PER_SLICE} "
                                   "items")
        for i, endpoint in enumerate(obj.endpoints):
            path = f"endpoints[{i}]"
            if not endpoint.addresses:
                check.add(f"{path}.addresses", "Required value: must contain at least 1 address")
            elif len(endpoint.addresses) > 100:
                check.add(f"{path}.addresses", "Too many: must have at most 100 items")
            check_addresses(f"{path}.addresses", obj.addressType, list(endpoint.addresses), check)
            if endpoint.HasField("hostname"):
                check.name(f"{path}.hostname", endpoint.hostname, names.dns1123_label)
        seen: set[str] = set()
        for i, port in enumerate(obj.ports):
            if port.HasField("name") and port.name:
                check.name(f"ports[{i}].name", port.name, names.dns1123_label)
            if port.name in seen:
                check.add(f"ports[{i}].name", f'Duplicate value: "{port.name}"')
            seen.add(port.name)
            check.unsupported(f"ports[{i}].protocol", port.protocol, PROTOCOLS)
            if port.HasField("port"):
                check.port(f"ports[{i}].port", port.port)

    def validate_update(self, new: discovery_pb2.EndpointSlice, old: discovery_pb2.EndpointSlice,
                        check: Checker) -> None:
        if new.addressType != old.addressType:
            check.invalid("addressType", new.addressType, "field is immutable")


STRATEGIES = (EndpointSliceStrategy,)
