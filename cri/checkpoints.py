"""Checkpointed records (sandboxes, containers) apart from the RPC handlers.

Each record is written atomically to `<root>/<id>/<checkpoint file>` whenever it
changes and read back at start, so a restarted server finds its sandboxes and
containers again. Ids are 64 hex digits; lookups also take a unique prefix, as
crictl users type them. A record's name (the pod attempt, or the container in
its sandbox) is reserved while the record exists.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from kubeling.atomicfile import replace_file

log = logging.getLogger(__name__)


class NotFound(KeyError):
    pass


class Ambiguous(KeyError):
    pass


class NameReserved(Exception):
    pass


def plain_labels(cache: dict[str, Any], labels: Mapping[str, str]) -> dict[str, str]:
    """A record's config labels as a plain dict, kept in its `cache` (the record's
    __dict__): list filters test them on every record."""
    plain = cache.get("_labels")
    if plain is None:
        plain = cache["_labels"] = dict(labels)
    return plain


class Record(Protocol):
    id: str
    created_at: int

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> Any: ...


R = TypeVar("R", bound=Record)


class CheckpointStore(Generic[R]):
    def __init__(self, root: Path, record_type: type[R], kind: str, checkpoint: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.kind, self.checkpoint = kind, checkpoint
        self._lock = threading.Lock()
        self._records: dict[str, R] = {}
        self._names: dict[str, str] = {}
        for directory in sorted(self.root.iterdir()):
            path = directory / checkpoint
            if not path.exists():
                continue  # never finished being created: its directory is garbage
            try:
                data: dict[str, Any] = json.loads(path.read_text())
                record = record_type(**data)
                _ = record.config  # refuse a corrupt config now, not at the first status call
            except (ValueError, TypeError) as exc:
                log.error("%s checkpoint %s is unreadable, ignoring it: %s", kind, path, exc)
                continue
            self._records[record.id] = record
            self._names[record.name] = record.id

    def directory(self, record_id: str) -> Path:
        return self.root / record_id

    def reserve(self, record: R) -> None:
        """Claim the record's name before anything is created for it."""
        with self._lock:
            owner = self._names.get(record.name)
            if owner is not None and owner != record.id:
                raise NameReserved(f"{self.kind} name {record.name!r} is reserved for {owner}")
            self._names[record.name] = record.id

    def release(self, record: R) -> None:
        with self._lock:
            if self._names.get(record.name) == record.id:
                del self._names[record.name]

    def save(self, record: R) -> None:
        """Checkpoint the record (atomically) and make it visible."""
        # Written whole, then renamed: a server that crashes leaves the old or the new
        # checkpoint, never half of one. No fsync: what the checkpoints describe (runc
        # state on tmpfs, the processes) does not survive a reboot either, and an fsync
        # per save stalled the event loop for every other request under load.
        replace_file(self.directory(record.id) / self.checkpoint,
                     json.dumps(asdict(record)).encode())  # type: ignore[call-overload]
        with self._lock:
            self._records[record.id] = record
            self._names[record.name] = record.id

    def get(self, id_or_prefix: str) -> R:
        if not id_or_prefix:
            raise NotFound(f"{self.kind} id is empty")
        with self._lock:
            if id_or_prefix in self._records:
                return self._records[id_or_prefix]
            matches = [r for i, r in self._records.items() if i.startswith(id_or_prefix)]
        if not matches:
            raise NotFound(f"{self.kind} {id_or_prefix!r} not found")
        if len(matches) > 1:
            raise Ambiguous(f"{self.kind} id prefix {id_or_prefix!r} matches {len(matches)} records")
        return matches[0]

    def records(self) -> list[R]:
        with self._lock:
            return sorted(self._records.values(), key=lambda r: r.created_at)

    def delete(self, record: R) -> None:
        """Forget the record and remove its directory (its mounts must be gone by now)."""
        with self._lock:
            self._records.pop(record.id, None)
            if self._names.get(record.name) == record.id:
                del self._names[record.name]
        shutil.rmtree(self.directory(record.id), ignore_errors=True)
