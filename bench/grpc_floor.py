"""The floor under any Python apiserver here: a bare grpc.aio server whose Create only
decodes the pod and runs the same etcd create-if-absent transaction. Started as its own
process by bench.apiserver, to show how much of a create's cost is gRPC itself."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc

from apiserver.storage.etcd import Storage
from kubeling import scheme
from protos.kubeling.v1 import core_pb2, meta_pb2


async def serve(etcd: str, port_file: str) -> None:
    storage = await Storage.connect(etcd)

    async def create(pod: core_pb2.Pod, _: grpc.aio.ServicerContext) -> core_pb2.Pod:
        key = f"/floor/pods/{pod.metadata.namespace}/{pod.metadata.name}".encode()
        pod.metadata.resourceVersion = str(await storage.create(key, pod.SerializeToString()))
        return pod

    async def list_(_: meta_pb2.ListRequest, __: grpc.aio.ServicerContext) -> Any:
        return scheme.PODS.list_message()

    handler = grpc.method_handlers_generic_handler("kubeling.v1.Pods", {
        "Create": grpc.unary_unary_rpc_method_handler(
            create, request_deserializer=core_pb2.Pod.FromString, response_serializer=core_pb2.Pod.SerializeToString),
        "List": grpc.unary_unary_rpc_method_handler(
            list_, request_deserializer=meta_pb2.ListRequest.FromString,
            response_serializer=scheme.PODS.list_message.SerializeToString),
    })
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    Path(port_file).write_text(f"{port}\n")
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
