"""Container state, apart from the RPC handlers: one checkpoint per container
(`<state>/containers/<id>/container.json`); the shim's `exit.json` beside it says
how the container ended, so the state survives a server restart."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubelet.cri.sandbox_store import Ambiguous, NameReserved, NotFound, new_id
from kubelet.cri.shims import ExitInfo, read_exit
from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)

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

    @classmethod
    def create(cls, sandbox_id: str, config: api_pb2.ContainerConfig, image_id: str, image_name: str,
               created_at: int, log_path: str) -> ContainerRecord:
        return cls(id=new_id(), sandbox_id=sandbox_id,
                   config_b64=base64.b64encode(config.SerializeToString()).decode(), image_id=image_id,
                   image_name=image_name, created_at=created_at, log_path=log_path)

    @property
    def config(self) -> api_pb2.ContainerConfig:
        return api_pb2.ContainerConfig.FromString(base64.b64decode(self.config_b64))

    def set_config(self, config: api_pb2.ContainerConfig) -> None:
        self.config_b64 = base64.b64encode(config.SerializeToString()).decode()

    @property
    def name(self) -> str:
        metadata = self.config.metadata
        return f"{metadata.name}_{self.sandbox_id}_{metadata.attempt}"

    def exit(self) -> ExitInfo | None:
        return read_exit(Path(self.state_dir)) if self.state_dir else None

    def state(self) -> api_pb2.ContainerState:
        if self.exit() is not None:
            return api_pb2.CONTAINER_EXITED
        return api_pb2.CONTAINER_RUNNING if self.started_at else api_pb2.CONTAINER_CREATED


class ContainerStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._records: dict[str, ContainerRecord] = {}
        self._names: dict[str, str] = {}
        for directory in sorted(self.root.iterdir()):
            checkpoint = directory / CHECKPOINT
            if not checkpoint.exists():
                continue
            try:
                data: dict[str, Any] = json.loads(checkpoint.read_text())
                record = ContainerRecord(**data)
                _ = record.config
            except (ValueError, TypeError) as exc:
                log.error("container checkpoint %s is unreadable, ignoring it: %s", checkpoint, exc)
                continue
            self._records[record.id] = record
            self._names[record.name] = record.id

    def directory(self, container_id: str) -> Path:
        return self.root / container_id

    def reserve(self, record: ContainerRecord) -> None:
        with self._lock:
            owner = self._names.get(record.name)
            if owner is not None and owner != record.id:
                raise NameReserved(f"container name {record.name!r} is reserved for {owner}")
            self._names[record.name] = record.id

    def save(self, record: ContainerRecord) -> None:
        directory = self.directory(record.id)
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".container.", dir=directory)
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(record), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, directory / CHECKPOINT)
        with self._lock:
            self._records[record.id] = record
            self._names[record.name] = record.id

    def get(self, id_or_prefix: str) -> ContainerRecord:
        if not id_or_prefix:
            raise NotFound("container id is empty")
        with self._lock:
            if id_or_prefix in self._records:
                return self._records[id_or_prefix]
            matches = [r for i, r in self._records.items() if i.startswith(id_or_prefix)]
        if not matches:
            raise NotFound(f"container {id_or_prefix!r} not found")
        if len(matches) > 1:
            raise Ambiguous(f"container id prefix {id_or_prefix!r} matches {len(matches)} containers")
        return matches[0]

    def containers(self) -> list[ContainerRecord]:
        with self._lock:
            return sorted(self._records.values(), key=lambda r: r.created_at)

    def delete(self, record: ContainerRecord) -> None:
        with self._lock:
            self._records.pop(record.id, None)
            if self._names.get(record.name) == record.id:
                del self._names[record.name]
        shutil.rmtree(self.directory(record.id), ignore_errors=True)
