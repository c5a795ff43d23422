"""Image reference normalisation, as containerd's (docker/distribution) reference package."""

from __future__ import annotations

import pytest

from cri.images import reference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(("given", "normal"), [
    ("busybox", "docker.io/library/busybox:latest"),
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("library/busybox", "docker.io/library/busybox:latest"),
    ("docker.io/busybox", "docker.io/library/busybox:latest"),
    ("index.docker.io/library/busybox:1", "docker.io/library/busybox:1"),
    ("someone/app", "docker.io/someone/app:latest"),
    ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
    ("localhost/app", "localhost/app:latest"),
    ("localhost:5000/team/app:v1", "localhost:5000/team/app:v1"),
    ("127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"),
    (f"busybox@{DIGEST}", f"docker.io/library/busybox@{DIGEST}"),
    (f"quay.io/a/b:v2@{DIGEST}", f"quay.io/a/b:v2@{DIGEST}"),
])
def test_normalize(given: str, normal: str) -> None:
    assert reference.normalize(given) == normal


@pytest.mark.parametrize("bad", ["", " busybox", "Busybox", "busybox:", "busybox@sha256:abc",
                                 "a//b", "busybox:bad tag", "-x/y"])
def test_invalid_references_name_the_problem(bad: str) -> None:
    with pytest.raises(reference.InvalidReference, match="invalid image reference"):
        reference.parse(bad)


def test_repo_digest_form() -> None:
    ref = reference.parse("localhost:5000/app:v1")
    assert ref.repository == "localhost:5000/app"
    assert ref.with_digest(DIGEST) == f"localhost:5000/app@{DIGEST}"


def test_image_ids() -> None:
    assert reference.is_image_id(DIGEST)
    assert not reference.is_image_id("busybox")
    assert not reference.is_image_id("sha256:abc")
