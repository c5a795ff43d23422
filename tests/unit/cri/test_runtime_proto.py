"""protos/runtime/v1 stays wire-compatible with upstream cri-api runtime.v1.

The numbers below are copied from kubernetes/cri-api pkg/apis/runtime/v1/api.proto;
the ones chosen are those that are not sequential upstream, where a hand-written
subset goes wrong first. A CRI client (crictl, critest, the kubelet) only works if
service paths and field numbers match exactly.
"""

from __future__ import annotations

import pytest

from protos.runtime.v1 import api_pb2

UPSTREAM_FIELD_NUMBERS: list[tuple[str, str, int]] = [
    ("ImageSpec", "image", 1),
    ("ImageSpec", "annotations", 2),
    ("ImageSpec", "user_specified_image", 18),
    ("ImageSpec", "runtime_handler", 19),
    ("ImageSpec", "image_ref", 20),
    ("LinuxSandboxSecurityContext", "run_as_group", 8),
    ("LinuxSandboxSecurityContext", "readonly_rootfs", 4),
    ("LinuxSandboxSecurityContext", "supplemental_groups_policy", 11),
    ("LinuxSandboxSecurityContext", "seccomp", 9),
    ("LinuxContainerSecurityContext", "run_as_group", 12),
    ("LinuxContainerSecurityContext", "run_as_username", 6),
    ("LinuxContainerSecurityContext", "no_new_privs", 11),
    ("LinuxContainerSecurityContext", "masked_paths", 13),
    ("LinuxContainerSecurityContext", "supplemental_groups_policy", 17),
    ("PodSandboxConfig", "linux", 8),
    ("ContainerConfig", "log_path", 11),
    ("ContainerConfig", "linux", 15),
    ("ContainerConfig", "CDI_devices", 17),
    ("ContainerConfig", "stop_signal", 18),
    ("ContainerStatus", "reason", 10),
    ("ContainerStatus", "log_path", 15),
    ("ContainerStatus", "image_id", 17),
    ("ContainerStatus", "stop_signal", 19),
    ("Container", "image_id", 10),
    ("Namespace", "options", 2),
    ("PodSandboxStatusResponse", "containers_statuses", 3),
    ("PodSandboxStatusResponse", "timestamp", 4),
    ("UpdateContainerResourcesRequest", "annotations", 4),
    ("LinuxContainerResources", "memory_swap_limit_in_bytes", 10),
    ("Mount", "uidMappings", 6),
    ("Mount", "image_sub_path", 10),
    ("ContainerStats", "io", 6),
    ("LinuxPodSandboxStats", "io", 6),
    ("MemoryUsage", "psi", 8),
    ("StatusResponse", "features", 4),
    ("ExecRequest", "audit_request_id", 7),
    ("AttachRequest", "audit_request_id", 6),
    ("AuthConfig", "registry_token", 6),
]

UPSTREAM_ENUMS: list[tuple[str, str, int]] = [
    ("ContainerState", "CONTAINER_UNKNOWN", 3),
    ("PodSandboxState", "SANDBOX_NOTREADY", 1),
    ("NamespaceMode", "TARGET", 3),
    ("Signal", "SIGKILL", 13),
    ("Signal", "SIGTERM", 23),
    ("Signal", "SIGRTMAX", 65),
    ("CgroupDriver", "CGROUPFS", 1),
    ("Protocol", "SCTP", 2),
]


def test_package_and_services() -> None:
    assert api_pb2.DESCRIPTOR.package == "runtime.v1"
    services = api_pb2.DESCRIPTOR.services_by_name
    assert services["RuntimeService"].full_name == "runtime.v1.RuntimeService"
    assert services["ImageService"].full_name == "runtime.v1.ImageService"


def test_every_method_takes_its_own_request_and_response() -> None:
    # Upstream names every message <Method>Request/<Method>Response, so a method
    # wired to the wrong message would be caught here.
    for service in api_pb2.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            assert method.input_type.name == f"{method.name}Request", method.full_name
            assert method.output_type.name == f"{method.name}Response", method.full_name
            assert not method.client_streaming and not method.server_streaming


@pytest.mark.parametrize(("message", "field", "number"), UPSTREAM_FIELD_NUMBERS)
def test_field_numbers_match_upstream(message: str, field: str, number: int) -> None:
    descriptor = api_pb2.DESCRIPTOR.message_types_by_name[message]
    assert descriptor.fields_by_name[field].number == number


@pytest.mark.parametrize(("enum", "name", "number"), UPSTREAM_ENUMS)
def test_enum_values_match_upstream(enum: str, name: str, number: int) -> None:
    assert api_pb2.DESCRIPTOR.enum_types_by_name[enum].values_by_name[name].number == number


def test_known_wire_bytes() -> None:
    # ContainerStatus{id="c", reason="OOMKilled", image_id="sha256:x"} as upstream encodes it:
    # field 1 (0x0a), field 10 (0x52), field 17 (0x8a 0x01).
    status = api_pb2.ContainerStatus(id="c", reason="OOMKilled", image_id="sha256:x")
    assert status.SerializeToString() == (
        b"\x0a\x01c" + b"\x52\x09OOMKilled" + b"\x8a\x01\x08sha256:x"
    )
