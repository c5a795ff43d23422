"""Classifying a request and giving it seats (upstream's apf_controller and apf_filter):
the FlowSchema that matches it first, the flow it belongs to, its priority level, and the
seats its work needs."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo
from apiserver.flowcontrol.metrics import FlowMetrics
from apiserver.flowcontrol.queueset import PriorityLevel, Rejected, Seat
from apiserver.storage.cacher.watch_cache import WatchCache
from kubeling.dynamic import content_of

__all__ = ["COURTESY_SECONDS", "FlowControl", "Admitted"]

COURTESY_SECONDS = 0.002
_OBJECTS_PER_SEAT = 100  # upstream's work estimator: a LIST takes a seat per 100 objects ...
_MAX_SEATS = 10  # ... up to 10
_MATCHES_KEPT = 4096  # classifications remembered (then forgotten all at once)


@dataclass(frozen=True)
class _Schema:
    name: str
    uid: str
    precedence: int
    level: str
    distinguisher: str  # ByUser, ByNamespace or ""
    rules: tuple[dict[str, Any], ...]


@dataclass
class Admitted:
    """What flow control made of a request: the schema and level (their uids go back in
    the X-Kubernetes-PF-* headers) and its seats (None: it took none)."""

    schema_uid: str = ""
    level_uid: str = ""
    seat: Seat | None = None
    on_release: Callable[[], None] | None = None  # its metrics, once it ends

    def release(self) -> None:
        if self.seat is not None:
            self.seat.release()
        if self.on_release is not None:
            done, self.on_release = self.on_release, None
            done()


def _matches_subject(subject: dict[str, Any], user: UserInfo) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        name = (subject.get("user") or {}).get("name")
        return name in ("*", user.name)
    if kind == "Group":
        name = (subject.get("group") or {}).get("name")
        return name == "*" or name in user.groups
    if kind == "ServiceAccount":
        account = subject.get("serviceAccount") or {}
        prefix = f"system:serviceaccount:{account.get('namespace', '')}:"
        return user.name.startswith(prefix) and account.get("name") in ("*", user.name[len(prefix):])
    return False


def _has(values: list[str], value: str) -> bool:
    return "*" in values or value in values


def _matches_resource(rule: dict[str, Any], info: RequestInfo) -> bool:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not (_has(rule.get("verbs") or [], info.verb) and _has(rule.get("apiGroups") or [], info.group)
            and _has(rule.get("resources") or [], resource)):
        return False
    if not info.namespace:
        return bool(rule.get("clusterScope"))
    return _has(rule.get("namespaces") or [], info.namespace)


def _matches_url(rule: dict[str, Any], info: RequestInfo) -> bool:
    if not _has(rule.get("verbs") or [], info.verb):
        return False
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == info.path or (url.endswith("/*") and info.path.startswith(url[:-1])):
            return True
    return False


def _matches(schema: _Schema, user: UserInfo, info: RequestInfo) -> bool:
    for rule in schema.rules:
        if not any(_matches_subject(s, user) for s in rule.get("subjects") or []):
            continue
        if info.resource_request:
            if any(_matches_resource(r, info) for r in rule.get("resourceRules") or []):
                return True
        elif any(_matches_url(r, info) for r in rule.get("nonResourceRules") or []):
            return True
    return False


class FlowControl:
    def __init__(self, schemas: WatchCache, levels: WatchCache, server_seats: int,
                 object_count: Callable[[str, str], int], registry: CollectorRegistry) -> None:
        self.schemas = schemas
        self.levels = levels
        self.server_seats = server_seats
        self.object_count = object_count  # (group, plural) -> how many objects a LIST may return
        self._seen: tuple[int, int] = (-1, -1)
        self._schemas: list[_Schema] = []
        self._levels: dict[str, PriorityLevel] = {}
        # the schema each kind of request matched: what decides it (who, which verb on what,
        # where) repeats — a thousand kubelets renew their Leases — while a match walks
        # every schema's rules; forgotten when the configuration changes
        self._matched: dict[tuple[Any, ...], _Schema | None] = {}
        self.metrics = FlowMetrics(registry, lambda: self._levels)
        # one-seat requests executing now, and set when there are none: wide ones (big
        # LISTs) wait on it a moment between slices (courtesy)
        self._narrow = 0
        self._no_narrow = asyncio.Event()
        self._no_narrow.set()

    def _configuration(self) -> tuple[list[_Schema], dict[str, PriorityLevel]]:
        seen = (self.schemas.changes, self.levels.changes)
        if seen != self._seen:
            self._seen = seen
            self._schemas = sorted((self._schema(e.obj) for e in self.schemas.store.values()),
                                   key=lambda s: (s.precedence, s.name))
            self._levels = self._priority_levels([e.obj for e in self.levels.store.values()])
            self._matched.clear()
        return self._schemas, self._levels

    def _classify(self, schemas: list[_Schema], user: UserInfo, info: RequestInfo) -> _Schema | None:
        """The first schema (by precedence) that matches; a request's name plays no part."""
        key = (user.name, user.groups, info.resource_request, info.verb, info.group, info.resource,
               info.subresource, info.namespace, info.path)
        try:
            return self._matched[key]
        except KeyError:
            pass
        schema = next((s for s in schemas if _matches(s, user, info)), None)
        if len(self._matched) >= _MATCHES_KEPT:
            self._matched.clear()
        self._matched[key] = schema
        return schema

    @staticmethod
    def _schema(obj: Any) -> _Schema:
        spec = content_of(obj).get("spec") or {}
        return _Schema(obj.metadata.name, obj.metadata.uid, spec.get("matchingPrecedence", 1000),
                       (spec.get("priorityLevelConfiguration") or {}).get("name", ""),
                       (spec.get("distinguisherMethod") or {}).get("type", ""), tuple(spec.get("rules") or []))

    def _priority_levels(self, objects: list[Any]) -> dict[str, PriorityLevel]:
        """Each level's seats: its share of the server's by nominalConcurrencyShares. A level
        whose settings did not change keeps its state (seats in use, queued requests)."""
        specs = {o.metadata.name: (o, content_of(o).get("spec") or {}) for o in objects}
        shares = {name: (spec.get("limited") or {}).get("nominalConcurrencyShares", 30)
                  for name, (_, spec) in specs.items() if spec.get("type") == "Limited"}
        total = sum(shares.values()) or 1
        out: dict[str, PriorityLevel] = {}
        for name, (obj, spec) in specs.items():
            limited = spec.get("limited") or {}
            response = limited.get("limitResponse") or {}
            queuing = response.get("queuing") or {}
            level = PriorityLevel(
                name, obj.metadata.uid, spec.get("type") == "Exempt",
                max(1, math.ceil(self.server_seats * shares.get(name, 0) / total)),
                reject=response.get("type") == "Reject", queues=queuing.get("queues", 64),
                hand_size=queuing.get("handSize", 8), queue_length_limit=queuing.get("queueLengthLimit", 50))
            old = self._levels.get(name)
            same = old is not None and (old.uid, old.exempt, old.seats, old.reject, old.queues, old.hand_size,
                                        old.queue_length_limit) == (level.uid, level.exempt, level.seats,
                                                                    level.reject, level.queues, level.hand_size,
                                                                    level.queue_length_limit)
            out[name] = old if same and old is not None else level
        return out

    def _width(self, info: RequestInfo) -> int:
        if info.resource_request and info.verb == "list" and not info.name:
            count = self.object_count(info.group, info.resource)
            return max(1, min(_MAX_SEATS, math.ceil(count / _OBJECTS_PER_SEAT)))
        return 1

    async def admit(self, user: UserInfo, info: RequestInfo, admitted: Admitted, *,
                    long_running: bool = False) -> None:
        """Fill `admitted` with the request's schema and level, then its seats once it may be
        served (TooManyRequests: it may not; the schema and level are known even then)."""
        if not self.schemas.ready.is_set() or not self.levels.ready.is_set():
            return  # no configuration read yet: nothing to enforce
        schemas, levels = self._configuration()
        schema = self._classify(schemas, user, info)
        if schema is None:
            return
        level = levels.get(schema.level) or levels.get("catch-all")
        admitted.schema_uid = schema.uid
        if level is None:
            return
        admitted.level_uid = level.uid
        key = (schema.name, level.name)
        if long_running or level.exempt:
            self.metrics.dispatched.labels(*key).inc()
            return
        flow = user.name if schema.distinguisher == "ByUser" else \
            info.namespace if schema.distinguisher == "ByNamespace" else ""
        metrics, arrived = self.metrics, time.monotonic()
        metrics.inqueue[key] += 1  # no await before a seat free now: then never seen queued
        try:
            seat = await level.acquire(f"{schema.name}/{flow}", self._width(info))
        except Rejected as err:
            metrics.rejected.labels(*key, err.why).inc()
            metrics.wait.labels(*key, "false").observe(time.monotonic() - arrived)
            raise
        except asyncio.CancelledError:
            metrics.rejected.labels(*key, "cancelled").inc()
            raise
        finally:
            metrics.inqueue[key] -= 1
        started = time.monotonic()
        metrics.dispatched.labels(*key).inc()
        metrics.wait.labels(*key, "true").observe(started - arrived)
        metrics.executing[key] += 1
        metrics.executing_seats[key] += seat.width
        admitted.seat = seat
        narrow = seat.width == 1
        if narrow:
            self._narrow += 1
            self._no_narrow.clear()

        def ended() -> None:
            metrics.executing[key] -= 1
            metrics.executing_seats[key] -= seat.width
            metrics.execution.labels(*key, "regular").observe(time.monotonic() - started)
            if narrow:
                self._narrow -= 1
                if not self._narrow:
                    self._no_narrow.set()

        admitted.on_release = ended

    async def courtesy(self) -> None:
        """A wide request's turn between two slices of its work: while one-seat requests
        (a Lease renewal, a GET) are executing, wait for them a moment (at most
        COURTESY_SECONDS). One event loop is this server's one CPU: seats alone would let
        a stream of cheap LISTs take it from every other level, which upstream's many
        cores and goroutines do not suffer."""
        if self._narrow:
            try:
                async with asyncio.timeout(COURTESY_SECONDS):
                    await self._no_narrow.wait()
                return
            except TimeoutError:
                pass
        await asyncio.sleep(0)

    def level(self, name: str) -> PriorityLevel | None:
        return self._configuration()[1].get(name)
