"""The kubeling scheduler (kube-scheduler's framework): not built yet, see the issues."""
