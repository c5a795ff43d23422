"""Images built here for the e2e tests, as a developer's own: no registry outside is reachable."""

from __future__ import annotations

from pathlib import Path

from cri.images.archive import write_docker_archive

__all__ = ["docker_archive"]


def docker_archive(path: Path, name: str, files: dict[str, str] | None = None) -> None:
    """A `docker save NAME` archive of one static busybox (the host's busybox-static) and
    `files` (path -> text)."""
    write_docker_archive(path, name, {k: v.encode() for k, v in (files or {}).items()}, ("/bin/busybox",))
