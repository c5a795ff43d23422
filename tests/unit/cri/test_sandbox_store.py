"""Sandbox checkpoints: saved atomically, found again after a restart, names reserved per attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from cri.sandbox_store import (
    CHECKPOINT,
    NOTREADY,
    Ambiguous,
    NameReserved,
    NotFound,
    SandboxRecord,
    SandboxStore,
)
from protos.runtime.v1 import api_pb2


def config(name: str = "web", attempt: int = 0) -> api_pb2.PodSandboxConfig:
    return api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}", attempt=attempt),
        hostname=name, labels={"app": name}, annotations={"note": "kept as sent"})


def test_save_and_reload(tmp_path: Path) -> None:
    store = SandboxStore(tmp_path)
    record = SandboxRecord.create(config(), "", created_at=1)
    store.reserve(record)
    record.netns, record.ips, record.pause_pid = "cni-x", ["10.0.0.2"], 99
    store.save(record)
    record.state = NOTREADY
    store.save(record)
    again = SandboxStore(tmp_path)
    [loaded] = again.sandboxes()
    assert loaded == record
    assert loaded.config == config()
    assert again.get(record.id[:6]) == loaded
    with pytest.raises(NameReserved):  # the reservation survives the restart
        again.reserve(SandboxRecord.create(config(), "", created_at=2))


def test_names_are_reserved_per_attempt(tmp_path: Path) -> None:
    store = SandboxStore(tmp_path)
    first = SandboxRecord.create(config(), "", created_at=1)
    store.reserve(first)
    store.reserve(first)  # the owner may reserve again
    with pytest.raises(NameReserved, match="web_default_uid-web_0"):
        store.reserve(SandboxRecord.create(config(), "", created_at=2))
    store.reserve(SandboxRecord.create(config(attempt=1), "", created_at=3))
    store.release(first)
    store.reserve(SandboxRecord.create(config(), "", created_at=4))


def test_lookup_errors(tmp_path: Path) -> None:
    store = SandboxStore(tmp_path)
    with pytest.raises(NotFound, match="empty"):
        store.get("")
    with pytest.raises(NotFound, match="abc"):
        store.get("abc")
    records = [SandboxRecord.create(config(f"p{i}"), "", created_at=i) for i in range(20)]
    for record in records:
        store.save(record)
    with pytest.raises(Ambiguous):
        store.get(_common_prefix(records))


def _common_prefix(records: list[SandboxRecord]) -> str:
    # 20 random ids: some two share a first hex digit.
    seen: dict[str, str] = {}
    for record in records:
        if record.id[0] in seen:
            return record.id[0]
        seen[record.id[0]] = record.id
    raise AssertionError("20 ids with 16 possible first digits always collide")


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    store = SandboxStore(tmp_path)
    record = SandboxRecord.create(config(), "", created_at=1)
    store.save(record)
    (store.directory(record.id) / "hosts").write_text("x")
    store.delete(record)
    assert not store.directory(record.id).exists()
    assert store.sandboxes() == []
    store.reserve(SandboxRecord.create(config(), "", created_at=2))  # the name is free again


def test_half_started_and_corrupt_checkpoints_are_skipped(tmp_path: Path) -> None:
    store = SandboxStore(tmp_path)
    good = SandboxRecord.create(config(), "", created_at=1)
    store.save(good)
    (tmp_path / "half-started").mkdir()
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / CHECKPOINT).write_text("{not json")
    assert [r.id for r in SandboxStore(tmp_path).sandboxes()] == [good.id]
