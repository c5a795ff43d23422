"""Images built here for the e2e tests, as a developer's own: no registry outside is reachable."""

from __future__ import annotations

from pathlib import Path

from cri.images.archive import write_docker_archive

__all__ = ["docker_archive", "one_per_node"]


def docker_archive(path: Path, name: str, files: dict[str, str] | None = None) -> None:
    """A `docker save NAME` archive of one static busybox (the host's busybox-static) and
    `files` (path -> text)."""
    write_docker_archive(path, name, {k: v.encode() for k, v in (files or {}).items()}, ("/bin/busybox",))


def one_per_node(name: str, image: str, replicas: int = 2) -> str:
    """A Deployment of `image` with one pod per node (required anti-affinity on the
    hostname), each printing the image's /msg and staying up: to see an image reach
    every node."""
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {{labelSelector: {{matchLabels: {{app: {name}}}}}, topologyKey: kubernetes.io/hostname}}
      containers:
      - {{name: app, image: "{image}", command: [/bin/busybox, sh, -c, "cat /msg; exec /bin/busybox sleep 3600"]}}
"""
