"""The kubelet's host-gw routes (kubelet/routes.py) in a network namespace of their own,
driven by real Node objects through a real apiserver."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator

import pytest

from kubelet.routes import PodRoutes, wanted_routes
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2


@pytest.fixture
def netns() -> Iterator[str]:
    """A namespace whose link (a veth pair, both ends inside, 172.31.250.1/24) puts the other
    nodes on-link."""
    name = f"kbl-routes-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for cmd in (["link", "add", "u0", "type", "veth", "peer", "name", "u1"],
                    ["addr", "add", "172.31.250.1/24", "dev", "u0"], ["link", "set", "u1", "up"],
                    ["link", "set", "u0", "up"]):
            subprocess.run(["ip", "-n", name, *cmd], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def _routes(netns: str) -> dict[str, str]:
    """Gateway routes (destination -> via) and unreachable ones (destination -> "unreachable")."""
    out = subprocess.run(["ip", "-n", netns, "-o", "route", "show"], capture_output=True, text=True, check=True)
    found = {}
    for w in (line.split() for line in out.stdout.splitlines()):
        if len(w) > 2 and w[1] == "via":
            found[w[0]] = w[2]
        elif w and w[0] == "unreachable":
            found[w[1]] = "unreachable"
    return found


GUARD = {"10.251.0.0/16": "unreachable"}


def _node(name: str, cidr: str, ip: str) -> core_pb2.Node:
    node = core_pb2.Node(metadata={"name": name}, spec={"podCIDR": cidr, "podCIDRs": [cidr]})
    node.status.addresses.add(type="InternalIP", address=ip)
    return node


async def _until(netns: str, expected: dict[str, str]) -> None:
    async with asyncio.timeout(10):
        while _routes(netns) != expected:
            await asyncio.sleep(0.05)


def test_wanted_routes_skip_self_and_incomplete_nodes() -> None:
    nodes = [_node("me", "10.1.0.0/24", "172.31.250.1"), _node("b", "10.1.1.0/24", "172.31.250.2"),
             _node("no-ip", "10.1.2.0/24", ""), _node("v6-gw", "10.1.3.0/24", "fd00::1"),
             core_pb2.Node(metadata={"name": "no-cidr"})]
    assert wanted_routes(nodes, "me") == {"10.1.1.0/24": "172.31.250.2"}


async def test_routes_follow_the_node_objects(client: Client, netns: str) -> None:
    me = await client.nodes.create(_node("rt-me", "10.251.0.0/24", "172.31.250.1"))
    await client.nodes.create(_node("rt-b", "10.251.1.0/24", "172.31.250.2"))
    routes = PodRoutes(client, me.metadata.name, "10.251.0.0/16", ip_command=["ip", "-n", netns])
    await routes.start()
    try:
        # Its own CIDR is no gateway route; the rest of the cluster CIDR goes nowhere.
        await _until(netns, {"10.251.0.0/16": "unreachable", "10.251.1.0/24": "172.31.250.2"})

        await client.nodes.create(_node("rt-c", "10.251.2.0/24", "172.31.250.3"))
        await _until(netns, {**GUARD, "10.251.1.0/24": "172.31.250.2", "10.251.2.0/24": "172.31.250.3"})

        moved = await client.nodes.get("rt-b")  # a node that comes back with another address
        moved.status.addresses[0].address = "172.31.250.9"
        await client.nodes.update_status(moved)
        await _until(netns, {**GUARD, "10.251.1.0/24": "172.31.250.9", "10.251.2.0/24": "172.31.250.3"})

        await client.nodes.delete("rt-c")
        await _until(netns, {**GUARD, "10.251.1.0/24": "172.31.250.9"})

        # A route someone removed comes back at the next sync.
        subprocess.run(["ip", "-n", netns, "route", "del", "10.251.1.0/24"], check=True)
        subprocess.run(["ip", "-n", netns, "route", "del", "unreachable", "10.251.0.0/16"], check=True)
        await routes.sync()
        assert _routes(netns) == {**GUARD, "10.251.1.0/24": "172.31.250.9"}
    finally:
        await routes.stop()
