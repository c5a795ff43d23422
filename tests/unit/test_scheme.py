"""The scheme: its entries, the gRPC services built from them, and what follows it when
entries come and go at run time (discovery, OpenAPI)."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool

from apiserver.endpoints.discovery import Discovery
from apiserver.endpoints.rest.openapi import OpenAPI
from apiserver.registry import STRATEGIES, strategy_for
from kubeling import scheme
from kubeling.client import Client
from kubeling.scheme import Method, ResourceType, Scheme, Subresource
from protos.kubeling.v1 import core_pb2


def test_every_built_in_resource_has_a_strategy_and_no_strategy_is_left_over() -> None:
    assert set(STRATEGIES) == set(scheme.BUILTIN)
    for rt in scheme.BUILTIN:
        strategy = strategy_for(rt)
        assert (strategy.kind, strategy.plural, strategy.message) == (rt.kind, rt.plural, rt.message)


def test_the_services_are_the_api_as_it_always_was() -> None:
    """Each resource's service, List and WatchEvent, by the names and numbers every gRPC
    client of the API knows (the .proto once declared them: kubeling.v1.Pods, ...)."""
    pool = descriptor_pool.Default()
    for rt in scheme.BUILTIN:
        if rt.custom:
            continue  # kept as JSON: the CustomResources service (the next test)
        service = pool.FindServiceByName(rt.service_name)
        methods = {m.name: (m.input_type.full_name, m.output_type.full_name, m.server_streaming)
                   for m in service.methods}
        own = rt.message.DESCRIPTOR.full_name
        # a second version of a resource names its messages with its version (HorizontalPodAutoscalerV1List)
        base = rt.kind + (rt.version.upper() if rt.view_of is not None else "")
        assert methods["Create"] == (own, own, False) and methods["Update"] == (own, own, False)
        assert methods["Get"] == ("kubeling.v1.GetRequest", own, False)
        assert methods["List"] == ("kubeling.v1.ListRequest", f"kubeling.v1.{base}List", False)
        assert methods["Delete"] == ("kubeling.v1.DeleteRequest", own, False)
        assert methods["Watch"] == ("kubeling.v1.WatchRequest", f"kubeling.v1.{base}WatchEvent", True)
        assert ("UpdateStatus" in methods) == rt.has_status
        listed = rt.list_message.DESCRIPTOR.fields_by_name
        assert (listed["metadata"].number, listed["items"].number) == (1, 2)
        event = rt.event_message.DESCRIPTOR.fields_by_name
        assert (event["type"].number, event["object"].number, event["batch"].number) == (1, 2, 3)
    pods = {m.name: m for m in pool.FindServiceByName("kubeling.v1.Pods").methods}
    assert pods["Bind"].input_type.full_name == "kubeling.v1.Binding"
    assert pods["Log"].output_type.full_name == "kubeling.v1.PodLogChunk" and pods["Log"].server_streaming
    assert pods["Evict"].input_type.full_name == "kubeling.v1.Eviction"
    tokens = pool.FindServiceByName("kubeling.v1.ServiceAccounts").methods_by_name["CreateToken"]
    assert tokens.output_type.full_name == "kubeling.v1.TokenRequest"
    assert scheme.ENDPOINTS.service_name == "kubeling.v1.EndpointsService"  # "Endpoints" is the message's name
    assert scheme.PRIORITYCLASSES.service_name == "kubeling.v1.PriorityClasses"


def test_resources_kept_as_json_share_the_custom_resources_service() -> None:
    """CustomResourceDefinitions (and custom resources) are named in each request, so a
    kind defined at run time needs no service (nor List message) of its own."""
    crds = scheme.CUSTOMRESOURCEDEFINITIONS
    assert crds.custom and crds.service_name == scheme.CUSTOM_SERVICE and crds.methods == {}
    service = descriptor_pool.Default().FindServiceByName(scheme.CUSTOM_SERVICE)
    methods = {m.name: (m.input_type.full_name, m.output_type.full_name) for m in service.methods}
    assert methods["Create"] == ("kubeling.v1.CustomObjectRequest", "kubeling.v1.CustomResource")
    assert methods["Watch"] == ("kubeling.v1.CustomWatchRequest", "kubeling.v1.CustomResourceWatchEvent")
    assert crds.list_message.DESCRIPTOR.full_name == "kubeling.v1.CustomResourceList"
    with pytest.raises(ValueError, match="CustomResource message"):
        scheme.ResourceType("x.io", "v1", "Thing", "things", scheme.PODS.message, custom=True)
    # any kind, even a built-in's name, in another group: no descriptor is added for it
    scheme.ResourceType("x.io", "v1", "Pod", "pods", crds.message, custom=True)


def test_lookups() -> None:
    s = Scheme.builtin()
    assert s.lookup("apps", "v1", "deployments") is scheme.DEPLOYMENTS
    assert s.lookup("", "v1", "deployments") is None
    assert s.for_kind("rbac.authorization.k8s.io/v1", "Role") is scheme.ROLES
    assert s.for_kind("v1", "Pod") is scheme.PODS
    assert list(s.groups())[0] == "" and s.groups()["apps"] == ["v1"]
    assert scheme.DEPLOYMENTS.group_resource == "deployments.apps" and scheme.PODS.group_resource == "pods"
    assert scheme.PODS.subresource("log") is not None and scheme.NODES.subresource("log") is None


def test_entries_registered_at_run_time_are_served_at_once_and_go_again() -> None:
    s = Scheme.builtin()
    discovery, openapi = Discovery(s), OpenAPI(s)
    assert discovery.api_group("example.kubeling.io") is None
    assert openapi.document("apis/example.kubeling.io/v1alpha1") is None
    widgets = ResourceType("example.kubeling.io", "v1alpha1", "Widget", "widgets", core_pb2.ConfigMap,
                           short_names=("wd",), categories=("all",), subresources=(Subresource("status"),))
    before = s.generation
    s.register(widgets)
    assert s.generation > before and s.lookup("example.kubeling.io", "v1alpha1", "widgets") is widgets
    group = discovery.api_group("example.kubeling.io")
    assert group is not None and group["preferredVersion"]["version"] == "v1alpha1"
    assert "example.kubeling.io" in [g["name"] for g in discovery.api_group_list()["groups"]]
    listing = discovery.resource_list("example.kubeling.io", "v1alpha1")
    assert listing is not None
    assert [(r["name"], r["kind"], r.get("shortNames")) for r in listing["resources"]] == [
        ("widgets", "Widget", ["wd"]), ("widgets/status", "Widget", None)]
    document = openapi.document("apis/example.kubeling.io/v1alpha1")
    assert document is not None and "/apis/example.kubeling.io/v1alpha1/namespaces/{namespace}/widgets/{name}/status" \
        in document["paths"]
    assert "io.k8s.api.example.v1alpha1.Widget" in document["components"]["schemas"]
    assert "apis/example.kubeling.io/v1alpha1" in openapi.index()["paths"]
    # its gRPC service exists too (what a client of it would call)
    methods = [m.name for m in descriptor_pool.Default().FindServiceByName("kubeling.v1.Widgets").methods]
    assert methods == ["Create", "Get", "List", "Update", "UpdateStatus", "Delete", "Watch"]

    s.unregister(widgets)
    assert discovery.api_group("example.kubeling.io") is None
    assert openapi.document("apis/example.kubeling.io/v1alpha1") is None


def test_one_entry_per_resource_and_kind() -> None:
    s = Scheme.builtin()
    with pytest.raises(ValueError, match="pods .v1. is already registered"):
        s.register(ResourceType("", "v1", "Other", "pods", core_pb2.Pod))
    with pytest.raises(ValueError, match="kubeling.v1.PodList exists already: the kind Pod"):
        ResourceType("", "v1", "Pod", "otherpods", core_pb2.Pod)

    with pytest.raises(ValueError, match="a subresource is listed twice"):
        ResourceType("", "v1", "Twice", "twices", core_pb2.Pod, subresources=(Subresource("status"),) * 2)
    assert Method("X", core_pb2.Pod).response is None


async def test_the_client_reaches_every_entry() -> None:
    client = Client("127.0.0.1:1")
    try:
        assert client.pods.resource is scheme.PODS and client.pods is client.resource(scheme.PODS)
        assert client.resource(scheme.PODTEMPLATES).kind == "PodTemplate"  # no attribute needed
        assert client.endpointslices.resource is scheme.ENDPOINTSLICES
    finally:
        await client.close()
