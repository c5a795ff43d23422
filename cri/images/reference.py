"""Image references, normalised as containerd (docker/distribution reference) does.

`busybox` -> `docker.io/library/busybox:latest`; `quay.io/x/y` -> `quay.io/x/y:latest`;
`name@sha256:...` keeps its digest and gets no default tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
OFFICIAL_REPO_PREFIX = "library/"
DEFAULT_TAG = "latest"

_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$")
_SHA256 = re.compile(r"^sha256:[a-f0-9]{64}$")
_DOMAIN = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?$"
                     r"|^\[[0-9a-fA-F:]+\](?::[0-9]+)?$")


class InvalidReference(ValueError):
    """The string is not an image reference."""


@dataclass(frozen=True)
class Reference:
    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}"

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    def with_digest(self, digest: str) -> str:
        """`repo@digest`: the form an image is listed under in repo_digests."""
        return f"{self.repository}@{digest}"


def is_image_id(value: str) -> bool:
    """A full image id (`sha256:<64 hex>`), as CRI clients pass back image ids."""
    return bool(_SHA256.match(value))


def parse(value: str) -> Reference:
    """Parse and normalise a reference; raise InvalidReference naming what is wrong."""
    if not value or value != value.strip():
        raise InvalidReference(f"invalid image reference {value!r}: empty or padded with spaces")
    rest, digest = value, ""
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.match(digest):
            raise InvalidReference(f"invalid image reference {value!r}: bad digest {digest!r}")
    tag = ""
    # A ':' after the last '/' is a tag; one before it belongs to a registry port.
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            raise InvalidReference(f"invalid image reference {value!r}: bad tag {tag!r}")
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        domain, path = first, remainder
        if not _DOMAIN.match(domain):
            raise InvalidReference(f"invalid image reference {value!r}: bad registry {domain!r}")
    else:
        domain, path = DEFAULT_DOMAIN, rest
    if domain == LEGACY_DEFAULT_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = OFFICIAL_REPO_PREFIX + path
    for component in path.split("/"):
        if not _PATH_COMPONENT.match(component):
            raise InvalidReference(
                f"invalid image reference {value!r}: repository name must be lowercase "
                f"alphanumerics separated by '.', '_', '__' or '-' (got {component!r})")
    if not tag and not digest:
        tag = DEFAULT_TAG
    return Reference(domain=domain, path=path, tag=tag, digest=digest)


def normalize(value: str) -> str:
    return str(parse(value))
