"""A cluster plan's ports are all different even when the kernel hands the same free port
out twice in a row (it may: each free_port() binds and releases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import plan as plans


def test_no_two_components_share_a_port(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    handed = iter([5000, 5000, 5001, 5001, 5002] + list(range(6000, 6100)))  # repeats, as the kernel may
    monkeypatch.setattr(plans, "free_port", lambda: next(handed))
    made = plans.new_plan(tmp_path, 2, "n", "10.88.0.0/16", etcd_members=3, apiservers=2)
    ports = [made.etcd_port, made.etcd_peer_port, made.apiserver_port, made.rest_port, made.scheduler_metrics_port,
             made.controller_manager_metrics_port, *(p for pair in made.etcd_more_ports + made.apiserver_ports
                                                     for p in pair)]
    assert len(ports) == 14 and len(set(ports)) == 14, ports


def test_traffic_addons_are_planned_and_can_be_left_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`up` runs the ingress controller on the first node's address on two ports of its own,
    and a network policy controller beside each kube-proxy; --no-ingress and
    --no-network-policy leave them out."""
    handed = iter(range(7000, 7100))
    monkeypatch.setattr(plans, "free_port", lambda: next(handed))
    monkeypatch.setattr(plans, "choose_subnet", lambda: "172.31.200.0/24")
    made = plans.new_plan(tmp_path, 2, "n", "10.88.0.0/16")
    ports = [made.etcd_port, made.etcd_peer_port, made.apiserver_port, made.rest_port, made.scheduler_metrics_port,
             made.controller_manager_metrics_port, made.dns_port, made.metrics_port, made.ingress_http_port,
             made.ingress_https_port]
    assert len(set(ports)) == 10 and made.ingress
    argv = plans.commands(made)
    assert argv["ingress-controller"][-6:] == ["--http-listen", f"172.31.200.1:{made.ingress_http_port}",
                                               "--https-listen", f"172.31.200.1:{made.ingress_https_port}",
                                               "--state-dir", str(tmp_path / "ingress")]
    assert "netpol" in argv["network-policy"] and "--node-name=n2" in argv["network-policy"]
    hosts = plans.new_plan(tmp_path, 2, "n", "10.88.0.0/16", hosts=True)
    argv = plans.commands(hosts)
    assert argv["ingress-controller"][:2] == ["nsenter", "--net=/run/netns/" + plans.netns_name("n1")]
    assert {"network-policy-n1", "network-policy-n2"} <= set(argv)
    bare = plans.new_plan(tmp_path, 2, "n", "10.88.0.0/16", ingress=False)
    bare.network_policy = False
    assert not {"ingress-controller", "network-policy"} & set(plans.commands(bare))
