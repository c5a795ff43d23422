"""`kubeling up --node-monitor-grace-period G` gives its kubelets heartbeats that fit in G,
in upstream's ratio (a Lease renewed and the status computed every 10 s for a 40 s grace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import plan as plans
from kubelet.__main__ import build_parser
from kubelet.config import from_command_line as make_config


@pytest.mark.parametrize("grace, lease, status", [(40.0, 40, 10.0), (4.0, 4, 1.0), (300.0, 40, 10.0),
                                                  (1.0, 1, 0.25)])
def test_kubelets_heartbeat_four_times_per_grace_period(tmp_path: Path, grace: float, lease: int,
                                                        status: float) -> None:
    made = plans.new_plan(tmp_path, 2, "n", "10.88.0.0/16")
    made.node_monitor_grace_period = grace
    command = plans.commands(made)["kubelet-n1"]
    args = build_parser().parse_args(command[command.index("kubelet") + 1:])
    config = make_config(args)  # what the kubelet runs with: from its command line, as `up` starts it
    assert (config.node_lease_duration_seconds, config.node_status_update_frequency) == (lease, status)
    assert config.node_lease_duration_seconds / 4 <= grace / 4 and config.node_status_update_frequency <= grace / 4
