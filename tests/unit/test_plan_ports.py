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
