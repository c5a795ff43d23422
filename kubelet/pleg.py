"""The pod lifecycle event generator (pkg/kubelet/pleg/generic.go): relist the runtime
every period, compare each container's and sandbox's state with the last relist, and
wake the pod's worker when something changed (started, died, removed) — so a
container that exits is noticed within a period even though no API object changed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kubelet import labels
from kubelet.runtime import CRICallError, Runtime
from kubeling.periodic import Periodic
from protos.runtime.v1 import api_pb2

__all__ = ["PLEG", "RuntimeSnapshot"]

log = logging.getLogger(__name__)


@dataclass
class RuntimeSnapshot:
    """What one relist saw: pod UID -> {sandbox or container id: state}, plus names."""

    states: dict[str, dict[str, int]] = field(default_factory=dict)
    pod_names: dict[str, tuple[str, str]] = field(default_factory=dict)  # uid -> (namespace, name)
    sandboxes: dict[str, list[api_pb2.PodSandbox]] = field(default_factory=dict)
    containers: dict[str, list[api_pb2.Container]] = field(default_factory=dict)


@dataclass
class PLEG:
    runtime: Runtime
    on_event: Callable[[str, dict[str, int]], None]  # (pod uid, its sandboxes' and containers' states now)
    period: float = 1.0
    last: RuntimeSnapshot | None = None
    _loop: Periodic | None = None

    def start(self) -> None:
        self._loop = Periodic("pleg", self.period, self.relist)
        self._loop.start()

    async def stop(self) -> None:
        if self._loop is not None:
            await self._loop.stop()

    async def snapshot(self) -> RuntimeSnapshot:
        snap = RuntimeSnapshot()
        for sandbox in await self.runtime.list_sandboxes():
            uid = sandbox.labels.get(labels.POD_UID, "")
            if not uid:
                continue  # not made by a kubelet
            snap.states.setdefault(uid, {})[sandbox.id] = 100 + sandbox.state
            snap.pod_names[uid] = (sandbox.metadata.namespace, sandbox.metadata.name)
            snap.sandboxes.setdefault(uid, []).append(sandbox)
        for container in await self.runtime.list_containers():
            uid = container.labels.get(labels.POD_UID, "")
            if uid:
                snap.states.setdefault(uid, {})[container.id] = container.state
                snap.containers.setdefault(uid, []).append(container)
        return snap

    async def relist(self) -> None:
        try:
            snap = await self.snapshot()
        except CRICallError as exc:
            log.warning("PLEG relist failed: %s", exc)
            return
        previous, self.last = self.last, snap
        if previous is None:
            return
        for uid in snap.states.keys() | previous.states.keys():
            before, after = previous.states.get(uid, {}), snap.states.get(uid, {})
            if before != after:
                self.on_event(uid, after)
