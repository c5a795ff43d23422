"""Recording Events about pods from any component (client-go's event recorder, without
its aggregation): written in the background, so the caller never waits, and a
failed write is only logged (Events are best-effort, as upstream)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["EventRecorder", "NORMAL", "WARNING"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    def __init__(self, client: Client, component: str, host: str = "", instance: str = "") -> None:
        self.client = client
        self.component = component
        self.host = host
        self.instance = instance or host
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a background write; `flush` waits for all of them."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def pod_event(self, pod: Any, kind: str, reason: str, message: str, *, action: str = "",
                  field_path: str = "") -> None:
        self.spawn(self._write(pod, kind, reason, message, action, field_path, ("v1", "Pod")))

    def object_event(self, obj: Any, api_version: str, object_kind: str, kind: str, reason: str,
                     message: str) -> None:
        """An event about any object (a ReplicaSet's SuccessfulCreate, a Deployment's ScalingReplicaSet)."""
        self.spawn(self._write(obj, kind, reason, message, "", "", (api_version, object_kind)))

    async def _write(self, pod: Any, kind: str, reason: str, message: str, action: str, field_path: str,
                     involved: tuple[str, str]) -> None:
        now = core_pb2.Event().lastTimestamp
        now.GetCurrentTime()
        now.nanos = 0
        m = pod.metadata
        ev = core_pb2.Event(
            # a cluster-scoped object's events go to "default", as upstream's recorder puts them
            metadata=meta_pb2.ObjectMeta(name=f"{m.name}.{time.time_ns():x}", namespace=m.namespace or "default"),
            involvedObject=meta_pb2.ObjectReference(kind=involved[1], namespace=m.namespace, name=m.name, uid=m.uid,
                                                    apiVersion=involved[0], fieldPath=field_path),
            reason=reason, message=message[:4096], type=kind,
            source=core_pb2.EventSource(component=self.component, host=self.host),
            reportingComponent=self.component, reportingInstance=self.instance, action=action or reason,
            firstTimestamp=now, lastTimestamp=now, count=1)
        try:
            await self.client.events.create(ev)
        except errors.ApiError as err:
            log.debug("event %s for %s/%s not recorded: %s", reason, m.namespace, m.name, err.message)
