"""When the apiserver's compactor defragments a member: only when most of its file is free."""

from __future__ import annotations

from apiserver.storage.maintenance import Defragmenter, Maintenance, MemberStatus


def _status(size: int, in_use: int) -> MemberStatus:
    return MemberStatus("127.0.0.1:2379", 1, "3.4.23", size, in_use, 10, True, ())


def test_a_member_is_defragmented_only_when_enough_of_its_file_is_free() -> None:
    d = Defragmenter(["127.0.0.1:2379"], Maintenance(None), free_ratio=0.5, min_free_bytes=16 << 20)
    assert d.due(_status(64 << 20, 16 << 20))  # 48 MiB of 64 free
    assert not d.due(_status(64 << 20, 40 << 20))  # 24 MiB free: under half
    assert d.due(_status(20 << 20, 2 << 20))  # 18 MiB free: above the floor, most of the file
    assert not d.due(_status(8 << 20, 1 << 20))  # 7 MiB free: under the floor
    assert not Defragmenter([], Maintenance(None), free_ratio=0, min_free_bytes=0).due(_status(64 << 20, 0))
