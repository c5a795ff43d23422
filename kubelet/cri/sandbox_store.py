"""Sandbox state, apart from the RPC handlers (containerd's sandbox store).

Each sandbox is checkpointed to `<state>/sandboxes/<id>/sandbox.json` whenever it
changes, so a restarted server finds its sandboxes again. Ids are 64 hex digits;
lookups also take a unique prefix, as crictl users type them. A pod's metadata
(name, namespace, uid, attempt) is reserved while its sandbox exists, so the same
attempt cannot be started twice.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)

READY = "ready"
NOTREADY = "notready"
CHECKPOINT = "sandbox.json"


class NotFound(KeyError):
    pass


class Ambiguous(KeyError):
    pass


class NameReserved(Exception):
    pass


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
        return api_pb2.PodSandboxConfig.FromString(base64.b64decode(self.config_b64))

    @classmethod
    def create(cls, config: api_pb2.PodSandboxConfig, runtime_handler: str, created_at: int) -> SandboxRecord:
        return cls(id=new_id(), config_b64=base64.b64encode(config.SerializeToString()).decode(),
                   runtime_handler=runtime_handler, created_at=created_at)

    @property
    def name(self) -> str:
        return metadata_key(self.config.metadata)


class SandboxStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._records: dict[str, SandboxRecord] = {}
        self._names: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        for directory in sorted(self.root.iterdir()):
            checkpoint = directory / CHECKPOINT
            if not checkpoint.exists():
                continue  # a sandbox that never finished starting: its directory is garbage
            try:
                data: dict[str, Any] = json.loads(checkpoint.read_text())
                record = SandboxRecord(**data)
                _ = record.config  # refuses a corrupt config now rather than at the first status call
            except (ValueError, TypeError) as exc:
                log.error("sandbox checkpoint %s is unreadable, ignoring it: %s", checkpoint, exc)
                continue
            self._records[record.id] = record
            self._names[record.name] = record.id

    def directory(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id

    def reserve(self, record: SandboxRecord) -> None:
        """Claim the pod attempt's name for this (not yet running) sandbox."""
        with self._lock:
            owner = self._names.get(record.name)
            if owner is not None and owner != record.id:
                raise NameReserved(f"sandbox name {record.name!r} is reserved for {owner}")
            self._names[record.name] = record.id

    def release(self, record: SandboxRecord) -> None:
        with self._lock:
            if self._names.get(record.name) == record.id:
                del self._names[record.name]

    def save(self, record: SandboxRecord) -> None:
        """Checkpoint the sandbox (atomically) and make it visible."""
        directory = self.directory(record.id)
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sandbox.", dir=directory)
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(record), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, directory / CHECKPOINT)
        with self._lock:
            self._records[record.id] = record
            self._names[record.name] = record.id

    def get(self, id_or_prefix: str) -> SandboxRecord:
        if not id_or_prefix:
            raise NotFound("pod sandbox id is empty")
        with self._lock:
            if id_or_prefix in self._records:
                return self._records[id_or_prefix]
            matches = [r for i, r in self._records.items() if i.startswith(id_or_prefix)]
        if not matches:
            raise NotFound(f"pod sandbox {id_or_prefix!r} not found")
        if len(matches) > 1:
            raise Ambiguous(f"pod sandbox id prefix {id_or_prefix!r} matches {len(matches)} sandboxes")
        return matches[0]

    def sandboxes(self) -> list[SandboxRecord]:
        with self._lock:
            return sorted(self._records.values(), key=lambda r: r.created_at)

    def delete(self, record: SandboxRecord) -> None:
        """Forget the sandbox and remove its directory (mounts must be gone by now)."""
        with self._lock:
            self._records.pop(record.id, None)
            if self._names.get(record.name) == record.id:
                del self._names[record.name]
        shutil.rmtree(self.directory(record.id), ignore_errors=True)
