"""How the apiserver reads exec/attach/port-forward options and picks a container."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from apiserver.registry.core.pod_location import choose_container
from apiserver.registry.core.pod_streams import forward_ports, stream_params
from kubeling import errors
from protos.kubeling.v1 import core_pb2, meta_pb2


def _pod(*names: str, init: tuple[str, ...] = (), default: str = "") -> core_pb2.Pod:
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="default"),
                       spec=core_pb2.PodSpec(containers=[core_pb2.Container(name=n) for n in names],
                                             initContainers=[core_pb2.Container(name=n) for n in init]))
    if default:
        pod.metadata.annotations["kubectl.kubernetes.io/default-container"] = default
    return pod


def test_stream_params_default_and_translate() -> None:
    # PodExecOptions' defaults: stdout and stderr on, stdin and tty off
    assert stream_params(MultiDict()) == [("output", "1"), ("error", "1")]
    assert stream_params(MultiDict(stdin="true", stdout="true", tty="true")) == [
        ("input", "1"), ("output", "1"), ("tty", "1")]  # a terminal has no separate stderr
    # as the parameter codec reads booleans: "0"/"false" in any case are false, the rest true
    assert stream_params(MultiDict(stdin="True", stdout="False", stderr="0")) == [("input", "1")]
    with pytest.raises(errors.BadRequest, match="you must specify at least 1 of stdin, stdout, stderr"):
        stream_params(MultiDict(stdout="false", stderr="false"))


def test_forward_ports() -> None:
    assert forward_ports(MultiDict([("ports", "80"), ("ports", "8080,9000")])) == [80, 8080, 9000]
    assert forward_ports(MultiDict()) == []
    for bad in ("0", "65536", "http", ""):
        with pytest.raises(errors.BadRequest, match="ports: Invalid value"):
            forward_ports(MultiDict(ports=bad))


def test_choose_container() -> None:
    assert choose_container(_pod("only"), "") == "only"
    assert choose_container(_pod("a", "b", default="b"), "") == "b"
    assert choose_container(_pod("a", "b", default="gone"), "a") == "a"
    assert choose_container(_pod("a", init=("setup",)), "setup") == "setup"
    with pytest.raises(errors.BadRequest) as many:
        choose_container(_pod("a", "b", init=("setup",), default="gone"), "")
    assert many.value.message == ("a container name must be specified for pod p, choose one of: [a b] "
                                  "or one of the init containers: [setup]")
    with pytest.raises(errors.BadRequest, match="^container c is not valid for pod p$"):
        choose_container(_pod("a", "b"), "c")
