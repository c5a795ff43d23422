"""NoExecute taint eviction, as upstream's pkg/controller/tainteviction: a pod on a node
with a NoExecute taint it does not tolerate is deleted at once; one that tolerates it for
`tolerationSeconds` is deleted that long after the taint was added (the taint's
`timeAdded`); a toleration without seconds keeps it there. Deleting is graceful: on a
node that is gone the pod stays Terminating until its kubelet returns, as upstream."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kubeling import errors
from kubeling.client import Client
from kubeling.events import EventRecorder
from kubeling.informer import INDEX_NODE_NAME, Informer
from kubeling.taints import tolerates
from protos.kubeling.v1 import core_pb2

__all__ = ["TaintEviction", "eviction_time"]

log = logging.getLogger(__name__)


def eviction_time(pod: core_pb2.Pod, taints: list[core_pb2.Taint]) -> float | None:
    """When the pod must go for these NoExecute taints (seconds since the epoch), or None."""
    when: float | None = None
    for taint in taints:
        added = taint.timeAdded.seconds + taint.timeAdded.nanos / 1e9
        matching = [t for t in pod.spec.tolerations if tolerates(t, taint)]
        if not matching:
            at = added
        else:
            seconds = [t.tolerationSeconds for t in matching if t.HasField("tolerationSeconds")]
            if len(seconds) < len(matching):
                continue  # one toleration without a limit: tolerated for good
            at = added + max(0, min(seconds))
        when = at if when is None else min(when, at)
    return when


@dataclass
class TaintEviction:
    client: Client
    nodes: Informer[core_pb2.Node]
    pods: Informer[core_pb2.Pod]
    recorder: EventRecorder

    async def sync(self) -> None:
        now = time.time()
        for node in self.nodes.store.list():
            taints = [t for t in node.spec.taints if t.effect == "NoExecute"]
            if not taints:
                continue
            for pod in self.pods.store.by_index(INDEX_NODE_NAME, node.metadata.name):
                if pod.metadata.HasField("deletionTimestamp") or pod.status.phase in ("Succeeded", "Failed"):
                    continue
                at = eviction_time(pod, taints)
                if at is not None and now >= at:
                    await self._evict(pod)

    async def _evict(self, pod: core_pb2.Pod) -> None:
        meta = pod.metadata
        log.info("pod %s/%s on %s: evicted for a NoExecute taint", meta.namespace, meta.name, pod.spec.nodeName)
        self.recorder.pod_event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {meta.namespace}/"
                                                                       f"{meta.name}")
        try:
            await self.client.pods.delete(meta.name, meta.namespace, uid=meta.uid)
        except (errors.NotFound, errors.Conflict):
            pass  # gone already, or another pod of that name now
