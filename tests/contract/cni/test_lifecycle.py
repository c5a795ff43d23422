"""ADD / CHECK / DEL with the real loopback, bridge and host-local plugins in real namespaces."""

from __future__ import annotations

import json
from pathlib import Path

from cni import CNIConfig, RuntimeConf, netns, parse_conflist
from tests.contract.cni.conftest import PLUGIN_DIR, bridge_conflist, ns_exec

LOOPBACK = parse_conflist({"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]})


async def test_add_check_del_lifecycle(workdir: Path, bridge: str, make_netns) -> None:
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


async def test_gc_forgets_stale_attachments(workdir: Path, bridge: str, make_netns) -> None:
    net = parse_conflist(bridge_conflist("gcnet", bridge, "10.199.10.0/24", workdir))
    cni = CNIConfig([PLUGIN_DIR], cache_dir=workdir / "cache")
    keep, stale = await make_netns("k"), await make_netns("s")
    await cni.add_network_list(net, RuntimeConf("keep", netns.path_of(keep), "eth0"))
    gone = await cni.add_network_list(net, RuntimeConf("stale", netns.path_of(stale), "eth0"))
    await netns.delete(stale)  # its sandbox vanished without a DEL
    await cni.gc_network_list(net, [("keep", "eth0")])
    assert not (workdir / "ipam" / "gcnet" / gone.ips[0].ip).exists()  # the stale IP is free again
    assert cni.cached_result(net, RuntimeConf("keep", "", "eth0")) is not None
    await cni.del_network_list(net, RuntimeConf("keep", netns.path_of(keep), "eth0"))


async def test_cli_add_check_del(workdir: Path, bridge: str, make_netns) -> None:
    import subprocess
    import sys
    conf = workdir / "net.d"
    conf.mkdir()
    (conf / "10-cli.conflist").write_text(json.dumps(bridge_conflist("clinet", bridge, "10.199.11.0/24", workdir)))
    ns = await make_netns()
    base = [sys.executable, "-m", "cni"]
    common = ["--conf-dir", str(conf), "--bin-dir", PLUGIN_DIR, "--cache-dir", str(workdir / "cache")]
    status = subprocess.run([*base, "status", *common], capture_output=True, text=True)
    assert status.returncode == 0 and json.loads(status.stdout)["network"] == "clinet"
    add = subprocess.run([*base, "add", ns, *common], capture_output=True, text=True)
    assert add.returncode == 0, add.stderr
    ip = json.loads(add.stdout)["ips"][0]["address"].split("/")[0]
    assert ip in ns_exec(ns, "ip", "-o", "addr").stdout
    assert subprocess.run([*base, "check", ns, *common], capture_output=True).returncode == 0
    assert subprocess.run([*base, "del", ns, *common], capture_output=True).returncode == 0
    assert not (workdir / "ipam" / "clinet" / ip).exists()
    missing = subprocess.run([*base, "status", "--conf-dir", str(workdir / "empty")], capture_output=True, text=True)
    assert missing.returncode == 1 and "no valid networks found" in missing.stderr
