"""`kubeling token create --print-join-command` and `kubeling join` on a new host: a cluster
brought up with `--hosts` and one node; a second network namespace is plugged into its
underlay as a machine of its own, and the printed command, run there, makes it a node:
discovery pinned by the CA's hash, the TLS bootstrap with the token, its serving
certificate, its kubelet; a pod runs there, its logs and exec go through the apiserver to
that kubelet (its serving certificate verified), and it reaches a pod on the other host.
A wrong CA hash is refused before anything is written. `kubeling reset` removes what the
joined kubelet left; nothing stays after `kubeling down`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from cluster.hosts import bridge_of, netns_name
from cluster.plan import ClusterPlan
from cni import netns
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.kubectl import Kubectl
from tests.wait import until

CIDR = f"10.{160 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _plug_host(ns: str, bridge: str, address: str) -> str:
    """A new machine on the cluster's underlay: a network namespace with eth0 on the bridge."""
    outer = f"{bridge}-j"[:15]
    _ip("netns", "add", ns)
    _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _ip("link", "set", outer, "master", bridge, "up")
    _ip("-n", ns, "addr", "add", address, "dev", "eth0")
    _ip("-n", ns, "link", "set", "eth0", "up")
    _ip("-n", ns, "link", "set", "lo", "up")
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
    return outer


def _pod(name: str, node: str, *command: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels={"app": name}),
                        spec=core_pb2.PodSpec(nodeName=node, terminationGracePeriodSeconds=1, containers=[
                            core_pb2.Container(name="main", image="busybox", imagePullPolicy="IfNotPresent",
                                               command=list(command))]))


async def _running(client: Client, name: str) -> Any:
    pod = await client.pods.get(name)
    return pod if pod.status.phase == "Running" else None


async def test_a_machine_joins_with_a_token_and_runs_pods(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    prefix = f"j{os.getpid() % 1000}-"
    first, joiner = f"{prefix}1", f"{prefix}joined"
    netns_before = set(netns.list_names())
    up = _kubeling("up", "--hosts", "--nodes", "1", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
                   "--cluster-cidr", CIDR)
    ns, outer, joining = netns_name(joiner, "joined-e2e"), "", None
    join_dir = tmp_path / "joined"
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None and plan.hosts_subnet
        made = _kubeling("token", "create", "--print-join-command", "--ttl", "10m", "--description", "e2e",
                         "--state-dir", str(state))
        assert made.returncode == 0, made.stderr
        command = made.stdout.split()
        assert command[:3] == ["kubeling", "join", plan.rest] and command[3] == "--token", made.stdout
        token = command[4]
        listed = _kubeling("token", "list", "--state-dir", str(state))
        assert f"{token[:6]}.<secret>" in listed.stdout and "e2e" in listed.stdout, listed.stdout

        address = plan.hosts_subnet.rsplit(".", 1)[0] + ".50"
        outer = _plug_host(ns, bridge_of(plan.state_dir), f"{address}/24")
        # nsenter, not `ip netns exec`: that one mounts a sysfs of its own, without the cgroup mounts runc needs
        enter = ["nsenter", f"--net=/run/netns/{ns}"]
        in_host = [*enter, sys.executable, "-m", "cluster", "join", *command[2:],
                   "--node-name", joiner, "--state-dir", str(join_dir)]

        wrong = subprocess.run([*enter, sys.executable, "-m", "cluster", "join", plan.rest,
                                "--token", token, "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64,
                                "--node-name", joiner, "--state-dir", str(tmp_path / "wrong"), "--timeout", "20"],
                               capture_output=True, text=True, timeout=60)
        assert wrong.returncode == 1 and "none of the public keys" in wrong.stderr, wrong.stderr
        assert not (tmp_path / "wrong").exists()

        log = open(tmp_path / "join.log", "w")
        joining = subprocess.Popen(in_host, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        async with Client.from_kubeconfig(state / "kubeconfig", timeout=10) as client:
            async def ready(c: Client) -> bool:
                assert joining is not None and joining.poll() is None, (tmp_path / "join.log").read_text()
                try:
                    node = await c.nodes.get(joiner)
                except Exception:
                    return False
                return any(x.type == "Ready" and x.status == "True" for x in node.status.conditions)
            await until(lambda: ready(client), "the joined node Ready", 120, interval=0.5)
            node = await client.nodes.get(joiner)
            assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [address]

            await client.pods.create(_pod("there", joiner, "httpd", "-f", "-p", "8080", "-h", "/etc"))
            await client.pods.create(_pod("here", first, "sleep", "3600"))
            there = await until(lambda: _running(client, "there"), "the pod on the joined node", 90)
            await until(lambda: _running(client, "here"), "the pod on the first node", 90)
            kubectl = Kubectl(state / "kubeconfig")
            _, out, _ = await kubectl("exec", "there", "--", "hostname")
            assert out.strip() == "there", "exec reaches the joined kubelet (its serving certificate verified)"
            _, out, _ = await kubectl("exec", "here", "--", "sh", "-c", "for i in $(seq 20); do timeout 2 wget -q "
                                      f"-O - http://{there.status.podIP}:8080/hostname && exit 0; sleep 0.5; done; "
                                      "exit 1")
            assert out.strip() == "there", "a pod on the first host reaches the joined host's pod"
            _, out, _ = await kubectl("get", "csr", "--no-headers")
            assert sum("Approved,Issued" in line for line in out.splitlines()) == 2, out
            deleted = _kubeling("token", "delete", token[:6], "--state-dir", str(state))
            assert deleted.returncode == 0 and f"bootstrap token '{token[:6]}' deleted" in deleted.stdout
            assert token[:6] not in _kubeling("token", "list", "--state-dir", str(state)).stdout

            for name in ("there", "here"):
                await client.pods.delete(name, grace_period_seconds=0)

            async def gone(c: Client) -> bool:
                return not [p for p in (await c.pods.list("default")).items if p.metadata.name in ("there", "here")]
            await until(lambda: gone(client), "the pods gone", 60)
    finally:
        if joining is not None and joining.poll() is None:
            joining.send_signal(signal.SIGTERM)
            joining.wait(timeout=60)
        if join_dir.exists():
            reset = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", sys.executable, "-m", "cluster", "reset",
                                    "--state-dir", str(join_dir)], capture_output=True, text=True, timeout=120)
            assert reset.returncode == 0 and not join_dir.exists(), reset.stdout + reset.stderr
        if ns in netns.list_names():
            _ip("netns", "del", ns)
        if outer:
            subprocess.run(["ip", "link", "del", outer], capture_output=True)
        down = _kubeling("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stdout + down.stderr
    assert set(netns.list_names()) <= netns_before, "no namespace left behind"
