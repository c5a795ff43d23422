"""The EndpointSlice and Endpoints controllers against a real apiserver (no kubelets: the
pods' status is written as a kubelet would): ready and not-ready endpoints, named ports
resolved per pod (pods with different numbers in different slices), terminating
endpoints, a pod relabelled out of the Service, the slices' labels and owner, a
tampered slice put back, publishNotReadyAddresses, and everything gone with the Service."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from controllers.manager import ControllerManager
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2
from tests.wait import until


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 20.0) -> None:
    await until(check, what, timeout)


async def _pod(client: Client, name: str, ip: str, *, ready: bool = True, port: int = 8080,
               labels: dict[str, str] | None = None) -> core_pb2.Pod:
    container = core_pb2.Container(name="web", image="busybox",
                                   ports=[core_pb2.ContainerPort(name="http", containerPort=port)])
    made = await client.pods.create(core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels=labels or {"app": "web"}),
        spec=core_pb2.PodSpec(containers=[container], nodeName="node-1", hostname=name, subdomain="web")))
    made.status.phase = "Running"
    made.status.podIP = ip
    made.status.conditions.add(type="Ready", status="True" if ready else "False")
    return await client.pods.update_status(made)


async def _slices(client: Client, service: str = "web") -> list[discovery_pb2.EndpointSlice]:
    found = await client.endpointslices.list("default", label_selector=f"kubernetes.io/service-name={service}")
    return sorted(found.items, key=lambda es: es.metadata.name)


def _addresses(slices: list[discovery_pb2.EndpointSlice]) -> dict[str, tuple[bool, bool, bool]]:
    return {e.addresses[0]: (e.conditions.ready, e.conditions.serving, e.conditions.terminating)
            for es in slices for e in es.endpoints}


async def test_slices_follow_the_pods(client: Client, manager: ControllerManager) -> None:
    svc = await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="web", namespace="default", labels={"tier": "front"}),
        spec=core_pb2.ServiceSpec(selector={"app": "web"}, ports=[core_pb2.ServicePort(
            name="http", port=80, targetPort=core_pb2.IntOrString(type=1, strVal="http"))])))

    async def placeholder() -> bool:
        slices = await _slices(client)
        return len(slices) == 1 and not slices[0].endpoints

    await _until(placeholder, "an empty slice for a Service without pods")
    await _pod(client, "a", "10.1.0.1")
    await _pod(client, "b", "10.1.0.2", ready=False)
    await _pod(client, "c", "10.1.0.3", port=9090)  # the same name, another number: another slice

    async def three() -> bool:
        return _addresses(await _slices(client)) == {"10.1.0.1": (True, True, False),
                                                     "10.1.0.2": (False, False, False),
                                                     "10.1.0.3": (True, True, False)}

    await _until(three, "three endpoints, one not ready")
    slices = await _slices(client)
    assert sorted(es.ports[0].port for es in slices) == [8080, 9090]
    es = slices[0]
    assert es.addressType == "IPv4" and es.metadata.labels["endpointslice.kubernetes.io/managed-by"] == \
        "endpointslice-controller.k8s.io"
    assert es.metadata.labels["tier"] == "front" and es.metadata.ownerReferences[0].uid == svc.metadata.uid
    first = next(e for s in slices for e in s.endpoints if e.addresses[0] == "10.1.0.1")
    assert (first.hostname, first.nodeName, first.targetRef.kind, first.targetRef.name) == ("a", "node-1", "Pod", "a")

    endpoints = await client.endpoints.get("web", "default")
    ready = sorted(a.ip for s in endpoints.subsets for a in s.addresses)
    not_ready = sorted(a.ip for s in endpoints.subsets for a in s.notReadyAddresses)
    assert (ready, not_ready) == (["10.1.0.1", "10.1.0.3"], ["10.1.0.2"])
    assert sorted(s.ports[0].port for s in endpoints.subsets) == [8080, 9090]

    # a terminating pod stays as a terminating endpoint until it is gone
    await client.pods.delete("a", "default", grace_period_seconds=30)

    async def terminating() -> bool:
        return _addresses(await _slices(client)).get("10.1.0.1") == (False, True, True)

    await _until(terminating, "a terminating endpoint")
    # relabelled out of the Service: out of its slices
    c = await client.pods.get("c", "default")
    c.metadata.labels["app"] = "other"
    await client.pods.update(c)

    async def c_gone() -> bool:
        return "10.1.0.3" not in _addresses(await _slices(client))

    await _until(c_gone, "a relabelled pod to leave the slices")
    assert len(await _slices(client)) == 1  # its own slice went with it

    # a slice changed by hand is put back
    current = (await _slices(client))[0]
    del current.endpoints[:]
    await client.endpointslices.update(current)
    await _until(lambda: _has(client, "10.1.0.2"), "the tampered slice restored")

    # publishNotReadyAddresses: every endpoint ready
    svc = await client.services.get("web", "default")
    svc.spec.publishNotReadyAddresses = True
    await client.services.update(svc)

    async def published() -> bool:
        return _addresses(await _slices(client)).get("10.1.0.2") == (True, True, False)

    await _until(published, "not-ready addresses published")

    await client.services.delete("web", "default")

    async def gone() -> bool:
        try:
            await client.endpoints.get("web", "default")
            return False
        except errors.NotFound:
            return not await _slices(client)

    await _until(gone, "the slices and Endpoints to go with the Service")


async def _has(client: Client, ip: str) -> bool:
    return ip in _addresses(await _slices(client))


async def test_many_pods_split_into_slices(client: Client, manager: ControllerManager) -> None:
    await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="many", namespace="default"),
        spec=core_pb2.ServiceSpec(selector={"app": "many"}, ports=[core_pb2.ServicePort(port=80)])))
    count = 100 + 20  # upstream's --max-endpoints-per-slice default is 100
    await asyncio.gather(*(_pod(client, f"m{i}", f"10.2.{i // 250}.{i % 250 + 1}", labels={"app": "many"})
                           for i in range(count)))

    async def split() -> bool:
        slices = await _slices(client, "many")
        return sorted(len(es.endpoints) for es in slices) == [20, 100]

    await _until(split, f"{count} endpoints in two slices, no duplicate slice")
    slices = await _slices(client, "many")
    assert len(_addresses(slices)) == count
