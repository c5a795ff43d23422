"""Priority and Fairness's seats and queues (apiserver.flowcontrol.queueset) and its
classification (dispatch), without an apiserver."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry

from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo
from apiserver.flowcontrol.bootstrap import (
    MANDATORY_LEVELS,
    MANDATORY_SCHEMAS,
    SUGGESTED_LEVELS,
    SUGGESTED_SCHEMAS,
    _object,
)
from apiserver.flowcontrol.dispatch import COURTESY_SECONDS, Admitted, FlowControl, _matches, _Schema
from apiserver.flowcontrol.queueset import PriorityLevel
from kubeling import errors


def _level(seats: int, **kw: object) -> PriorityLevel:
    return PriorityLevel("test", "uid", False, seats, **kw)  # type: ignore[arg-type]


async def test_requests_wait_for_seats_and_flows_are_served_in_turn() -> None:
    level = _level(2, queues=8, hand_size=2)
    held = [await level.acquire("a", 1), await level.acquire("a", 1)]
    assert level.in_use == 2
    order: list[str] = []

    async def request(flow: str) -> None:
        seat = await level.acquire(flow, 1)
        order.append(flow)
        seat.release()

    # a flood from one flow, then one request of another: it need not wait behind the flood
    waiting = [asyncio.create_task(request("noisy")) for _ in range(6)] + [asyncio.create_task(request("quiet"))]
    await asyncio.sleep(0)
    assert level.waiting == 7
    for seat in held:
        seat.release()
    await asyncio.gather(*waiting)
    assert order.index("quiet") <= 2, order
    assert level.in_use == 0 and level.dispatched == 9


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_flows_share_seat_seconds_whatever_their_requests_widths() -> None:
    """Fair queuing by virtual finish time: a flow of wide requests (a LIST's ten seats) and a
    flow of narrow ones, each always with requests waiting and each request served 20 ms,
    get about the same seat-seconds (served in turn, the wide flow got its width times
    more: 5x here)."""
    clock = _Clock()
    level = _level(5, queues=16, hand_size=1, clock=clock)
    served: dict[str, float] = {"wide": 0.0, "narrow": 0.0}
    running: list[tuple[float, asyncio.Future[None]]] = []

    async def client(flow: str, width: int) -> None:
        while True:
            seat = await level.acquire(flow, width)
            done = asyncio.get_running_loop().create_future()
            running.append((clock.now + 0.02, done))
            await done
            served[flow] += width * 0.02
            seat.release()

    clients = [asyncio.create_task(client("wide", 5)) for _ in range(4)] + \
        [asyncio.create_task(client("narrow", 1)) for _ in range(20)]
    for _ in range(400):  # 4 s of service, a millisecond at a time
        for _ in range(5):
            await asyncio.sleep(0)
        clock.now += 0.001
        for end, done in [r for r in running if r[0] <= clock.now]:
            running.remove((end, done))
            done.set_result(None)
    for c in clients:
        c.cancel()
    await asyncio.gather(*clients, return_exceptions=True)
    assert served["wide"] > 0 and served["narrow"] > 0
    assert 0.6 < served["wide"] / served["narrow"] < 1.6, served


async def test_a_wide_request_waits_for_all_its_seats() -> None:
    level = _level(10)
    small = await level.acquire("a", 3)
    wide = asyncio.create_task(level.acquire("b", 10))  # a big LIST: ten seats
    await asyncio.sleep(0)
    assert not wide.done()
    small.release()
    seat = await wide
    assert level.in_use == 10
    seat.release()
    assert level.in_use == 0


async def test_full_queues_reject_and_reject_levels_never_queue() -> None:
    level = _level(1, queues=1, hand_size=1, queue_length_limit=2)
    seat = await level.acquire("a", 1)
    queued = [asyncio.create_task(level.acquire("a", 1)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(errors.TooManyRequests) as refused:
        await level.acquire("a", 1)
    assert refused.value.metadata["retryAfterSeconds"] == "1"
    seat.release()
    for task in queued:
        (await task).release()
    rejecting = _level(1, reject=True)
    held = await rejecting.acquire("a", 1)
    with pytest.raises(errors.TooManyRequests):
        await rejecting.acquire("b", 1)
    held.release()
    assert rejecting.rejected == 1


async def test_a_request_that_waits_too_long_is_refused_and_a_cancelled_one_leaves_the_queue() -> None:
    level = _level(1, wait_limit=0.05)
    seat = await level.acquire("a", 1)
    with pytest.raises(errors.TooManyRequests):
        await level.acquire("a", 1)
    gone = asyncio.create_task(level.acquire("a", 1))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert level.waiting == 0
    seat.release()
    assert level.in_use == 0


def _schema(name: str, spec: dict[str, object]) -> _Schema:
    return _Schema(name, name, int(spec["matchingPrecedence"]),  # type: ignore[call-overload]
                   spec["priorityLevelConfiguration"]["name"],  # type: ignore[index]
                   (spec.get("distinguisherMethod") or {}).get("type", ""),  # type: ignore[attr-defined]
                   tuple(spec["rules"]))  # type: ignore[arg-type]


def test_classification_by_the_bootstrap_schemas() -> None:
    schemas = sorted((_schema(n, s) for n, s in {**MANDATORY_SCHEMAS, **SUGGESTED_SCHEMAS}.items()),
                     key=lambda s: (s.precedence, s.name))

    def first(user: UserInfo, info: RequestInfo) -> str:
        return next(s.name for s in schemas if _matches(s, user, info))

    admin = UserInfo("admin", groups=("system:masters", "system:authenticated"))
    node = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))
    account = UserInfo("system:serviceaccount:team:builder", groups=("system:serviceaccounts", "system:authenticated"))
    anonymous = UserInfo("system:anonymous", groups=("system:unauthenticated",))
    lease = RequestInfo("update", True, "coordination.k8s.io", "leases", namespace="kube-node-lease", name="n1")
    assert first(admin, lease) == "exempt"
    assert first(node, lease) == "system-node-high"
    assert first(node, RequestInfo("get", True, "", "nodes", "status", name="n1")) == "system-node-high"
    assert first(node, RequestInfo("list", True, "", "pods")) == "system-nodes"
    assert first(account, RequestInfo("list", True, "", "pods", namespace="team")) == "service-accounts"
    kube_system = UserInfo("system:serviceaccount:kube-system:x", groups=("system:serviceaccounts",))
    assert first(kube_system, RequestInfo("list", True, "", "pods")) == "kube-system-service-accounts"
    assert first(anonymous, RequestInfo.non_resource("get", "/healthz")) == "probes"
    assert first(anonymous, RequestInfo("list", True, "", "pods", namespace="default")) == "global-default"
    assert first(UserInfo("system:kube-scheduler", groups=("system:authenticated",)),
                 RequestInfo("update", True, "coordination.k8s.io", "leases", namespace="kube-system",
                             name="kube-scheduler")) == "system-leader-election"


class _Cache:
    """What FlowControl reads of a watch cache: ready, a change count, the stored objects."""

    def __init__(self, kind: str, specs: dict[str, dict[str, object]]) -> None:
        self.ready = asyncio.Event()
        self.ready.set()
        self.changes = 1
        self.store = {name: SimpleNamespace(obj=_object(kind, name, spec)) for name, spec in specs.items()}


def _flow_control() -> FlowControl:
    levels = _Cache("PriorityLevelConfiguration", {**MANDATORY_LEVELS, **SUGGESTED_LEVELS})
    schemas = _Cache("FlowSchema", {**MANDATORY_SCHEMAS, **SUGGESTED_SCHEMAS})
    return FlowControl(schemas, levels, 90, lambda group, plural: 5000,  # type: ignore[arg-type]
                       CollectorRegistry())


async def test_a_wide_request_waits_a_moment_for_the_narrow_ones_in_flight() -> None:
    """Courtesy: between two slices of its work, a big LIST (ten seats) lets one-seat
    requests in flight (a Lease renewal) finish first, but never waits longer than
    COURTESY_SECONDS."""
    control = _flow_control()
    node = UserInfo("system:node:n1", groups=("system:nodes",))
    renewal = Admitted()
    await control.admit(node, RequestInfo("update", True, "coordination.k8s.io", "leases",
                                          namespace="kube-node-lease", name="n1"), renewal)
    flood = Admitted()
    await control.admit(UserInfo("noisy", groups=("system:authenticated",)), RequestInfo("list", True, "", "pods"),
                        flood)
    assert renewal.seat is not None and renewal.seat.width == 1
    assert flood.seat is not None and flood.seat.width > 1
    waiting = asyncio.create_task(control.courtesy())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()  # the renewal is executing
    renewal.release()
    await asyncio.wait_for(waiting, 1)
    # one that never ends holds the wide one back a moment only
    held = Admitted()
    await control.admit(node, RequestInfo("get", True, "", "nodes", name="n1"), held)
    started = time.monotonic()
    await control.courtesy()
    assert COURTESY_SECONDS <= time.monotonic() - started < 0.5
    held.release()
    flood.release()
    await asyncio.wait_for(control.courtesy(), 1)  # nothing in flight: a turn


async def test_a_remembered_classification_follows_every_change_of_the_schemas() -> None:
    """FlowControl remembers which schema a kind of request matched (a thousand kubelets
    renew their Leases alike); a change of the FlowSchemas makes it classify anew, and the
    request's name plays no part."""
    levels = _Cache("PriorityLevelConfiguration", {**MANDATORY_LEVELS, **SUGGESTED_LEVELS})
    schemas = _Cache("FlowSchema", {**MANDATORY_SCHEMAS, **SUGGESTED_SCHEMAS})
    for name, entry in schemas.store.items():
        entry.obj.metadata.uid = name  # what the X-Kubernetes-PF-FlowSchema-UID header would say
    control = FlowControl(schemas, levels, 90, lambda group, plural: 5000,  # type: ignore[arg-type]
                          CollectorRegistry())
    node = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))

    async def schema_of(name: str) -> str:
        admitted = Admitted()
        await control.admit(node, RequestInfo("update", True, "coordination.k8s.io", "leases",
                                              namespace="kube-node-lease", name=name), admitted)
        admitted.release()
        return admitted.schema_uid

    assert await schema_of("n1") == "system-node-high"
    assert await schema_of("n2") == "system-node-high"  # remembered: another name, the same answer
    # a schema ahead of every other, for everyone's lease updates
    first = _object("FlowSchema", "leases-first", {
        "matchingPrecedence": 1, "priorityLevelConfiguration": {"name": "workload-low"},
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
                   "resourceRules": [{"verbs": ["update"], "apiGroups": ["coordination.k8s.io"],
                                      "resources": ["leases"], "namespaces": ["*"]}]}]})
    first.metadata.uid = "leases-first"
    schemas.store["leases-first"] = SimpleNamespace(obj=first)
    assert await schema_of("n1") == "system-node-high"  # not seen: the watch cache has not changed
    schemas.changes += 1
    assert await schema_of("n1") == "leases-first"
    assert await schema_of("n3") == "leases-first"


def test_a_flow_is_dealt_the_same_hand_of_queues_however_often_it_comes() -> None:
    """Shuffle sharding: a flow's queues are a function of its name only — remembered, and
    the same after the memory of them is dropped."""
    level = _level(4, queues=64, hand_size=8)
    flows = [f"schema/user-{i}" for i in range(20)]

    def hand(flow: str) -> set[int]:
        level._deal(flow)
        return set(level._hands[flow])

    hands = {f: hand(f) for f in flows}
    for i in range(5000):  # more flows than are remembered: the memory is dropped on the way
        level._deal(f"other-{i}")
    again = {f: hand(f) for f in flows}
    assert again == hands
    assert all(len(h) == 8 for h in hands.values())
    assert len({frozenset(h) for h in hands.values()}) > 1  # flows get different hands
