"""Container state, apart from the RPC handlers: one checkpoint per container
(`<state>/containers/<id>/container.json`); the shim's `exit.json` beside it says
how the container ended, so the state survives a server restart."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from cri.checkpoints import Ambiguous, CheckpointStore, NameReserved, NotFound, plain_labels
from cri.sandbox_store import new_id
from cri.shims import ExitInfo, read_exit
from protos.runtime.v1 import api_pb2

CHECKPOINT = "container.json"
__all__ = ["ContainerRecord", "ContainerStore", "NotFound", "Ambiguous", "NameReserved"]


@dataclass
class ContainerRecord:
    id: str
    sandbox_id: str
    config_b64: str
    image_id: str
    image_name: str
    created_at: int
    log_path: str
    started_at: int = 0
    pid: int = 0
    state_dir: str = ""
    # The identity its process runs with (ContainerStatus.user): uid, gid, supplementary groups.
    user: tuple[int, int, tuple[int, ...]] | None = None

    @classmethod
    def create(cls, sandbox_id: str, config: api_pb2.ContainerConfig, image_id: str, image_name: str,
               created_at: int, log_path: str) -> ContainerRecord:
        return cls(id=new_id(), sandbox_id=sandbox_id,
                   config_b64=base64.b64encode(config.SerializeToString()).decode(), image_id=image_id,
                   image_name=image_name, created_at=created_at, log_path=log_path)

    @property
    def config(self) -> api_pb2.ContainerConfig:
        """Decoded once, then shared: treat it as read-only and change it through set_config."""
        cached = self.__dict__.get("_config")
        if cached is None:
            cached = self.__dict__["_config"] = api_pb2.ContainerConfig.FromString(base64.b64decode(self.config_b64))
        return cached

    def set_config(self, config: api_pb2.ContainerConfig) -> None:
        self.config_b64 = base64.b64encode(config.SerializeToString()).decode()
        self.__dict__["_config"] = config
        self.__dict__.pop("_labels", None)

    @property
    def labels(self) -> dict[str, str]:
        return plain_labels(self.__dict__, self.config.labels)

    @property
    def name(self) -> str:
        metadata = self.config.metadata
        return f"{metadata.name}_{self.sandbox_id}_{metadata.attempt}"

    def exit(self) -> ExitInfo | None:
        """How the container ended (kept once known: an exit never changes), or None."""
        ended = self.__dict__.get("_exit")
        if ended is None and self.state_dir:
            ended = read_exit(Path(self.state_dir))
            if ended is not None:
                self.__dict__["_exit"] = ended
        return ended

    def state(self) -> api_pb2.ContainerState:
        if self.exit() is not None:
            return api_pb2.CONTAINER_EXITED
        return api_pb2.CONTAINER_RUNNING if self.started_at else api_pb2.CONTAINER_CREATED


class ContainerStore(CheckpointStore[ContainerRecord]):
    def __init__(self, root: Path) -> None:
        super().__init__(root, ContainerRecord, "container", CHECKPOINT)

    def containers(self) -> list[ContainerRecord]:
        return self.records()
