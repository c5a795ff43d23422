"""DefaultBinder: Bind through the apiserver's Pods.Bind (with the attempt's recorded
results as the Binding's annotations, which the apiserver copies onto the pod)."""

from __future__ import annotations

from typing import Any

from kubeling import errors
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import BindPlugin
from scheduler.framework.results import on_pod
from scheduler.framework.status import SUCCESS, Status

__all__ = ["DefaultBinder"]


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    async def bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
        if self.handle is None or self.handle.client is None:
            return Status.as_error("DefaultBinder has no apiserver client")
        try:
            # A recorded attempt's results go on the pod with the binding (one write).
            await self.handle.client.pods.bind(pod.metadata.name, node_name, pod.metadata.namespace,
                                               uid=pod.metadata.uid, annotations=on_pod(state.results))
        except errors.ApiError as err:
            return Status.as_error(err)
        return SUCCESS
