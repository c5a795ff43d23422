"""The in-process CRI transport turns what a handler does into what a gRPC client would
see: a stalled handler (a fault injected by this test's servicer) becomes
DEADLINE_EXCEEDED, an unexpected exception UNKNOWN."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from kubelet.runtime import CRICallError, Runtime
from protos.runtime.v1 import api_pb2, api_pb2_grpc


class FaultyRuntimeService(api_pb2_grpc.RuntimeServiceServicer):
    """Fault injection: Version never answers, Status breaks."""

    async def Version(self, request: api_pb2.VersionRequest, context: object) -> api_pb2.VersionResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def Status(self, request: api_pb2.StatusRequest, context: object) -> api_pb2.StatusResponse:
        raise KeyError("boom")


async def test_deadline_and_unexpected_errors() -> None:
    runtime = Runtime.in_process("unix:///nowhere", FaultyRuntimeService(), api_pb2_grpc.ImageServiceServicer(),
                                 timeout=0.2)
    with pytest.raises(CRICallError) as stalled:
        await runtime.version()
    assert stalled.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(CRICallError) as broken:
        await runtime.status()
    assert broken.value.code == grpc.StatusCode.UNKNOWN and "KeyError" in broken.value.details
