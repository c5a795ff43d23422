"""Which existing EndpointSlice takes which wanted one: by ports first, so that a new slice
whose name sorts first never makes two slices swap their contents."""

from __future__ import annotations

from controllers.endpointslice import DesiredSlice, pair_slices
from protos.kubeling.v1 import discovery_pb2, meta_pb2


def _ports(port: int) -> list[discovery_pb2.EndpointSlicePort]:
    return [discovery_pb2.EndpointSlicePort(name="http", protocol="TCP", port=port)]


def _slice(name: str, port: int) -> discovery_pb2.EndpointSlice:
    return discovery_pb2.EndpointSlice(metadata=meta_pb2.ObjectMeta(name=name), ports=_ports(port))


def test_slices_keep_their_ports() -> None:
    wanted = [DesiredSlice(_ports(8080), []), DesiredSlice(_ports(9090), [])]
    existing = [_slice("web-a", 9090), _slice("web-b", 8080)]  # names sort against the wanted order
    pairs = pair_slices(wanted, existing)
    assert [(d.ports[0].port if d else None, e.metadata.name if e else None) for d, e in pairs] == \
        [(8080, "web-b"), (9090, "web-a")]


def test_reuse_then_create_then_delete() -> None:
    wanted = [DesiredSlice(_ports(8080), []), DesiredSlice(_ports(7070), []), DesiredSlice(_ports(6060), [])]
    pairs = pair_slices(wanted, [_slice("web-a", 9090), _slice("web-b", 8080)])
    assert [(d.ports[0].port if d else None, e.metadata.name if e else None) for d, e in pairs] == \
        [(8080, "web-b"), (7070, "web-a"), (6060, None)]
    pairs = pair_slices([DesiredSlice(_ports(8080), [])], [_slice("web-a", 9090), _slice("web-b", 8080)])
    assert [(d.ports[0].port if d else None, e.metadata.name if e else None) for d, e in pairs] == \
        [(8080, "web-b"), (None, "web-a")]
