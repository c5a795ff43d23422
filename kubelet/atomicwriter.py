"""Writing a volume's files all at once, as upstream's pkg/volume/util/atomic_writer:
the files live in a hidden directory `..<time>`, the symlink `..data` points at it, and
each visible name is a symlink through `..data`. An update writes a new directory and
swaps `..data` with one rename, so a reader sees the old set of files or the new one,
never a mix (a ConfigMap updated under a running pod)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_atomically", "DATA_DIR_LINK", "Payload"]

DATA_DIR_LINK = "..data"
_NEW_LINK = "..data_tmp"

Payload = Mapping[str, tuple[bytes, int]]  # relative path -> (content, mode)


def _current(target: Path) -> Path | None:
    try:
        return target / os.readlink(target / DATA_DIR_LINK)
    except OSError:
        return None


def _same(data_dir: Path, payload: Payload) -> bool:
    on_disk = {str(p.relative_to(data_dir)) for p in data_dir.rglob("*") if p.is_file()}
    if on_disk != set(payload):
        return False
    for rel, (content, mode) in payload.items():
        path = data_dir / rel
        if path.read_bytes() != content or path.stat().st_mode & 0o777 != mode & 0o777:
            return False
    return True


def _check(rel: str) -> None:
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or parts[0].startswith(".."):
        raise ValueError(f"invalid path {rel!r} in a volume payload")


def write_atomically(target: Path, payload: Payload) -> bool:
    """Make target's visible files exactly `payload`; False when they already were."""
    for rel in payload:
        _check(rel)
    target.mkdir(parents=True, exist_ok=True)
    old = _current(target)
    if old is not None and old.is_dir() and _same(old, payload):
        return False
    fresh = target / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.time_ns() % 10**9:09d}"
    fresh.mkdir()
    for rel, (content, mode) in payload.items():
        path = fresh / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o777)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(path, mode & 0o777)  # not narrowed by the umask
    for d in [p for p in fresh.rglob("*") if p.is_dir()] + [fresh]:
        d.chmod(0o755)
    new_link = target / _NEW_LINK
    new_link.unlink(missing_ok=True)
    new_link.symlink_to(fresh.name)
    os.replace(new_link, target / DATA_DIR_LINK)  # the one step readers can observe
    visible = {Path(rel).parts[0] for rel in payload}
    for name in visible:
        link = target / name
        if link.is_symlink():
            continue
        if link.is_dir():
            shutil.rmtree(link)  # a plain file or directory left by an older kubelet
        elif link.exists():
            link.unlink()
        link.symlink_to(f"{DATA_DIR_LINK}/{name}")
    for entry in target.iterdir():
        if entry.name.startswith("..") or entry.name in visible:
            continue
        if entry.is_symlink():
            entry.unlink()  # a key the new payload does not have
    if old is not None and old != fresh and old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    return True
