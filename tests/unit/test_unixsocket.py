"""Unix socket paths longer than sun_path, as gRPC reaches them (kubeling.unixsocket)."""

from __future__ import annotations

from pathlib import Path


async def test_a_socket_path_longer_than_sun_path_is_reached_through_its_directory(tmp_path: Path) -> None:
    import grpc

    from kubeling.unixsocket import SocketAddress
    from protos.pluginregistration.v1 import api_pb2, api_pb2_grpc

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "plugin-reg.sock"
    assert len(str(path)) > 108

    class Registration(api_pb2_grpc.RegistrationServicer):
        async def GetInfo(self, request, context):  # noqa: N802 (the gRPC method's name)
            return api_pb2.PluginInfo(name="deep")

    server = grpc.aio.server()
    api_pb2_grpc.add_RegistrationServicer_to_server(Registration(), server)
    bind = SocketAddress(path)
    server.add_insecure_port(bind.target())
    await server.start()
    bind.close()
    client = SocketAddress(f"unix://{path}")
    try:
        async with grpc.aio.insecure_channel(client.target()) as channel:
            info = await api_pb2_grpc.RegistrationStub(channel).GetInfo(api_pb2.InfoRequest(), timeout=5)
        assert info.name == "deep" and path.exists()
    finally:
        client.close()
        await server.stop(0)
