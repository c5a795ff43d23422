"""The network plugin manager on the real plugins: pods, connectivity, concurrency, host ports,
config dirs, and the exact plugin protocol (a recording fake plugin)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path

import pytest

from cni import PluginError, netns
from cri.hostport import HostPortInUse, PortMapping
from cri.network import DEFAULT_CONFLIST, POD_CIDR_CHANGE, NetworkNotReady, NetworkPluginManager, PodNetwork
from kubeling.netutil import free_port
from tests.contract.cni.conftest import (
    PLUGIN_DIR,
    bridge_conflist,
    bridge_ports,
    iptables_chains,
    ns_exec,
    write_failing_plugin,
    write_plugin,
)
from tests.wait import until


def _manager(workdir: Path, conflist: dict | None, bin_dirs: list[str] | None = None, **kw) -> NetworkPluginManager:
    conf = workdir / "net.d"
    conf.mkdir(exist_ok=True)
    if conflist is not None:
        (conf / "10-test.conflist").write_text(json.dumps(conflist))
    return NetworkPluginManager(conf, bin_dirs or [PLUGIN_DIR], cache_dir=workdir / "cache", **kw)


def _pod(name: str, ns_name: str, ports: tuple[PortMapping, ...] = ()) -> PodNetwork:
    return PodNetwork("default", name, f"uid-{name}", f"sandbox-{name}", netns.path_of(ns_name), ports)


async def test_two_pods_reach_each_other_over_the_bridge(workdir: Path, bridge: str, make_netns) -> None:
    mgr = _manager(workdir, bridge_conflist("podnet", bridge, "10.199.2.0/24", workdir))
    a, b = await make_netns("a"), await make_netns("b")
    ip_a = (await mgr.set_up_pod(_pod("a", a)))[0]
    ip_b = (await mgr.set_up_pod(_pod("b", b)))[0]
    assert ip_a != ip_b
    ping = ns_exec(a, "busybox", "ping", "-c", "1", "-W", "2", ip_b)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert mgr.get_pod_network_status(_pod("a", a)) == [ip_a]
    await mgr.check_pod(_pod("a", a))
    await mgr.tear_down_pod(_pod("a", a))
    await mgr.tear_down_pod(_pod("b", b))
    assert not list((workdir / "ipam" / "podnet").glob("10.*"))


async def test_twenty_sandboxes_concurrently(workdir: Path, bridge: str, make_netns) -> None:
    mgr = _manager(workdir, bridge_conflist("many", bridge, "10.199.3.0/24", workdir))
    chains = iptables_chains()
    names = [await make_netns(f"n{i}") for i in range(20)]
    assert set(names) <= set(netns.list_names("kubeling-test-"))  # the leftover finder sees them
    pods = [_pod(f"p{i}", n) for i, n in enumerate(names)]
    ips = await asyncio.gather(*(mgr.set_up_pod(p) for p in pods))
    flat = [i[0] for i in ips]
    assert len(set(flat)) == 20
    assert len(bridge_ports(bridge)) == 20
    await asyncio.gather(*(mgr.tear_down_pod(p) for p in pods))
    for n in names:
        await netns.delete(n)
    assert not set(names) & set(netns.list_names("kubeling-test-"))
    assert iptables_chains() == chains
    assert not list((workdir / "ipam" / "many").glob("10.*"))
    # Nothing cached for any network, the loopback included (upstream's TearDownPod DELs both).
    assert not list((workdir / "cache" / "results").iterdir())
    # veths vanish shortly after their namespace (MACHINE-FACTS)
    await until(lambda: bridge_ports(bridge) == [], f"no port left on {bridge}", timeout=10)


async def test_config_dir_choice_reload_and_status(workdir: Path, bridge: str) -> None:
    mgr = _manager(workdir, None)
    with pytest.raises(NetworkNotReady, match="no valid networks found in"):
        mgr.status()
    conf = workdir / "net.d"
    (conf / "00-broken.conf").write_text("{not json")
    (conf / "05-notype.conf").write_text(json.dumps({"cniVersion": "1.0.0", "name": "x"}))
    (conf / "07-empty.conflist").write_text(json.dumps({"cniVersion": "1.0.0", "name": "y", "plugins": []}))
    (conf / "README.txt").write_text("not a config")
    with pytest.raises(NetworkNotReady):
        mgr.status()
    (conf / "20-single.conf").write_text(json.dumps(
        {"cniVersion": "0.4.0", "name": "single", "type": "bridge", "bridge": bridge,
         "ipam": {"type": "host-local", "subnet": "10.199.9.0/24", "dataDir": str(workdir / "ipam")}}))
    mgr.status()
    net = mgr.default_network()
    assert net is not None and net.name == "single" and [p.type for p in net.plugins] == ["bridge"]
    (conf / "10-first.conflist").write_text(json.dumps(bridge_conflist("first", bridge, "10.199.8.0/24", workdir)))
    assert mgr.default_network().name == "first"  # sorted: 10- before 20-


async def test_pod_cidr_event_writes_a_default_network(workdir: Path) -> None:
    mgr = _manager(workdir, None, bridge="kblcidr0", ipam_data_dir=workdir / "ipam")
    mgr.init("hairpin-veth", 1400)
    mgr.event(POD_CIDR_CHANGE, {"podCIDR": "10.88.7.0/24"})
    net = mgr.default_network()
    assert net is not None and net.name == "kubeling"
    doc = json.loads((workdir / "net.d" / DEFAULT_CONFLIST).read_text())
    bridge = doc["plugins"][0]
    assert bridge["bridge"] == "kblcidr0" and bridge["mtu"] == 1400 and bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.88.7.0/24"}]]
    assert bridge["ipam"]["routes"] == [{"dst": "10.88.0.0/16"}]  # no default route: nothing routes outside
    assert bridge["ipam"]["dataDir"] == str(workdir / "ipam")
    assert doc["plugins"][1]["type"] == "portmap"
    # a user's own config wins
    (workdir / "net.d" / "05-user.conflist").write_text(json.dumps(bridge_conflist("user", "kbu0", "10.199.6.0/24",
                                                                                   workdir)))
    mgr.event(POD_CIDR_CHANGE, {"podCIDR": "10.88.8.0/24"})
    assert mgr.default_network().name == "user"


RECORDER = """
env | grep '^CNI_' | sort > "$RECORD_DIR/$CNI_COMMAND.env"
cat > "$RECORD_DIR/$CNI_COMMAND.stdin"
case "$CNI_COMMAND" in
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}';;
  ADD) echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.250.0.7/24","interface":0}]}';;
esac
"""


async def test_plugin_protocol_env_and_stdin(workdir: Path, make_netns, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = workdir / "fakes"
    fakes.mkdir()
    write_plugin(fakes, "recorder", RECORDER)
    record = workdir / "record"
    record.mkdir()
    monkeypatch.setenv("RECORD_DIR", str(record))
    conflist = {"cniVersion": "1.0.0", "name": "rec", "plugins": [
        {"type": "recorder", "capabilities": {"portMappings": True, "bandwidth": True}, "custom": 42}]}
    mgr = _manager(workdir, conflist, [str(fakes), PLUGIN_DIR])
    ns = await make_netns()
    port = free_port()
    pod = PodNetwork("team", "web", "uid-1", "sandbox-1", netns.path_of(ns),
                     (PortMapping(port, 80, "tcp"),), {"ingressRate": 1000})
    assert await mgr.set_up_pod(pod) == ["10.250.0.7"]
    env = dict(line.split("=", 1) for line in (record / "ADD.env").read_text().splitlines())
    assert env["CNI_COMMAND"] == "ADD" and env["CNI_CONTAINERID"] == "sandbox-1"
    assert env["CNI_NETNS"] == netns.path_of(ns) and env["CNI_IFNAME"] == "eth0"
    assert env["CNI_ARGS"] == ("IgnoreUnknown=1;K8S_POD_NAMESPACE=team;K8S_POD_NAME=web;"
                               "K8S_POD_INFRA_CONTAINER_ID=sandbox-1;K8S_POD_UID=uid-1")
    assert env["CNI_PATH"] == f"{fakes}:{PLUGIN_DIR}"
    stdin = json.loads((record / "ADD.stdin").read_text())
    assert stdin["name"] == "rec" and stdin["cniVersion"] == "1.0.0" and stdin["custom"] == 42
    assert stdin["runtimeConfig"] == {"portMappings": [{"hostPort": port, "containerPort": 80, "protocol": "tcp"}],
                                      "bandwidth": {"ingressRate": 1000}}
    assert "prevResult" not in stdin
    await mgr.check_pod(pod)
    check = json.loads((record / "CHECK.stdin").read_text())
    assert check["prevResult"]["ips"][0]["address"] == "10.250.0.7/24"
    await mgr.tear_down_pod(pod)
    delete = json.loads((record / "DEL.stdin").read_text())
    assert delete["prevResult"]["ips"][0]["address"] == "10.250.0.7/24"
    assert "CNI_COMMAND=DEL" in (record / "DEL.env").read_text()
    # capabilities the plugin does not declare are not passed
    conflist["plugins"][0]["capabilities"] = {}  # type: ignore[index]
    (workdir / "net.d" / "10-test.conflist").write_text(json.dumps(conflist))
    mgr2 = _manager(workdir, None, [str(fakes), PLUGIN_DIR])
    await mgr2.set_up_pod(pod)
    assert "runtimeConfig" not in json.loads((record / "ADD.stdin").read_text())
    await mgr2.tear_down_pod(pod)


async def test_failing_plugin_is_typed_and_leaves_no_ip(workdir: Path, bridge: str, make_netns) -> None:
    fakes = workdir / "fakes"
    fakes.mkdir()
    write_failing_plugin(fakes)
    conflist = bridge_conflist("failnet", bridge, "10.199.4.0/24", workdir)
    conflist["plugins"].append({"type": "failer"})
    mgr = _manager(workdir, conflist, [str(fakes), PLUGIN_DIR])
    ns = await make_netns()
    with pytest.raises(PluginError) as info:
        await mgr.set_up_pod(_pod("f", ns))
    assert info.value.plugin == "failer" and info.value.command == "ADD" and info.value.code == 11
    assert "no capacity left" in str(info.value) and "try another day" in str(info.value)
    assert not list((workdir / "ipam" / "failnet").glob("10.*"))  # the bridge's IP was released


async def test_hanging_plugin_times_out(workdir: Path, make_netns) -> None:
    fakes = workdir / "fakes"
    fakes.mkdir()
    pid_file = workdir / "sleeper.pid"
    write_plugin(fakes, "sleeper", f"""
if [ "$CNI_COMMAND" = VERSION ]; then echo '{{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}}'; exit 0; fi
if [ "$CNI_COMMAND" = DEL ]; then exit 0; fi
echo $$ > {pid_file}
exec sleep 300
""")
    mgr = _manager(workdir, {"cniVersion": "1.0.0", "name": "slow", "plugins": [{"type": "sleeper"}]},
                   [str(fakes), PLUGIN_DIR], timeout=0.5)
    ns = await make_netns()
    # the call ends with the timeout: a plugin left to run would hold it for its 300 s
    async with asyncio.timeout(30):
        with pytest.raises(PluginError, match="timed out after 0.5s"):
            await mgr.set_up_pod(_pod("s", ns))
    # the hung plugin was killed, not left sleeping (the same process: `exec` kept its pid)
    pid = int(pid_file.read_text())
    await until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), f"the hung plugin (pid {pid}) killed",
                timeout=5)


async def test_host_port_in_use_is_refused_and_untouched(workdir: Path, bridge: str, make_netns,
                                                         iptables_guard) -> None:
    mgr = _manager(workdir, bridge_conflist("ports", bridge, "10.199.5.0/24", workdir, portmap=True))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        ns = await make_netns()
        chains_before = iptables_chains()
        with pytest.raises(HostPortInUse, match=f"host port {port}/TCP"):
            await mgr.set_up_pod(_pod("h", ns, (PortMapping(port, 80, "tcp", "127.0.0.1"),)))
        assert iptables_chains() == chains_before  # no rule was made for it
        client = socket.create_connection(("127.0.0.1", port), timeout=2)  # still reaches its owner
        conn, _ = busy.accept()
        client.sendall(b"hi")
        assert conn.recv(2) == b"hi"
        client.close()
        conn.close()
        assert not list((workdir / "ipam" / "ports").glob("10.*"))
    finally:
        busy.close()


async def test_free_host_port_is_held_and_mapped(workdir: Path, bridge: str, make_netns, iptables_guard) -> None:
    mgr = _manager(workdir, bridge_conflist("mapped", bridge, "10.199.7.0/24", workdir, portmap=True))
    ns = await make_netns()
    port = free_port()
    pod = _pod("m", ns, (PortMapping(port, 8080, "tcp"),))
    await mgr.set_up_pod(pod)
    assert mgr.ports.held(pod.sandbox_id) == 1
    probe = socket.socket()
    with pytest.raises(OSError):
        probe.bind(("0.0.0.0", port))  # we hold it
    probe.close()
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert f"--dport {port}" in nat and "CNI-HOSTPORT-DNAT" in nat  # portmap's rule for our port
    await mgr.check_pod(pod)  # portmap's CHECK bug (plugins#819) is tolerated
    await mgr.tear_down_pod(pod)
    assert mgr.ports.held(pod.sandbox_id) == 0
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert f"--dport {port}" not in nat  # DEL removed the pod's rules


def _zombie(pid: int) -> bool:
    """Dead, not yet reaped by its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
