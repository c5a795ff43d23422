"""Labels and annotations the kubelet puts on CRI sandboxes and containers, with
upstream's keys (pkg/kubelet/types/labels.go, kuberuntime/labels.go), so that the
kubelet finds its pods again in the runtime after a restart."""

from __future__ import annotations

__all__ = ["POD_NAME", "POD_NAMESPACE", "POD_UID", "CONTAINER_NAME", "RESTART_COUNT", "CONTAINER_HASH",
           "TERMINATION_GRACE", "POD_DELETION_GRACE", "CONTAINER_TYPE", "INIT", "APP", "TERMINATION_MESSAGE_PATH",
           "TERMINATION_MESSAGE_POLICY", "RESTART_POLICY"]

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
# annotations
RESTART_COUNT = "io.kubernetes.container.restartCount"
CONTAINER_HASH = "io.kubernetes.container.hash"
TERMINATION_GRACE = "io.kubernetes.pod.terminationGracePeriod"
POD_DELETION_GRACE = "io.kubernetes.pod.deletionGracePeriod"
TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
# kubeling's own: an init container's restartPolicy (Always: a sidecar), so that a restarted
# kubelet knows it without the spec at hand
RESTART_POLICY = "io.kubeling.container.restartPolicy"
# kubeling's own: whether a container is an init container (upstream keeps this in its
# in-memory pod spec; the label lets a restarted kubelet tell them apart too)
CONTAINER_TYPE = "io.kubeling.container.type"
INIT = "init"
APP = "app"
