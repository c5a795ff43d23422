"""kubeling.atomicfile: a file replaced whole, its directory made when missing, nothing
left behind when the write fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeling.atomicfile import replace_file


def test_replace_file(tmp_path: Path) -> None:
    target = tmp_path / "made" / "here" / "state.json"
    replace_file(target, b"one")
    replace_file(target, b"two")
    assert target.read_bytes() == b"two" and target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_a_failed_write_leaves_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    replace_file(target, b"old")
    with pytest.raises(TypeError):
        replace_file(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
