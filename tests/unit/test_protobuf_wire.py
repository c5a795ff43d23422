"""Upstream's protobuf wire layout (protos/upstream/wire.json) and the transcoder built on it,
checked against sources independent of it: bytes the real kubectl (Go) sent, and this
project's messages whose field numbers were written by hand after upstream's."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.endpoints.rest.protobuf import decode_envelope, prune_zero_fields, wire
from kubeling import errors, scheme
from kubeling.kjson import to_json
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2, rbac_pb2
from tests.objects import pod

# `kubectl create namespace x` as kubectl v1.3x sends it (its -v=8 dump): Go writes every
# non-pointer field, empty ones too.
_KUBECTL_NAMESPACE = bytes.fromhex(
    "6b3873000a0f0a0276311209 4e616d657370616365 1219 0a11 0a0178 1200 1a00 2200 2a00 3200 3800 4200"
    " 1200 1a02 0a00 1a00 2200".replace(" ", ""))


def test_every_served_kind_has_its_upstream_message() -> None:
    """A kind added to the scheme needs `python -m cluster.upstreamwire` run again."""
    for r in scheme.BUILTIN:
        for kind in (r.kind, f"{r.kind}List"):
            assert wire().kind_message(r.api_version, kind) is not None, (r.api_version, kind)


def test_kubectl_bytes_read_as_its_json() -> None:
    data = decode_envelope(_KUBECTL_NAMESPACE)
    # Go's zero fields are on the wire (selfLink "", generation 0, phase ""), not in its JSON
    assert data == {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}, "spec": {},
                    "status": {}}
    assert prune_zero_fields(data, core_pb2.Namespace.DESCRIPTOR) == data


def test_zero_fields_with_presence_are_kept() -> None:
    data = {"spec": {"replicas": 0, "paused": False, "minReadySeconds": 0, "selector": {},
                     "template": {"spec": {"containers": [], "hostNetwork": False, "nodeName": ""}}},
            "metadata": {"name": "d", "finalizers": [], "generation": 0}}
    prune_zero_fields(data, apps_pb2.Deployment.DESCRIPTOR)
    # replicas is a pointer upstream (optional here): 0 means zero replicas, not unset
    assert data == {"spec": {"replicas": 0, "selector": {}, "template": {"spec": {}}}, "metadata": {"name": "d"}}


def _without_empties(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empties(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_without_empties(v) for v in value]
    return value


def _hand_numbered() -> list[tuple[str, str, Any]]:
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": "x"}), spec=pod("t").spec)
    container = template.spec.containers[0]
    container.env.add(name="A", value="1")
    container.ports.add(name="http", containerPort=8080, protocol="TCP")
    # (not probes or volumes: upstream nests their handler and source in an embedded struct,
    # which these messages flatten, so their numbers differ; the layout has the nesting)
    template.spec.tolerations.add(key="k", operator="Exists", effect="NoSchedule")
    deployment = apps_pb2.Deployment(
        metadata=meta_pb2.ObjectMeta(name="d", namespace="default", labels={"a": "b"}, generation=3,
                                     ownerReferences=[meta_pb2.OwnerReference(apiVersion="v1", kind="X", name="o",
                                                                              uid="u", controller=True)]),
        spec=apps_pb2.DeploymentSpec(replicas=0, selector=meta_pb2.LabelSelector(matchLabels={"app": "x"}),
                                     template=template, revisionHistoryLimit=4),
        status=apps_pb2.DeploymentStatus(replicas=2, readyReplicas=1, observedGeneration=3))
    deployment.metadata.creationTimestamp.FromSeconds(1767323045)
    deployment.spec.strategy.rollingUpdate.maxSurge.strVal = "25%"
    deployment.spec.strategy.rollingUpdate.maxSurge.type = 1
    role = rbac_pb2.Role(metadata=meta_pb2.ObjectMeta(name="r", namespace="default"),
                         rules=[rbac_pb2.PolicyRule(verbs=["get"], apiGroups=[""], resources=["pods"])])
    secret = core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="s"), data={"k": b"\x00\xffbytes"}, type="Opaque")
    return [("apps/v1", "Deployment", deployment), ("rbac.authorization.k8s.io/v1", "Role", role),
            ("v1", "Secret", secret)]


@pytest.mark.parametrize("api_version,kind,message", _hand_numbered(), ids=lambda v: getattr(v, "__name__", None))
def test_hand_numbered_messages_read_alike(api_version: str, kind: str, message: Any) -> None:
    """These messages number their fields as upstream by hand: their bytes, read through the
    extracted layout, are their own JSON; and the JSON, encoded, is their bytes again."""
    name = wire().kind_message(api_version, kind)
    assert name is not None
    upstream = wire().message_class(name).FromString(message.SerializeToString())
    read = wire().read(upstream, name)
    expected = _without_empties(to_json(message))
    for c in expected.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        assert c.pop("resources") == {}  # written always in JSON (as Go does), nothing on the wire
    assert read == expected
    again = decode_envelope(wire().encode({"apiVersion": api_version, "kind": kind, **read}))
    assert again == {"kind": kind, "apiVersion": api_version, **read}


def test_apimachinery_types_as_upstream_marshals_them() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "a.b", "creationTimestamp": "2026-01-02T03:04:05Z"},
           "spec": {"group": "b", "scope": "Namespaced", "names": {"plural": "a", "kind": "A"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True, "required": ["spec"],
                        "properties": {"spec": {"type": "object", "default": {"n": 1}, "items": [{"type": "string"}],
                                                "additionalProperties": False,
                                                "x-kubernetes-int-or-string": True}},
                        "$ref": "#/x"}}}]}}
    assert decode_envelope(wire().encode(crd)) == crd
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
             "eventTime": "2026-01-02T03:04:05.123456Z", "regarding": {"kind": "Pod", "name": "p"},
             "series": {"count": 2, "lastObservedTime": "2026-01-02T03:04:06.000001Z"}}
    assert decode_envelope(wire().encode(event)) == event
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"cpu": "1500m", "pods": "10"}}}
    assert decode_envelope(wire().encode(quota)) == quota
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
              "status": {"user": {"username": "u", "extra": {"scopes": ["a", "b"]}}}}
    assert decode_envelope(wire().encode(review)) == review


@pytest.mark.parametrize("body,words", [
    (b"{}", "magic number"),
    (b"k8s\x00\x0a\x05\x0a\x02v1", "runtime.Unknown"),
    (_KUBECTL_NAMESPACE[:-5], "runtime.Unknown"),
])
def test_bad_envelopes(body: bytes, words: str) -> None:
    with pytest.raises(errors.BadRequest, match=words):
        decode_envelope(body)


def test_times_out_of_range_are_refused() -> None:
    name = wire().kind_message("v1", "ConfigMap")
    assert name is not None
    cm = wire().message_class(name)()
    cm.metadata.creationTimestamp.seconds = -(2 ** 40)
    unknown = wire().message_class(wire().kinds["runtime/Unknown"])()
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind, unknown.raw = "v1", "ConfigMap", cm.SerializeToString()
    with pytest.raises(errors.BadRequest, match="creationTimestamp: time .* out of range"):
        decode_envelope(b"k8s\x00" + unknown.SerializeToString())
