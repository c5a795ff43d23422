"""ADD / CHECK / DEL with the real loopback, bridge and host-local plugins in real namespaces."""

from __future__ import annotations

import json
from pathlib import Path

from cni import CNIConfig, RuntimeConf, netns, parse_conflist
from tests.contract.cni.conftest import PLUGIN_DIR, bridge_conflist, ns_exec

LOOPBACK = parse_conflist({"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]})


async def test_add_check_del_lifecycle(workdir: Path, bridge: str, make_netns) -> None:  # type: ignore[no-untyped-def]
    name = await make_netns()
    path = netns.path_of(name)
    net = parse_conflist(bridge_conflist("testnet", bridge, "10.199.1.0/24", workdir))
    cni = CNIConfig([PLUGIN_DIR], cache_dir=workdir / "cache")
    rt = RuntimeConf("c0ffee01", path, "eth0", (("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", "default"),
                                                 ("K8S_POD_NAME", "web")))
    await cni.add_network_list(LOOPBACK, RuntimeConf("c0ffee01", path, "lo"))
    result = await cni.add_network_list(net, rt)
    ip = result.ips[0].ip
    assert ip.startswith("10.199.1.") and result.interfaces
    assert ip in ns_exec(name, "ip", "-o", "addr", "show", "eth0").stdout
    assert "UP" in ns_exec(name, "ip", "-o", "link", "show", "lo").stdout
    cached = json.loads((workdir / "cache" / "results" / "testnet-c0ffee01-eth0").read_text())
    assert cached["kind"] == "cniCacheV1" and cached["result"]["ips"][0]["address"].startswith(ip)
    assert (workdir / "ipam" / "testnet" / ip).exists()  # host-local's reservation

    await cni.check_network_list(net, rt)

    await cni.del_network_list(net, rt)
    assert not (workdir / "ipam" / "testnet" / ip).exists()  # released
    assert not (workdir / "cache" / "results" / "testnet-c0ffee01-eth0").exists()
    assert "eth0" not in ns_exec(name, "ip", "-o", "link").stdout
    # idempotent: a second DEL, and a DEL whose namespace is gone
    await cni.del_network_list(net, rt)
    await netns.delete(name)
    await cni.del_network_list(net, RuntimeConf("c0ffee01", "", "eth0"))
    await cni.del_network_list(net, RuntimeConf("c0ffee01", path, "eth0"))
