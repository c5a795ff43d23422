"""The scheduler's cache: NodeInfo per node from informer events, plus assumed pods.

A pod is assumed on its node when Reserve passes, so the next cycle sees it at once;
the informer later confirms it (the bound pod arrives), a failed bind forgets it, and an
assumption never confirmed expires `ttl` seconds after its binding finished. Snapshots
are updated incrementally: only nodes changed since the last one are copied.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from protos.kubeling.v1.core_pb2 import Node, Pod
from scheduler.framework.helpers import normalized_image_name
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.types import ImageStateSummary, NodeInfo, PodInfo

__all__ = ["Cache", "Snapshot"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool = False
    deadline: float | None = None  # set when binding finished; None: not expiring yet


class Snapshot:
    """The cluster as one scheduling cycle sees it (NodeInfo copies)."""

    def __init__(self) -> None:
        self.infos: dict[str, NodeInfo] = {}
        self.node_list: list[NodeInfo] = []
        self.index: dict[str, int] = {}  # node name -> position in node_list
        self.table = NodeTable()  # the same nodes as columns (row i = node_list[i])
        self.generation = 0

    def node_infos(self) -> list[NodeInfo]:
        return self.node_list

    def get(self, name: str) -> NodeInfo | None:
        return self.infos.get(name)


class Cache:
    def __init__(self, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, _PodState] = {}  # by uid
        self.images: dict[str, ImageStateSummary] = {}
        self._image_nodes: dict[str, set[str]] = {}
        self._generation = 0
        self._dirty: set[str] = set()
        self._membership_changed = True

    # ------------------------------------------------------------ helpers

    def _touch(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo()  # pods may arrive before their node
            self._membership_changed = True
        self._generation += 1
        info.generation = self._generation
        self._dirty.add(name)
        return info

    def _set_images(self, name: str, node: Node | None) -> None:
        for image, holders in list(self._image_nodes.items()):
            if name in holders:
                holders.discard(name)
                summary = self.images[image]
                summary.num_nodes = len(holders)
                if not holders:
                    del self._image_nodes[image]
                    del self.images[image]
        states: dict[str, ImageStateSummary] = {}
        if node is not None:
            for img in node.status.images:
                for raw in img.names:
                    image = normalized_image_name(raw)
                    holders = self._image_nodes.setdefault(image, set())
                    holders.add(name)
                    summary = self.images.get(image) or ImageStateSummary(img.sizeBytes, 0)
                    self.images[image] = summary
                    summary.num_nodes = len(holders)
                    states[image] = summary  # shared: spread counts stay current
        self.nodes[name].image_states = states

    # ------------------------------------------------------------ nodes

    def add_node(self, node: Node) -> None:
        name = node.metadata.name
        info = self._touch(name)
        if info.node is None:
            self._membership_changed = True
        info.set_node(node)
        self._set_images(name, node)

    update_node = add_node

    def remove_node(self, node: Node) -> None:
        name = node.metadata.name
        info = self.nodes.get(name)
        if info is None:
            return
        self._set_images(name, None)
        if info.pods:
            # pods still reference it: keep a node-less entry until they go (upstream too)
            info.node = None
            info.name = name
            self._touch(name)
        else:
            del self.nodes[name]
            self._dirty.add(name)
        self._membership_changed = True

    # ------------------------------------------------------------ pods

    def assume_pod(self, info: PodInfo, node: str) -> None:
        uid = info.uid
        if uid in self.pods:
            raise ValueError(f"pod {info.key} is in the cache already; cannot be assumed")
        self._touch(node).add_pod(info)
        self.pods[uid] = _PodState(info, node, assumed=True)

    def finish_binding(self, uid: str) -> None:
        state = self.pods.get(uid)
        if state is not None and state.assumed:
            state.deadline = self.clock() + self.ttl

    def forget_pod(self, uid: str) -> None:
        state = self.pods.get(uid)
        if state is None or not state.assumed:
            return
        self._remove(uid, state)

    def is_assumed(self, uid: str) -> bool:
        state = self.pods.get(uid)
        return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> None:
        """A pod the informer shows bound: confirms an assumption, or is added."""
        uid, node = str(pod.metadata.uid), pod.spec.nodeName
        state = self.pods.get(uid)
        info = None
        if state is not None:
            # Confirmed (perhaps elsewhere than assumed, if another scheduler bound it).
            self._remove(uid, state)
            if state.assumed:
                # What the scheduler derived from the assumed pod holds for the bound one: a
                # pod's requests, ports and affinity cannot change (only nodeName moved).
                info = dataclasses.replace(state.info, pod=pod)
        if info is None:
            info = PodInfo.of(pod)
        self._touch(node).add_pod(info)
        self.pods[uid] = _PodState(info, node)

    def update_pod(self, old: Pod, new: Pod) -> None:
        self.add_pod(new)

    def remove_pod(self, pod: Pod) -> None:
        uid = str(pod.metadata.uid)
        state = self.pods.get(uid)
        if state is not None:
            self._remove(uid, state)

    def _remove(self, uid: str, state: _PodState) -> None:
        del self.pods[uid]
        info = self.nodes.get(state.node)
        if info is None:
            return
        self._touch(state.node).remove_pod(uid)
        if info.node is None and not info.pods:
            del self.nodes[state.node]
            self._membership_changed = True

    def cleanup_expired(self) -> list[str]:
        """Drop assumed pods whose binding finished more than ttl ago and never showed up."""
        now = self.clock()
        expired = [uid for uid, s in self.pods.items() if s.assumed and s.deadline is not None and s.deadline < now]
        for uid in expired:
            log.warning("assumed pod %s expired: its binding was never confirmed", self.pods[uid].info.key)
            self._remove(uid, self.pods[uid])
        return expired

    # ------------------------------------------------------------ snapshot

    def update_snapshot(self, snap: Snapshot) -> None:
        """Copy only the nodes changed since the last update (the dirty set)."""
        for name in self._dirty:
            info = self.nodes.get(name)
            if info is None:
                snap.infos.pop(name, None)
                continue
            clone = info.clone()
            snap.infos[name] = clone
            row = snap.index.get(name)
            if row is not None and not self._membership_changed:
                snap.node_list[row] = clone
                snap.table.set_row(row, clone)
        self._dirty.clear()
        if self._membership_changed:
            # in the cache's order (nodes as they were added): the search rotates over it
            snap.node_list = [snap.infos[n] for n in self.nodes if snap.infos[n].node is not None]
            snap.index = {info.name: i for i, info in enumerate(snap.node_list)}
            snap.table.rebuild(snap.node_list)
            self._membership_changed = False
        snap.generation = self._generation
