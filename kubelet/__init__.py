"""The kubeling kubelet (agent + CRI runtime on runc): not built yet, see the issues."""
