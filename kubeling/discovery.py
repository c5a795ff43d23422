"""discovery.k8s.io's well-known EndpointSlice labels, read and written by the apiserver,
the EndpointSlice controller, kube-proxy and the cluster DNS alike."""

from __future__ import annotations

__all__ = ["SERVICE_NAME_LABEL", "MANAGED_BY_LABEL"]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # the Service a slice belongs to
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"  # who writes it
