"""Cluster DNS: names for Services and pods under the cluster domain (Kubernetes' DNS spec)."""
