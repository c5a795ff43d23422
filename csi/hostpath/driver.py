"""The driver's configuration and what its three services share: its state, one lock,
its node's topology."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from csi.hostpath.state import State
from protos.csi.v1 import csi_pb2

__all__ = ["Driver", "DriverConfig", "DRIVER_NAME", "TOPOLOGY_KEY", "VERSION", "GiB"]

GiB = 1 << 30
DRIVER_NAME = "hostpath.csi.kubeling.io"
# The label a node gets (through CSINode and the kubelet) and a volume's topology names:
# a volume lives on the node its directory is on.
TOPOLOGY_KEY = "topology.hostpath.csi.kubeling.io/node"
VERSION = "0.1.0"


@dataclass(frozen=True)
class DriverConfig:
    node_id: str  # the node this driver runs on (the kubelet's node name)
    state_dir: Path  # volumes, snapshots, state.json
    name: str = DRIVER_NAME
    capacity: int = 100 * GiB  # what all volumes of this node may add up to
    max_volume_size: int = 100 * GiB
    max_volumes_per_node: int = 0  # 0: no limit (CSINode's allocatable count stays unset)


class Driver:
    """One hostpath driver instance: the state its Identity, Controller and Node services share."""

    def __init__(self, config: DriverConfig) -> None:
        self.config = config
        self.version = VERSION
        self.state = State(config.state_dir)
        # One operation at a time: they are short, and the state file is rewritten whole.
        self.lock = asyncio.Lock()
        self.log = logging.LoggerAdapter(logging.getLogger("csi.hostpath"), {"node": config.node_id})

    def state_ready(self) -> bool:
        return self.state.volumes_dir.is_dir()

    def topology(self, node: str) -> csi_pb2.Topology:
        return csi_pb2.Topology(segments={TOPOLOGY_KEY: node})

    def in_topology(self, topology: csi_pb2.Topology) -> bool:
        value = topology.segments.get(TOPOLOGY_KEY)
        return value is None or value == self.config.node_id

    def serves_topology(self, requirement: csi_pb2.TopologyRequirement) -> bool:
        """Whether a volume may be made here: no requisite topology, or one that is this node."""
        return not requirement.requisite or any(self.in_topology(t) for t in requirement.requisite)
