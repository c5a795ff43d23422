"""DefaultBinder: Bind through the apiserver's Pods.Bind."""

from __future__ import annotations

from typing import Any

from kubeling import errors
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import BindPlugin
from scheduler.framework.status import SUCCESS, Status

__all__ = ["DefaultBinder"]


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    async def bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
        if self.handle is None or self.handle.client is None:
            return Status.as_error("DefaultBinder has no apiserver client")
        try:
            await self.handle.client.pods.bind(pod.metadata.name, node_name, pod.metadata.namespace,
                                               uid=pod.metadata.uid)
        except errors.ApiError as err:
            return Status.as_error(err)
        return SUCCESS
