"""The versions kubeling reports: its own, and the Kubernetes API level it follows."""

from __future__ import annotations

__all__ = ["KUBELING_VERSION", "KUBERNETES_VERSION", "KUBELET_VERSION"]

KUBELING_VERSION = "0.1.0"
KUBERNETES_VERSION = "v1.32.0"  # the API semantics followed (and the minor kubectl is matched to)
KUBELET_VERSION = f"{KUBERNETES_VERSION}-kubeling.{KUBELING_VERSION}"
