"""`kubeling image load`'s sources: what each command-line argument is read as (an OCI
archive or layout, a `docker save` archive image by image, a Docker engine's image), and
bad input refused with one line naming it."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from cluster.images import LoadError, sources


def _tar(path: Path, **members: bytes) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def test_each_kind_of_source(tmp_path: Path) -> None:
    oci = _tar(tmp_path / "oci.tar", **{"oci-layout": b"{}", "index.json": b"{}"})
    assert sources(str(oci)) == [(f"oci-archive:{oci}", "")]
    saved = _tar(tmp_path / "saved.tar", **{"manifest.json": json.dumps(
        [{"RepoTags": ["a:1", "b:2"]}, {"RepoTags": ["c:3"]}]).encode()})
    assert sources(str(saved)) == [(f"docker-archive:{saved}:{t}", t) for t in ("a:1", "b:2", "c:3")]
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "oci-layout").write_text("{}")
    assert sources(str(layout)) == [(f"oci:{layout}", "")]
    assert sources("myapp") == [("docker-daemon:myapp:latest", "myapp")]
    assert sources("localhost:5000/team/app:2") == [("docker-daemon:localhost:5000/team/app:2",
                                                     "localhost:5000/team/app:2")]


def test_bad_sources_say_what_is_wrong(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(LoadError, match=r"notes.txt: not an image archive \(not a tar file\)$"):
        sources(str(text))
    other = _tar(tmp_path / "other.tar", **{"readme": b"x"})
    with pytest.raises(LoadError, match="neither oci-layout nor manifest.json"):
        sources(str(other))
    untagged = _tar(tmp_path / "untagged.tar", **{"manifest.json": b'[{"RepoTags": null}]'})
    with pytest.raises(LoadError, match="its images have no names"):
        sources(str(untagged))
    with pytest.raises(LoadError, match="a directory that is no OCI image layout"):
        sources(str(tmp_path))
    with pytest.raises(LoadError, match="no such file or directory"):
        sources("./missing.tar")
