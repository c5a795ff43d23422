"""The kubelet's CRI client (kubelet.runtime.Runtime) against one CRI server, over its
socket and in process: the same answers and the same errors (code and details) both ways,
and a request the runtime keeps is the runtime's own copy."""

from __future__ import annotations

import grpc
import pytest

from cri.server import CRIServer
from kubelet.runtime import CRICallError, Runtime
from protos.runtime.v1 import api_pb2


def _clients(server: CRIServer) -> dict[str, Runtime]:
    return {"socket": Runtime(server.address),
            "in process": Runtime.in_process(server.address, server.runtime_service, server.image_service)}


async def _error(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(CRICallError) as err:
        await call  # type: ignore[misc]
    return err.value.code, err.value.details


async def test_same_answers_and_errors_both_ways(cri_server: CRIServer) -> None:
    clients = _clients(cri_server)
    try:
        answers = {}
        for how, runtime in clients.items():
            version = await runtime.version()
            answers[how] = (
                version.runtime_name, await runtime.image_present("busybox"), await runtime.image_present("nope:1"),
                await _error(runtime.container_status("missing")),
                await _error(runtime.run_sandbox(api_pb2.PodSandboxConfig())),
                await _error(runtime.update_pod_cidr("10.1.0.0/33")))
        assert answers["socket"] == answers["in process"], answers
        name, busybox, nope, missing, invalid, cidr = answers["in process"]
        assert (name, busybox, nope) == ("kubeling", True, False)
        assert missing[0] == grpc.StatusCode.NOT_FOUND and "missing" in missing[1]
        assert invalid == (grpc.StatusCode.INVALID_ARGUMENT, "config.metadata.name is required")
        assert cidr[0] == grpc.StatusCode.INVALID_ARGUMENT and "pod_cidr" in cidr[1]
    finally:
        for runtime in clients.values():
            await runtime.close()


async def test_the_runtime_keeps_its_own_copy_of_a_request(cri_server: CRIServer) -> None:
    runtime = _clients(cri_server)["in process"]
    config = api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name="p", namespace="default", uid="u1"), hostname="p",
        linux=api_pb2.LinuxPodSandboxConfig(security_context=api_pb2.LinuxSandboxSecurityContext(
            namespace_options=api_pb2.NamespaceOption(network=api_pb2.NODE))))  # no CNI needed
    sandbox_id = await runtime.run_sandbox(config)
    try:
        config.metadata.name = "changed afterwards"
        assert (await runtime.sandbox_status(sandbox_id)).metadata.name == "p"
    finally:
        await runtime.stop_sandbox(sandbox_id)
        await runtime.remove_sandbox(sandbox_id)
        await runtime.close()
