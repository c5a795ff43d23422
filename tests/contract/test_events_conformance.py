"""The four `[sig-instrumentation]` Events conformance tests (upstream's
test/e2e/instrumentation/events.go and core_events.go) mirrored over REST: the core v1
Events and the events.k8s.io/v1 ones — the same events, stored once, under two APIs."""

from __future__ import annotations

from typing import Any

from tests.contract.test_crds import Rest

NS = "default"
CORE = f"/api/v1/namespaces/{NS}/events"
V1 = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


async def _ok(api: Rest, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    code, out, _ = await api.call(method, path, body, **kw)
    assert code < 300, f"{method} {path}: {code} {out}"
    return out


def _core_event(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "labels": {"testevent-set": "true"}},
            "involvedObject": {"namespace": NS}, "reason": "Test", "message": "This is a test event",
            "type": "Normal", "count": 1, "source": {"component": "kubelet"}}


def _v1_event(name: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "labels": {"testevent-set": "true"}}, "regarding": {"namespace": NS},
            "eventTime": "2017-09-19T13:49:16.000000Z", "note": f"This is {name}", "action": "Do",
            "reason": "Test", "type": "Normal", "reportingController": "test-controller",
            "reportingInstance": "test-node"}


async def test_event_manage_lifecycle(http: Rest) -> None:
    """[sig-instrumentation] Events should manage the lifecycle of an event."""
    await _ok(http, "POST", CORE, _core_event("event-test"))
    listed = await _ok(http, "GET", "/api/v1/events", query={"labelSelector": "testevent-set=true"})
    assert [e["metadata"]["name"] for e in listed["items"]] == ["event-test"]
    patched = await _ok(http, "PATCH", f"{CORE}/event-test", {"message": "This is a test event - patched"},
                        content_type=STRATEGIC)
    assert patched["message"] == "This is a test event - patched"
    got = await _ok(http, "GET", f"{CORE}/event-test")
    assert got["message"] == "This is a test event - patched"
    got["series"] = {"count": 100, "lastObservedTime": "2021-01-01T00:00:00.123456Z"}
    updated = await _ok(http, "PUT", f"{CORE}/event-test", got)
    assert updated["series"] == {"count": 100, "lastObservedTime": "2021-01-01T00:00:00.123456Z"}
    await _ok(http, "DELETE", f"{CORE}/event-test")
    listed = await _ok(http, "GET", "/api/v1/events", query={"labelSelector": "testevent-set=true"})
    assert listed["items"] == []


async def test_event_delete_a_collection(http: Rest) -> None:
    """[sig-instrumentation] Events should delete a collection of events."""
    for i in (1, 2, 3):
        await _ok(http, "POST", CORE, _core_event(f"test-event-{i}"))
    listed = await _ok(http, "GET", CORE, query={"labelSelector": "testevent-set=true"})
    assert len(listed["items"]) == 3
    await _ok(http, "DELETE", CORE, query={"labelSelector": "testevent-set=true"})
    assert (await _ok(http, "GET", CORE, query={"labelSelector": "testevent-set=true"}))["items"] == []


async def test_new_event_resource_lifecycle_testing_a_single_event(http: Rest) -> None:
    """[sig-instrumentation] Events API should ensure that an event can be fetched, patched, deleted, and listed."""
    made = await _ok(http, "POST", V1, _v1_event("event-test"))
    assert made["apiVersion"] == "events.k8s.io/v1" and made["regarding"] == {"namespace": NS}
    every = await _ok(http, "GET", "/apis/events.k8s.io/v1/events", query={"labelSelector": "testevent-set=true"})
    assert [e["metadata"]["name"] for e in every["items"]] == ["event-test"]
    here = await _ok(http, "GET", V1, query={"labelSelector": "testevent-set=true"})
    assert len(here["items"]) == 1
    # the same event through the core API, selected by its source (the reporting controller)
    core = await _ok(http, "GET", CORE, query={"fieldSelector": "source=test-controller"})
    assert [e["metadata"]["name"] for e in core["items"]] == ["event-test"]
    assert core["items"][0]["message"] == "This is event-test" and core["items"][0]["reportingComponent"] == \
        "test-controller"
    by_controller = await _ok(http, "GET", V1, query={"fieldSelector": "reportingController=test-controller"})
    assert [e["metadata"]["name"] for e in by_controller["items"]] == ["event-test"]
    got = await _ok(http, "GET", f"{V1}/event-test")
    assert got["note"] == "This is event-test" and got["eventTime"] == "2017-09-19T13:49:16.000000Z"
    patched = await _ok(http, "PATCH", f"{V1}/event-test", {"note": "This is event-test - patched"},
                        content_type=MERGE)
    assert patched["note"] == "This is event-test - patched"
    got = await _ok(http, "GET", f"{V1}/event-test")
    got["series"] = {"count": 100, "lastObservedTime": "2021-01-01T00:00:00.123456Z"}
    updated = await _ok(http, "PUT", f"{V1}/event-test", got)
    assert updated["series"] == {"count": 100, "lastObservedTime": "2021-01-01T00:00:00.123456Z"}
    assert (await _ok(http, "GET", f"{V1}/event-test"))["series"]["count"] == 100
    await _ok(http, "DELETE", f"{V1}/event-test")
    assert (await _ok(http, "GET", "/apis/events.k8s.io/v1/events",
                      query={"labelSelector": "testevent-set=true"}))["items"] == []


async def test_new_event_resource_lifecycle_testing_a_list_of_events(http: Rest) -> None:
    """[sig-instrumentation] Events API should delete a collection of events."""
    for i in (1, 2, 3):
        await _ok(http, "POST", V1, _v1_event(f"test-event-{i}"))
    assert len((await _ok(http, "GET", V1, query={"labelSelector": "testevent-set=true"}))["items"]) == 3
    await _ok(http, "DELETE", V1, query={"labelSelector": "testevent-set=true"})
    assert (await _ok(http, "GET", V1, query={"labelSelector": "testevent-set=true"}))["items"] == []


async def test_events_api_validation(http: Rest) -> None:
    """events.k8s.io/v1's stricter rules for new events, with upstream's messages."""
    code, status, _ = await http.call("POST", V1, {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                                                   "metadata": {"name": "bad"}, "regarding": {"namespace": "other"},
                                                   "series": {"count": 1}})
    assert code == 422, status
    message = status["message"]
    assert message.startswith('Event.events.k8s.io "bad" is invalid: [')
    for part in ('regarding.namespace: Invalid value: "other": does not match event.namespace',
                 "eventTime: Required value", "reportingController: Required value", "action: Required value",
                 "series.count: Invalid value: 1: should be at least 2", "series.lastObservedTime: Required value"):
        assert part in message, message
