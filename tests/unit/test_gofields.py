"""The fields Go's encoder always writes (kubeling.gofields), as the JSON encoder writes them."""

from __future__ import annotations

from google.protobuf import descriptor_pool, message_factory

from kubeling import scheme
from kubeling.gofields import ALWAYS_WRITTEN
from kubeling.kjson import to_json
from protos.kubeling.v1 import autoscaling_pb2

# every message file of the API, loaded in the pool
_LOADED = (autoscaling_pb2, scheme.BUILTIN)


def test_every_entry_names_a_field_of_its_message() -> None:
    pool = descriptor_pool.Default()
    for name, fields in ALWAYS_WRITTEN.items():
        desc = pool.FindMessageTypeByName(f"kubeling.v1.{name}")
        assert set(fields) <= set(desc.fields_by_name), (name, set(fields) - set(desc.fields_by_name))


def test_an_empty_message_is_written_with_them() -> None:
    pool = descriptor_pool.Default()
    for name, fields in ALWAYS_WRITTEN.items():
        message = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"kubeling.v1.{name}"))()
        assert set(fields) <= set(to_json(message)), name


def test_what_upstream_writes_of_a_node_and_a_service() -> None:
    """As `kubectl get -o json` shows them from kube-apiserver: what typed clients require."""
    node = to_json(scheme.NODES.message())
    assert node["status"]["nodeInfo"]["kubeProxyVersion"] == "" and node["status"]["nodeInfo"]["machineID"] == ""
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert to_json(scheme.SERVICES.message())["status"] == {"loadBalancer": {}}
    status = to_json(scheme.PODS.message(status={"containerStatuses": [{"name": "c"}]}))["status"]
    assert status["containerStatuses"] == [{"name": "c", "state": {}, "lastState": {}, "ready": False,
                                             "restartCount": 0, "image": "", "imageID": ""}]
