"""Sandbox state, apart from the RPC handlers (containerd's sandbox store): one
checkpoint per sandbox, `<state>/sandboxes/<id>/sandbox.json`. A pod's metadata
(name, namespace, uid, attempt) is reserved while its sandbox exists, so the same
attempt cannot be started twice.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cri.checkpoints import Ambiguous, CheckpointStore, NameReserved, NotFound, plain_labels
from protos.runtime.v1 import api_pb2

__all__ = ["SandboxRecord", "SandboxStore", "NotFound", "Ambiguous", "NameReserved", "READY", "NOTREADY"]

READY = "ready"
NOTREADY = "notready"
CHECKPOINT = "sandbox.json"


def new_id() -> str:
    return secrets.token_hex(32)


def metadata_key(metadata: api_pb2.PodSandboxMetadata) -> str:
    """The name containerd reserves: one sandbox per pod attempt."""
    return f"{metadata.name}_{metadata.namespace}_{metadata.uid}_{metadata.attempt}"


@dataclass
class SandboxRecord:
    id: str
    config_b64: str  # the PodSandboxConfig as sent, so status returns it unaltered
    runtime_handler: str
    created_at: int
    state: str = READY
    netns: str = ""  # named network namespace; "" for host network
    ips: list[str] = field(default_factory=list)
    pause_pid: int = 0
    network_ready: bool = False  # CNI ADD done and not yet torn down

    @property
    def config(self) -> api_pb2.PodSandboxConfig:
        """Decoded once, then shared (the config never changes): treat it as read-only."""
        cached = self.__dict__.get("_config")
        if cached is None:
            cached = self.__dict__["_config"] = api_pb2.PodSandboxConfig.FromString(
                base64.b64decode(self.config_b64))
        return cached

    @property
    def labels(self) -> dict[str, str]:
        return plain_labels(self.__dict__, self.config.labels)

    @classmethod
    def create(cls, config: api_pb2.PodSandboxConfig, runtime_handler: str, created_at: int) -> SandboxRecord:
        return cls(id=new_id(), config_b64=base64.b64encode(config.SerializeToString()).decode(),
                   runtime_handler=runtime_handler, created_at=created_at)

    @property
    def name(self) -> str:
        return metadata_key(self.config.metadata)


class SandboxStore(CheckpointStore[SandboxRecord]):
    def __init__(self, root: Path) -> None:
        super().__init__(root, SandboxRecord, "pod sandbox", CHECKPOINT)

    def sandboxes(self) -> list[SandboxRecord]:
        return self.records()
