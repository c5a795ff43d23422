"""PullImage from a real registry (Debian's docker-registry on a free loopback port), fed
by skopeo from an OCI layout the test builds (the built-in busybox image)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from kubelet.cri.images.builtin import build_builtins
from kubelet.cri.images.store import ImageStore
from kubelet.cri.server import CRIConfig, CRIServer
from kubeling.netutil import free_port
from protos.runtime.v1 import api_pb2, api_pb2_grpc
from tests.contract.cri.tokenservice import SERVICE, TokenService


@dataclass
class Registry:
    address: str
    data: Path
    source: ImageStore


@contextlib.contextmanager
def _registry(tmp_path: Path, auth_yaml: str = "", push_creds: str = "") -> Iterator[Registry]:
    """docker-registry on a free port holding team/busybox:v1 (pushed with skopeo)."""
    port = free_port()
    data = tmp_path / "registry"
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {data}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n{auth_yaml}")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("docker-registry did not start")
                time.sleep(0.05)
        source = ImageStore(tmp_path / "source")
        build_builtins(source)
        address = f"127.0.0.1:{port}"
        creds = ["--dest-creds", push_creds] if push_creds else []
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", *creds, f"oci:{source.root}:latest",
                        f"docker://{address}/team/busybox:v1"], check=True, capture_output=True, timeout=60)
        yield Registry(address, data, source)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    with _registry(tmp_path) as registry:
        yield registry


@pytest.fixture
def token_service(tmp_path: Path) -> Iterator[TokenService]:
    service = TokenService(tmp_path / "token", username="puller", password="s3cret")
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
async def images(registry: Registry) -> AsyncIterator[api_pb2_grpc.ImageServiceStub]:
    base = Path(tempfile.mkdtemp(prefix="kreg-"))
    server = CRIServer(CRIConfig(socket=base / "cri.sock", state_dir=base / "state", cni_conf_dir=base / "net.d",
                                 runc_root=base / "runc", build_builtin_images=False))
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    yield api_pb2_grpc.ImageServiceStub(channel)
    await channel.close()
    await server.stop()
    shutil.rmtree(base)


def _pull(name: str) -> api_pb2.PullImageRequest:
    return api_pb2.PullImageRequest(image=api_pb2.ImageSpec(image=name))


async def test_pull_from_registry(registry: Registry, images: api_pb2_grpc.ImageServiceStub) -> None:
    name = f"{registry.address}/team/busybox:v1"
    source = registry.source.get("busybox")
    assert source is not None
    # Two pulls at once: both get the image (done once inside the server).
    first, second = await asyncio.gather(images.PullImage(_pull(name)), images.PullImage(_pull(name)))
    assert first.image_ref == second.image_ref == source.id  # the config, hence the id, is unchanged
    status = await images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=name)))
    assert list(status.image.repo_tags) == [name]
    assert status.image.repo_digests[0].startswith(f"{registry.address}/team/busybox@sha256:")
    # By digest, as the kubelet does for pinned images.
    by_digest = await images.PullImage(_pull(status.image.repo_digests[0]))
    assert by_digest.image_ref == source.id

    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await images.PullImage(_pull(f"{registry.address}/team/absent:v1"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert f"{registry.address}/team/absent:v1" in (missing.value.details() or "")


async def test_digest_mismatch_is_refused(registry: Registry, images: api_pb2_grpc.ImageServiceStub) -> None:
    source = registry.source.get("busybox")
    assert source is not None
    layer = source.layers[0].digest.removeprefix("sha256:")
    stored = registry.data / "docker/registry/v2/blobs/sha256" / layer[:2] / layer / "data"
    content = bytearray(stored.read_bytes())
    content[-1] ^= 1  # the registry now serves a layer that does not match its digest
    stored.write_bytes(bytes(content))
    assert hashlib.sha256(content).hexdigest() != layer
    name = f"{registry.address}/team/busybox:v1"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await images.PullImage(_pull(name))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "digest mismatch" in (err.value.details() or "")
    status = await images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=name)))
    assert not status.HasField("image")  # nothing half-pulled is named


async def test_pull_with_bearer_token(tmp_path: Path, token_service: TokenService,
                                      images: api_pb2_grpc.ImageServiceStub) -> None:
    """The registry asks for a token (401 + Bearer challenge); the pull fetches one from the
    realm with the pull's credentials and the scope the challenge names, and the registry
    accepts it (it verifies the JWT's signature against the service's certificate)."""
    creds = f"{token_service.username}:{token_service.password}"
    with _registry(tmp_path, token_service.registry_auth_yaml(), push_creds=creds) as registry:
        name = f"{registry.address}/team/busybox:v1"
        request = _pull(name)
        for username, password in (("", ""), (token_service.username, "wrong")):
            token_service.requests.clear()
            request.auth.username, request.auth.password = username, password
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await images.PullImage(request)
            assert denied.value.code() == grpc.StatusCode.NOT_FOUND
            assert "token request" in (denied.value.details() or "") and "HTTP 401" in (denied.value.details() or "")
            assert [(r.user, r.granted) for r in token_service.requests] == [(username, False)]

        token_service.requests.clear()
        request.auth.password = token_service.password
        reply = await images.PullImage(request)
        source = registry.source.get("busybox")
        assert source is not None and reply.image_ref == source.id
        assert {(r.user, r.scope, r.service, r.granted) for r in token_service.requests} == {
            ("puller", "repository:team/busybox:pull", SERVICE, True)}
