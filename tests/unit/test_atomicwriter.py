"""The kubelet's atomic volume writer (upstream's AtomicWriter): visible names are links
through `..data`, an update swaps the whole set, removed keys disappear, old plain files
from an earlier kubelet are replaced, and nothing outside the volume can be named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelet.atomicwriter import DATA_DIR_LINK, write_atomically


def test_an_update_swaps_the_whole_set(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    assert write_atomically(target, {"mode": (b"fast", 0o644), "nested/key": (b"x", 0o400)})
    first = os.readlink(target / DATA_DIR_LINK)
    assert (target / "mode").read_bytes() == b"fast" and os.readlink(target / "mode") == "..data/mode"
    assert (target / "nested" / "key").stat().st_mode & 0o777 == 0o400
    assert not write_atomically(target, {"mode": (b"fast", 0o644), "nested/key": (b"x", 0o400)})  # unchanged
    assert write_atomically(target, {"mode": (b"slow", 0o644), "extra": (b"1", 0o644)})
    assert os.readlink(target / DATA_DIR_LINK) != first and not (target / first).exists()
    assert (target / "mode").read_bytes() == b"slow" and (target / "extra").read_bytes() == b"1"
    assert not (target / "nested").exists()  # a key the new payload lacks is gone
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith("..")) == ["extra", "mode"]


def test_plain_files_of_an_older_kubelet_are_replaced(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    target.mkdir()
    (target / "token").write_text("old")
    write_atomically(target, {"token": (b"new", 0o644)})
    assert (target / "token").is_symlink() and (target / "token").read_text() == "new"


@pytest.mark.parametrize("bad", ["/etc/passwd", "../escape", "..data/x", ""])
def test_paths_outside_the_volume_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid path"):
        write_atomically(tmp_path / "vol", {bad: (b"x", 0o644)})
