"""The network policy controller against a real apiserver, programming a network namespace
of the test's own (real iptables and ipset; pods' status written as a kubelet would): a
policy becomes a pod chain and a peer set, a new peer pod changes the set and not the
rules, the jumps from FORWARD and INPUT come first even when another jump was put in front,
a killed controller's chains and sets are taken over and what is stale removed, and a clean
stop leaves nothing."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from kubeling.client import Client
from netpol.controller import PolicyConfig, PolicyController
from protos.kubeling.v1 import core_pb2, custom_pb2, meta_pb2
from tests.wait import until


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"kbl-np-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)  # its rules and sets go with it


def _in(netns: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, *args], capture_output=True, text=True).stdout


def _controller(client: Client, netns: str) -> PolicyController:
    return PolicyController(Client(client.address), PolicyConfig(
        node_names=["node-1"], cluster_cidr="10.244.0.0/16", min_sync_period=0.05, netns=f"/run/netns/{netns}"))


async def _pod(client: Client, name: str, ip: str, labels: dict[str, str], node: str = "node-1") -> None:
    made = await client.pods.create(core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels=labels),
        spec=core_pb2.PodSpec(nodeName=node, containers=[core_pb2.Container(name="c", image="busybox")])))
    made.status.phase = "Running"
    made.status.podIP = ip
    await client.pods.update_status(made)


def _policy(name: str, spec: dict[str, object]) -> custom_pb2.CustomResource:
    return custom_pb2.CustomResource(apiVersion="networking.k8s.io/v1", kind="NetworkPolicy",
                                     metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                                     content=json.dumps({"spec": spec}))


async def test_policies_become_chains_and_sets_and_leave_nothing(client: Client, netns: str) -> None:
    await _pod(client, "web", "10.244.1.2", {"app": "web"})
    await _pod(client, "ok", "10.244.2.3", {"access": "true"}, node="node-2")
    controller = _controller(client, netns)
    await controller.start()
    try:
        assert "-j KUBE-NP-FORWARD" in _in(netns, "iptables", "-S", "FORWARD").splitlines()[1]
        assert "-j KUBE-NP-INPUT" in _in(netns, "iptables", "-S", "INPUT").splitlines()[1]
        await client.networkpolicies.create(_policy("web", {
            "podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"access": "true"}}}], "ports": [{"port": 80}]}]}))
        await until(lambda: "-d 10.244.1.2/32 -j KUBE-NP-IN-" in _in(netns, "iptables", "-S", "KUBE-NP-FORWARD"),
                    "the web pod's chain", 10)
        [name] = _in(netns, "ipset", "list", "-n").split()
        assert _in(netns, "ipset", "list", name).split("Members:")[1].split() == ["10.244.2.3"]
        syncs = controller.syncs
        await _pod(client, "ok2", "10.244.2.4", {"access": "true"}, node="node-2")
        # the sync is counted once its tables are written (in a thread): the set can be seen first
        await until(lambda: controller.syncs > syncs and "10.244.2.4" in _in(netns, "ipset", "list", name),
                    "the new peer in the set, the sync done", 10)
        rules = _in(netns, "iptables-save", "-t", "filter")
        assert f"--match-set {name} src -m tcp --dport 80 -j RETURN" in rules, rules

        # someone (a restarted kube-proxy) puts a jump of its own first: a full sync puts ours back in front
        _in(netns, "iptables", "-N", "OTHER")
        _in(netns, "iptables", "-I", "FORWARD", "1", "-j", "OTHER")
        await controller.sync(full=True)
        assert "-j KUBE-NP-FORWARD" in _in(netns, "iptables", "-S", "FORWARD").splitlines()[1]
        _in(netns, "iptables", "-D", "FORWARD", "-j", "OTHER")
        _in(netns, "iptables", "-X", "OTHER")
    finally:
        await controller.stop(clean=False)  # as if killed: its rules stay in force

    assert "KUBE-NP-IN-" in _in(netns, "iptables-save")
    await client.networkpolicies.delete("web", "default")
    successor = _controller(client, netns)
    await successor.start()  # takes over: what no policy wants any more goes
    try:
        assert "KUBE-NP-IN-" not in _in(netns, "iptables-save") and not _in(netns, "ipset", "list", "-n").split()
    finally:
        await successor.stop()
    assert "KUBE-NP" not in _in(netns, "iptables-save") and not _in(netns, "ipset", "list", "-n").split()
