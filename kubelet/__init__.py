"""The kubelet: node agent and its CRI runtime."""
