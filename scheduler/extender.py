"""HTTP extenders, as kube-scheduler's (extender/v1 JSON over HTTP POST).

    extenders:
    - urlPrefix: http://127.0.0.1:8888/scheduler
      filterVerb: filter          # POST ExtenderArgs -> ExtenderFilterResult
      prioritizeVerb: prioritize  # POST ExtenderArgs -> HostPriorityList (scores 0..10)
      bindVerb: bind              # POST ExtenderBindingArgs -> ExtenderBindingResult
      weight: 1
      nodeCacheCapable: false     # true: send node names only
      ignorable: false            # true: errors from it are skipped
      httpTimeout: 30s
      managedResources: [{name: example.com/foo}]  # only pods asking for these go to it
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kubeling.kjson import to_json
from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo

__all__ = ["ExtenderConfig", "HTTPExtender", "ExtenderError", "parse_extenders", "MAX_EXTENDER_PRIORITY",
           "find_nodes_that_pass_extenders", "prioritize_with_extenders", "binder_for"]

log = logging.getLogger(__name__)

MAX_EXTENDER_PRIORITY = 10


class ExtenderError(Exception):
    pass


@dataclass(frozen=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 1
    node_cache_capable: bool = False
    ignorable: bool = False
    http_timeout: float = 30.0
    managed_resources: frozenset[str] = field(default_factory=frozenset)


def _duration(value: Any, where: str) -> float:
    """A Go-style duration (30s, 500ms, 5m) or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", str(value))
    if not m:
        raise ValueError(f"{where}: Invalid value: {value!r}: a duration such as 30s or 500ms")
    return float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2)]


def parse_extenders(items: Any) -> list[ExtenderConfig]:
    """Validate the `extenders` list (raises ValueError naming the field)."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValueError("extenders: Invalid value: must be a list")
    out = []
    binders = 0
    for i, e in enumerate(items):
        where = f"extenders[{i}]"
        if not isinstance(e, dict) or not e.get("urlPrefix"):
            raise ValueError(f"{where}.urlPrefix: Required value")
        weight = e.get("weight", 1)
        if e.get("prioritizeVerb") and (not isinstance(weight, int) or weight <= 0):
            raise ValueError(f"{where}.weight: Invalid value: {weight!r}: must have a positive weight applied to it")
        if e.get("bindVerb"):
            binders += 1
        managed = frozenset(str(r.get("name")) for r in e.get("managedResources") or [] if isinstance(r, dict))
        out.append(ExtenderConfig(
            url_prefix=str(e["urlPrefix"]).rstrip("/"), filter_verb=str(e.get("filterVerb", "")),
            prioritize_verb=str(e.get("prioritizeVerb", "")), bind_verb=str(e.get("bindVerb", "")),
            weight=int(weight), node_cache_capable=bool(e.get("nodeCacheCapable", False)),
            ignorable=bool(e.get("ignorable", False)),
            http_timeout=_duration(e.get("httpTimeout", 30), f"{where}.httpTimeout"),
            managed_resources=managed))
    if binders > 1:
        raise ValueError("extenders: Invalid value: only one extender can implement bind")
    return out


class HTTPExtender:
    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None

    @property
    def name(self) -> str:
        return self.config.url_prefix

    @property
    def ignorable(self) -> bool:
        return self.config.ignorable

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def is_interested(self, pod: Pod) -> bool:
        managed = self.config.managed_resources
        if not managed:
            return True
        for c in list(pod.spec.containers) + list(pod.spec.initContainers):
            if managed & (set(c.resources.requests) | set(c.resources.limits)):
                return True
        return False

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(self, verb: str, body: Any) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.http_timeout))
        url = f"{self.config.url_prefix}/{verb}"
        try:
            async with self._session.post(url, json=body) as resp:
                if resp.status != 200:
                    raise ExtenderError(f"extender {url}: HTTP {resp.status}: {(await resp.text())[:200]}")
                return await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as err:
            raise ExtenderError(f"extender {url}: {type(err).__name__}: {err}") from None

    def _args(self, pod: Pod, nodes: list[NodeInfo]) -> dict[str, Any]:
        if self.config.node_cache_capable:
            return {"pod": to_json(pod), "nodenames": [n.name for n in nodes]}
        return {"pod": to_json(pod), "nodes": {"items": [to_json(n.node) for n in nodes if n.node is not None]}}

    async def filter(self, pod: Pod, nodes: list[NodeInfo]) -> tuple[list[NodeInfo], dict[str, str], dict[str, str]]:
        """(nodes that pass, failed: node -> reason, failed and unresolvable: node -> reason)."""
        if not self.config.filter_verb:
            return nodes, {}, {}
        result = await self._post(self.config.filter_verb, self._args(pod, nodes))
        if result.get("error"):
            raise ExtenderError(f"extender {self.name}: {result['error']}")
        if self.config.node_cache_capable and result.get("nodenames") is not None:
            keep = set(result["nodenames"])
        else:
            keep = {i.get("metadata", {}).get("name") for i in (result.get("nodes") or {}).get("items") or []}
        return ([n for n in nodes if n.name in keep], dict(result.get("failedNodes") or {}),
                dict(result.get("failedAndUnresolvableNodes") or {}))

    async def prioritize(self, pod: Pod, nodes: list[NodeInfo]) -> dict[str, int]:
        if not self.config.prioritize_verb:
            return {}
        result = await self._post(self.config.prioritize_verb, self._args(pod, nodes))
        scores = {}
        for item in result or []:
            score = int(item.get("score", 0))
            scores[str(item.get("host"))] = min(max(score, 0), MAX_EXTENDER_PRIORITY)
        return scores

    async def bind(self, pod: Pod, node: str) -> None:
        result = await self._post(self.config.bind_verb, {
            "podName": pod.metadata.name, "podNamespace": pod.metadata.namespace,
            "podUID": pod.metadata.uid, "node": node})
        if result and result.get("error"):
            raise ExtenderError(f"extender {self.name} could not bind: {result['error']}")


# ---------------------------------------------------------------- the scheduling cycle's calls


async def find_nodes_that_pass_extenders(extenders: Sequence[HTTPExtender], pod: Pod, feasible: list[NodeInfo],
                                         statuses: dict[str, Status], rejected_by: set[str]) -> list[NodeInfo]:
    """Each interested extender narrows the feasible nodes (upstream findNodesThatPassExtenders);
    the nodes it rejects get its reasons in `statuses`, and its name goes to `rejected_by`.
    ExtenderError from one that is not ignorable."""
    for ext in extenders:
        if not feasible:
            break
        if not ext.is_interested(pod):
            continue
        try:
            passed, failed, unresolvable = await ext.filter(pod, feasible)
        except ExtenderError as err:
            if ext.ignorable:
                log.info("ignorable extender %s failed: %s", ext.name, err)
                continue
            raise
        for node, reason in unresolvable.items():
            previous = statuses.get(node)
            statuses[node] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    (*(previous.reasons if previous else ()), reason), ext.name)
        for node, reason in failed.items():
            if node in unresolvable:
                continue
            previous = statuses.get(node)
            statuses[node] = Status(Code.UNSCHEDULABLE, (*(previous.reasons if previous else ()), reason), ext.name)
        rejected_by.add(ext.name)
        feasible = passed
    return feasible


async def prioritize_with_extenders(extenders: Sequence[HTTPExtender], pod: Pod, nodes: list[NodeInfo],
                                    scores: list[NodeScore]) -> list[NodeScore]:
    """The plugins' scores plus each interested extender's, weighted and scaled to 0..100."""
    totals = {ns.name: ns.score for ns in scores}
    for ext in extenders:
        if not ext.config.prioritize_verb or not ext.is_interested(pod):
            continue
        try:
            extra = await ext.prioritize(pod, nodes)
        except ExtenderError as err:  # upstream ignores prioritize errors: others still rank
            log.info("extender %s prioritize failed: %s", ext.name, err)
            continue
        for node, score in extra.items():
            if node in totals:
                totals[node] += score * ext.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    return [NodeScore(ns.name, totals[ns.name]) for ns in scores]


def binder_for(extenders: Sequence[HTTPExtender], pod: Pod) -> HTTPExtender | None:
    """The first interested extender that binds, if any (it binds instead of the bind plugins)."""
    return next((e for e in extenders if e.is_binder() and e.is_interested(pod)), None)
