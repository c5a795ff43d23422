"""The service ranges an apiserver takes (--service-cluster-ip-range never overlapping the
pod network, --service-node-port-range) and their allocators' arithmetic."""

from __future__ import annotations

import pytest

from apiserver.options import Config, complete
from apiserver.registry.core.allocator import IPRange, OutOfRange, PortRange


def test_ranges_are_checked() -> None:
    options = complete(Config())
    ips, ports = options.service_ips, options.node_ports
    assert (ips.text, ports.text) == ("10.96.0.0/16", "30000-32767")
    with pytest.raises(ValueError, match="overlaps --cluster-cidr 10.0.0.0/8"):
        complete(Config(cluster_cidr="10.0.0.0/8"))
    with pytest.raises(ValueError, match="--service-node-port-range"):
        complete(Config(service_node_port_range="32767-30000"))
    with pytest.raises(ValueError, match="--service-cluster-ip-range"):
        complete(Config(service_cluster_ip_range="10.96.0.1/16"))


def test_ip_and_port_ranges() -> None:
    ips = IPRange.parse("10.96.0.0/24")
    assert ips.size == 254 and ips.value(0) == "10.96.0.1" and ips.index("10.96.0.254") == 253
    for outside in ("10.96.0.0", "10.96.0.255", "10.97.0.1", "nonsense"):
        with pytest.raises(OutOfRange):
            ips.index(outside)
    ports = PortRange.parse("30000-32767")
    assert ports.size == 2768 and ports.index("30000") == 0 and ports.value(2767) == "32767"
    with pytest.raises(OutOfRange):
        ports.index("29999")
