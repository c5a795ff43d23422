"""Kubernetes protobuf on the REST API, with the real kubectl (a Go client: its typed
clients send protobuf and ask for it first) and by hand: what kubectl's create commands
send is stored as the same command's JSON would be, kubectl reads objects, lists and
errors back; watches stream length-prefixed WatchEvents; negotiation as upstream's (JSON
for kinds without protobuf, 406 when only protobuf is asked); bad bodies a clear 4xx."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.endpoints.rest.protobuf import PROTOBUF, WATCH_STREAM, decode_envelope, wire
from apiserver.server import APIServer
from kubeling.kubeconfig import write_kubeconfig
from tests.e2e.kubectl import Kubectl

_ASKED = f"{PROTOBUF}, application/json"  # client-go's Accept with ContentType protobuf

# `kubectl create` commands (typed clients: protobuf bodies), by the object they make
_CREATES = [
    ("deployment", ["deployment", "{}", "--image=busybox", "--replicas=2", "--port=8080"]),
    ("namespace", ["namespace", "{}"]),
    ("configmap", ["configmap", "{}", "--from-literal=a=1", "--from-literal=b=two"]),
    ("secret", ["secret", "generic", "{}", "--from-literal=password=s3cr3t"]),
    ("serviceaccount", ["serviceaccount", "{}"]),
    ("service", ["service", "nodeport", "{}", "--tcp=80:8080"]),
    ("job", ["job", "{}", "--image=busybox", "--", "echo", "hi"]),
    ("cronjob", ["cronjob", "{}", "--image=busybox", "--schedule=*/5 * * * *", "--restart=OnFailure"]),
    ("priorityclass", ["priorityclass", "{}", "--value=1000", "--description=high"]),
    ("poddisruptionbudget", ["poddisruptionbudget", "{}", "--selector=app=x", "--max-unavailable=1"]),
    ("resourcequota", ["quota", "{}", "--hard=cpu=1,memory=1G,pods=4"]),
    ("role", ["role", "{}", "--verb=get,list", "--resource=pods,deployments.apps"]),
    ("rolebinding", ["rolebinding", "{}", "--role=r", "--user=alice", "--serviceaccount=default:sa"]),
    ("clusterrole", ["clusterrole", "{}", "--verb=get", "--non-resource-url=/logs/*"]),
]
_VOLATILE = {"name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "labels", "generation"}


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(f"http://{rest.rest_address}") as session:
        yield session


@pytest.fixture
def kubectl(rest: APIServer, tmp_path: Path) -> Kubectl:
    return Kubectl(write_kubeconfig(tmp_path / "config", rest.rest_address))


def _comparable(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """An object without what differs between two objects made alike (names, uids, times)."""
    text = json.dumps(obj).replace(f'"{name}-json"', '"NAME"').replace(f'"{name}"', '"NAME"')
    text = re.sub(r'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"', '"UID"', text)  # a Job's selector
    out = json.loads(text)
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k not in _VOLATILE}
    out.get("status", {}).pop("conditions", None)
    spec = out.get("spec", {})
    for allocated in ("clusterIP", "clusterIPs"):  # a Service's addresses and ports, allocated
        spec.pop(allocated, None)
    for port in spec.get("ports", []) if isinstance(spec.get("ports"), list) else []:
        port.pop("nodePort", None)
    return out


async def test_kubectl_create_sends_protobuf_stored_as_its_json_would_be(kubectl: Kubectl) -> None:
    """Each create command twice: as kubectl sends it (protobuf) and as its JSON
    (`--dry-run=client -o json` through `create -f -`): the stored objects are the same."""
    for kind, args in _CREATES:
        name = kind[:10] + "x"
        _, _, trace = await kubectl("-v=8", "create", *[a.replace("{}", name) for a in args])
        assert f"Content-Type: {PROTOBUF}" in trace, kind  # it did send protobuf
        twin_args = [a.replace("{}", f"{name}-json") for a in args]
        cut = twin_args.index("--") if "--" in twin_args else len(twin_args)  # flags before a command's args
        _, document, _ = await kubectl("create", *twin_args[:cut], "--dry-run=client", "-o", "json",
                                       *twin_args[cut:])
        await kubectl("create", "-f", "-", stdin=document)
        namespaced = kind not in ("namespace", "priorityclass", "clusterrole")
        where = ["-n", "default"] if namespaced else []
        sent = json.loads((await kubectl("get", kind, name, "-o", "json", *where))[1])
        twin = json.loads((await kubectl("get", kind, f"{name}-json", "-o", "json", *where))[1])
        assert _comparable(sent, name) == _comparable(twin, name), kind


async def test_kubectl_reads_objects_lists_and_errors_in_protobuf(kubectl: Kubectl, http: aiohttp.ClientSession
                                                                   ) -> None:
    """`kubectl describe` reads pods, nodes and events through typed clients, which ask for
    protobuf: a pod with probes, env, volumes, tolerations and resources is shown whole."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rich", "namespace": "default",
                                                           "labels": {"app": "rich"}},
           "spec": {"nodeName": "n1", "containers": [{
               "name": "web", "image": "busybox:1.36", "command": ["sleep", "3600"],
               "env": [{"name": "GREETING", "value": "hello"},
                       {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
               "ports": [{"name": "http", "containerPort": 8080}],
               "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
               "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 7},
               "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}],
               "volumes": [{"name": "config", "configMap": {"name": "app-config", "defaultMode": 0o440}}],
               "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]}}
    await kubectl("create", "-f", "-", stdin=json.dumps(pod))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "3500m", "memory": "7Gi", "pods": "110"}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(node))
    _, out, trace = await kubectl("describe", "pod", "rich", "-v=7")
    assert f"Accept: {PROTOBUF},application/json" in trace
    words = " ".join(out.split())
    for shown in ("Image: busybox:1.36", "GREETING: hello", "POD_IP: (v1:status.podIP)", "Port: 8080/TCP",
                  "Limits: memory: 128Mi Requests: cpu: 250m memory: 64Mi",
                  "Readiness: http-get http://:http/ready delay=0s timeout=1s period=7s",
                  "/etc/app from config (rw)", "Type: ConfigMap (a volume populated by a ConfigMap) Name: app-config",
                  "Tolerations: dedicated=web:NoSchedule", "QoS Class: Burstable", "Node: n1/"):
        assert shown in words, (shown, out)
    _, node_out, _ = await kubectl("describe", "node", "n1")
    assert "dedicated=web:NoSchedule" in node_out and "3500m" in node_out and "zone=a" in node_out
    # an error answered to a protobuf client: a Status kubectl shows in upstream's words
    _, _, refused = await kubectl("create", "namespace", "default", ok=False)
    assert 'namespaces "default" already exists' in refused
    # and the pod itself in protobuf holds what its JSON holds
    async with http.get("/api/v1/namespaces/default/pods/rich") as r:
        as_json = await r.json()
    async with http.get("/api/v1/namespaces/default/pods/rich", headers={"Accept": _ASKED}) as r:
        assert r.content_type == PROTOBUF
        assert decode_envelope(await r.read()) == as_json


async def _frames(response: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    """count WatchEvents of a protobuf watch: 4-byte big-endian length, then the event."""
    events = []
    event_class = wire().message_class(wire().kinds["v1/WatchEvent"])
    for _ in range(count):
        length = struct.unpack(">I", await response.content.readexactly(4))[0]
        event: Any = event_class.FromString(await response.content.readexactly(length))
        events.append({"type": event.type, "object": decode_envelope(event.object.raw)})
    return events


async def test_watch_streams_protobuf_frames(http: aiohttp.ClientSession) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": "1"}}
    async with http.post("/api/v1/namespaces/default/configmaps", data=wire().encode(cm),
                         headers={"Content-Type": PROTOBUF, "Accept": _ASKED}) as r:
        assert r.status == 201 and r.content_type == PROTOBUF
        created = decode_envelope(await r.read())
    rv = created["metadata"]["resourceVersion"]
    async with http.get("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0",
                        headers={"Accept": _ASKED}) as watch:
        assert watch.headers["Content-Type"] == WATCH_STREAM
        (added,) = await _frames(watch, 1)
        assert added["type"] == "ADDED" and added["object"]["data"] == {"k": "1"}
        assert added["object"]["kind"] == "ConfigMap" and added["object"]["metadata"]["resourceVersion"] == rv
        async with http.delete("/api/v1/namespaces/default/configmaps/w") as r:
            assert r.status == 200
        (deleted,) = await _frames(watch, 1)
        assert deleted["type"] == "DELETED" and deleted["object"]["metadata"]["name"] == "w"
    # bookmarks: the kind with only a resource version
    async with http.get("/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true",
                        headers={"Accept": _ASKED}) as watch:
        (bookmark,) = await _frames(watch, 1)
    assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["kind"] == "ConfigMap"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) > int(rv)


async def test_lists_in_protobuf_keep_their_continue_token(http: aiohttp.ClientSession) -> None:
    for i in range(5):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}}
        async with http.post("/api/v1/namespaces/default/configmaps", data=wire().encode(cm),
                             headers={"Content-Type": PROTOBUF}) as r:
            assert r.status == 201
    names, token = [], ""
    while True:
        async with http.get(f"/api/v1/namespaces/default/configmaps?limit=2&continue={token}",
                            headers={"Accept": _ASKED}) as r:
            page = decode_envelope(await r.read())
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] > 0
    assert names == [f"c{i}" for i in range(5)]


async def test_negotiation(http: aiohttp.ClientSession, kubectl: Kubectl) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.x.example.com"},
           "spec": {"group": "x.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    # a CRD itself is a built-in kind: sent in protobuf (its schema as JSONSchemaProps)
    async with http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", data=wire().encode(crd),
                         headers={"Content-Type": PROTOBUF, "Accept": _ASKED}) as r:
        assert r.status == 201, await r.text()
        made = decode_envelope(await r.read())
    schema = made["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    await kubectl("wait", "--for=condition=Established", "crd/widgets.x.example.com", "--timeout=30s")
    path = "/apis/x.example.com/v1/namespaces/default/widgets"
    async with http.post(path, json={"apiVersion": "x.example.com/v1", "kind": "Widget",
                                     "metadata": {"name": "w"}}) as r:
        assert r.status == 201
    # custom resources have no protobuf: JSON when JSON is also asked, else 406 (upstream's)
    async with http.get(f"{path}/w", headers={"Accept": _ASKED}) as r:
        assert r.status == 200 and r.content_type == "application/json"
    async with http.get(f"{path}/w", headers={"Accept": PROTOBUF}) as r:
        assert r.status == 406 and (await r.json())["reason"] == "NotAcceptable"
    async with http.get(f"{path}?watch=1", headers={"Accept": PROTOBUF}) as r:
        assert r.status == 406
    # JSON first wins; a Table is JSON whatever else is asked
    async with http.get("/api/v1/namespaces", headers={"Accept": f"application/json, {PROTOBUF}"}) as r:
        assert r.content_type == "application/json"
    table = f"application/json;as=Table;v=v1;g=meta.k8s.io, {PROTOBUF}"
    async with http.get("/api/v1/namespaces", headers={"Accept": table}) as r:
        assert r.content_type == "application/json" and (await r.json())["kind"] == "Table"


async def test_bad_protobuf_bodies_are_refused_clearly(http: aiohttp.ClientSession) -> None:
    pods = "/api/v1/namespaces/default/pods"
    secret = wire().encode({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    cases = [
        (b'{"kind": "Pod"}', 400, "magic number"),
        (b"k8s\x00\xff\xff\xff", 400, "runtime.Unknown"),
        (b"k8s\x00" + bytes([0x0A, 0x0B, 0x0A, 0x02]) + b"v1" + bytes([0x12, 0x05]) + b"Thing", 415, "v1 Thing"),
        (secret, 400, "Secret"),  # a Secret sent to the pods
        (secret[:-3], 400, "runtime.Unknown"),  # truncated
    ]
    for body, code, words in cases:
        async with http.post(pods, data=body, headers={"Content-Type": PROTOBUF}) as r:
            status = await r.json()
            assert (r.status, status["kind"]) == (code, "Status"), (body, status)
            assert words in status["message"], (words, status["message"])
