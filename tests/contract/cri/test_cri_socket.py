"""The CRI server over its unix socket, with the generated runtime.v1 stubs (what crictl
and the kubelet use): runtime information, status, and the whole ImageService."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from cri.images.builtin import BUSYBOX_IMAGE, PAUSE_IMAGE
from cri.network import DEFAULT_CONFLIST
from cri.runtime_service import RuntimeService
from cri.server import CRIConfig, CRIServer
from protos.runtime.v1 import api_pb2, api_pb2_grpc


@dataclass
class Client:
    server: CRIServer
    channel: grpc.aio.Channel
    runtime: api_pb2_grpc.RuntimeServiceStub
    images: api_pb2_grpc.ImageServiceStub


def _config(base: Path) -> CRIConfig:
    return CRIConfig(socket=base / "cri.sock", state_dir=base / "state", cni_conf_dir=base / "net.d",
                     cni_cache_dir=base / "cni-cache", runc_root=base / "runc")


async def _connect(server: CRIServer) -> Client:
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    return Client(server, channel, api_pb2_grpc.RuntimeServiceStub(channel), api_pb2_grpc.ImageServiceStub(channel))


@pytest.fixture
async def cri() -> AsyncIterator[Client]:
    # A short path: unix socket paths are limited to 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="kcri-"))
    config = _config(base)
    client = await _connect(CRIServer(config))
    yield client
    await client.channel.close()
    await client.server.stop()
    shutil.rmtree(base)


async def test_version(cri: Client) -> None:
    version = await cri.runtime.Version(api_pb2.VersionRequest(version="v1"))
    assert (version.runtime_name, version.runtime_api_version) == ("kubeling", "v1")
    assert version.version and version.runtime_version


async def test_network_ready_follows_the_pod_cidr(cri: Client) -> None:
    status = await cri.runtime.Status(api_pb2.StatusRequest(verbose=True))
    conditions = {c.type: c for c in status.status.conditions}
    assert conditions["RuntimeReady"].status
    assert not conditions["NetworkReady"].status
    assert conditions["NetworkReady"].reason == "NetworkPluginNotReady"
    assert "no valid networks" in conditions["NetworkReady"].message
    assert json.loads(status.info["config"])["cniNetwork"] is None

    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await cri.runtime.UpdateRuntimeConfig(api_pb2.UpdateRuntimeConfigRequest(
            runtime_config=api_pb2.RuntimeConfig(network_config=api_pb2.NetworkConfig(pod_cidr="10.1.0.0/33"))))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "runtime_config.network_config.pod_cidr" in (bad.value.details() or "")

    await cri.runtime.UpdateRuntimeConfig(api_pb2.UpdateRuntimeConfigRequest(
        runtime_config=api_pb2.RuntimeConfig(network_config=api_pb2.NetworkConfig(pod_cidr="10.244.3.0/24"))))
    conflist = json.loads((cri.server.config.cni_conf_dir / DEFAULT_CONFLIST).read_text())
    assert conflist["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.3.0/24"}]]
    status = await cri.runtime.Status(api_pb2.StatusRequest())
    assert all(c.status for c in status.status.conditions)
    assert not status.info  # only when verbose


async def test_runtime_config_and_streaming_requests(cri: Client) -> None:
    config = await cri.runtime.RuntimeConfig(api_pb2.RuntimeConfigRequest())
    assert config.linux.cgroup_driver == api_pb2.CGROUPFS
    # Streaming RPCs check their target before handing out a URL, and refuse bad requests by field.
    for call, request, code, words in (
            (cri.runtime.Exec, api_pb2.ExecRequest(container_id="c", cmd=["sh"], stdout=True),
             grpc.StatusCode.NOT_FOUND, "container 'c' not found"),
            (cri.runtime.Attach, api_pb2.AttachRequest(container_id="c", stdout=True),
             grpc.StatusCode.NOT_FOUND, "container 'c' not found"),
            (cri.runtime.PortForward, api_pb2.PortForwardRequest(pod_sandbox_id="s", port=[80]),
             grpc.StatusCode.NOT_FOUND, "'s'"),
            (cri.runtime.Exec, api_pb2.ExecRequest(cmd=["sh"], stdout=True),
             grpc.StatusCode.INVALID_ARGUMENT, "container_id"),
            (cri.runtime.PortForward, api_pb2.PortForwardRequest(), grpc.StatusCode.INVALID_ARGUMENT,
             "pod_sandbox_id")):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(request)
        assert err.value.code() == code
        assert words in (err.value.details() or "")
    # Every RPC of the subset has a handler (the generated base class would raise).
    methods = api_pb2.DESCRIPTOR.services_by_name["RuntimeService"].methods
    assert [m.name for m in methods if m.name not in RuntimeService.__dict__] == []


async def test_image_service(cri: Client) -> None:
    listed = (await cri.images.ListImages(api_pb2.ListImagesRequest())).images
    by_tag = {tag: image for image in listed for tag in image.repo_tags}
    assert set(by_tag) == {BUSYBOX_IMAGE, PAUSE_IMAGE}
    busybox = by_tag[BUSYBOX_IMAGE]
    assert busybox.size > 0 and busybox.repo_digests[0].startswith("docker.io/library/busybox@sha256:")
    assert by_tag[PAUSE_IMAGE].pinned and not busybox.pinned

    for name in ("busybox", "busybox:latest", BUSYBOX_IMAGE, busybox.id, busybox.repo_digests[0]):
        status = await cri.images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=name)))
        assert status.image.id == busybox.id, name
        pulled = await cri.images.PullImage(api_pb2.PullImageRequest(image=api_pb2.ImageSpec(image=name)))
        assert pulled.image_ref == busybox.id, name
    filtered = await cri.images.ListImages(api_pb2.ListImagesRequest(
        filter=api_pb2.ImageFilter(image=api_pb2.ImageSpec(image="busybox"))))
    assert [i.id for i in filtered.images] == [busybox.id]

    verbose = await cri.images.ImageStatus(api_pb2.ImageStatusRequest(
        image=api_pb2.ImageSpec(image="busybox"), verbose=True))
    assert json.loads(verbose.info["info"])["imageSpec"]["config"]["Cmd"] == ["sh"]

    absent = await cri.images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image="nope")))
    assert not absent.HasField("image")

    with pytest.raises(grpc.aio.AioRpcError) as missing:
        # A loopback port nothing listens on: the pull never leaves this machine.
        await cri.images.PullImage(api_pb2.PullImageRequest(image=api_pb2.ImageSpec(image="127.0.0.1:9/nope:1")))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert "127.0.0.1:9/nope:1" in (missing.value.details() or "")

    for bad in ("", "UPPER/case"):
        with pytest.raises(grpc.aio.AioRpcError) as invalid:
            await cri.images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=bad)))
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "image.image" in (invalid.value.details() or "")

    fs = (await cri.images.ImageFsInfo(api_pb2.ImageFsInfoRequest())).image_filesystems
    assert fs[0].used_bytes.value > 1_000_000 and fs[0].inodes_used.value > 0 and fs[0].timestamp > 0
    assert fs[0].fs_id.mountpoint == str(cri.server.images.root)

    for _ in range(2):  # idempotent
        await cri.images.RemoveImage(api_pb2.RemoveImageRequest(image=api_pb2.ImageSpec(image="busybox")))
    left = (await cri.images.ListImages(api_pb2.ListImagesRequest())).images
    assert [tag for image in left for tag in image.repo_tags] == [PAUSE_IMAGE]


async def test_restart_keeps_images_and_replaces_a_stale_socket(cri: Client) -> None:
    before = sorted(i.id for i in (await cri.images.ListImages(api_pb2.ListImagesRequest())).images)
    await cri.channel.close()
    await cri.server.stop()
    config = cri.server.config
    config.socket.touch()  # not a socket: the server must refuse to replace it
    with pytest.raises(RuntimeError, match="not a socket"):
        await CRIServer(config).start()
    config.socket.unlink()
    stale = socket.socket(socket.AF_UNIX)  # a socket file left by a server that died
    stale.bind(str(config.socket))
    stale.close()
    again = await _connect(CRIServer(config))
    try:
        after = sorted(i.id for i in (await again.images.ListImages(api_pb2.ListImagesRequest())).images)
        assert after == before
    finally:
        await again.channel.close()
        await again.server.stop()
