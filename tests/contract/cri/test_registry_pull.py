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

from cri.images.builtin import build_builtins
from cri.images.store import ImageStore
from cri.server import CRIConfig, CRIServer
from kubeling.netutil import free_port
from protos.runtime.v1 import api_pb2, api_pb2_grpc
from tests.contract.cri.tokenservice import SERVICE, TokenService
from tests.e2e.images import docker_archive


@dataclass
class Registry:
    address: str
    data: Path
    source: ImageStore


@contextlib.contextmanager
def _registry(tmp_path: Path, auth_yaml: str = "", push_creds: str = "", tls: tuple[Path, Path] | None = None,
              repository: str = "team/busybox:v1") -> Iterator[Registry]:
    """docker-registry on a free port holding `repository` (pushed with skopeo); with tls
    (certificate, key) it speaks HTTPS."""
    port = free_port()
    data = tmp_path / "registry"
    config = tmp_path / "registry.yml"
    tls_yaml = f"  tls:\n    certificate: {tls[0]}\n    key: {tls[1]}\n" if tls else ""
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {data}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n{tls_yaml}{auth_yaml}")
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
                    raise RuntimeError("docker-registry did not start") from None
                time.sleep(0.05)
        source = ImageStore(tmp_path / "source")
        build_builtins(source)
        address = f"127.0.0.1:{port}"
        creds = ["--dest-creds", push_creds] if push_creds else []
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", *creds, f"oci:{source.root}:latest",
                        f"docker://{address}/{repository}"], check=True, capture_output=True, timeout=60)
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


@contextlib.asynccontextmanager
async def _image_service(registry_config_dir: Path | None = None) -> AsyncIterator[api_pb2_grpc.ImageServiceStub]:
    base = Path(tempfile.mkdtemp(prefix="kreg-"))
    server = CRIServer(CRIConfig(socket=base / "cri.sock", state_dir=base / "state", cni_conf_dir=base / "net.d",
                                 runc_root=base / "runc", build_builtin_images=False,
                                 registry_config_dir=registry_config_dir))
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    try:
        yield api_pb2_grpc.ImageServiceStub(channel)
    finally:
        await channel.close()
        await server.stop()
        shutil.rmtree(base)


@pytest.fixture
async def images(registry: Registry) -> AsyncIterator[api_pb2_grpc.ImageServiceStub]:
    async with _image_service() as stub:
        yield stub


def _hosts(root: Path, registry: str, text: str) -> Path:
    (root / registry).mkdir(parents=True, exist_ok=True)
    (root / registry / "hosts.toml").write_text(text)
    return root


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


async def test_a_tag_pushed_anew_is_pulled_again(registry: Registry, images: api_pb2_grpc.ImageServiceStub,
                                                 tmp_path: Path) -> None:
    """A loopback registry is one run here on purpose: a present tag is asked for again (as
    containerd asks), so what was pushed since is what runs; a digest is not (it cannot change)."""
    name = f"{registry.address}/team/busybox:v1"
    first = await images.PullImage(_pull(name))
    archive = tmp_path / "other.tar"
    docker_archive(archive, "other:v1", {"msg": "pushed anew"})
    subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"docker-archive:{archive}",
                    f"docker://{name}"], check=True, capture_output=True, timeout=60)
    second = await images.PullImage(_pull(name))
    assert second.image_ref != first.image_ref
    assert (await _status(images, name)).id == second.image_ref
    by_digest = await images.PullImage(_pull((await _status(images, name)).repo_digests[0]))
    assert by_digest.image_ref == second.image_ref


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


async def _status(images: api_pb2_grpc.ImageServiceStub, name: str) -> api_pb2.Image:
    return (await images.ImageStatus(api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=name)))).image


async def test_mirrors_from_hosts_toml(tmp_path: Path) -> None:
    """Air-gapped names: mirror.example and upstream.example exist nowhere; their hosts.toml
    send pulls to the local registry. The image keeps the name it was asked by."""
    with _registry(tmp_path, repository="upstream.example/team/busybox:v1") as registry:
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"oci:{registry.source.root}:latest",
                        f"docker://{registry.address}/team/busybox:v1"], check=True, capture_output=True, timeout=60)
        config = tmp_path / "certs.d"
        dead = f"127.0.0.1:{free_port()}"  # nothing listens: the next host is tried
        _hosts(config, "mirror.example", f'''server = "https://mirror.example"
[host."http://{dead}"]
[host."http://{registry.address}"]
  capabilities = ["pull", "resolve"]
''')
        # The mirror keeps each upstream under its name: the URL's path is the API root.
        _hosts(config, "upstream.example", f'''[host."http://{registry.address}/v2/upstream.example"]
  override_path = true
''')
        _hosts(config, "pull-only.example", f'''[host."http://{registry.address}"]
  capabilities = ["pull"]
''')
        source = registry.source.get("busybox")
        assert source is not None
        async with _image_service(config) as images:
            for name in ("mirror.example/team/busybox:v1", "upstream.example/team/busybox:v1"):
                reply = await images.PullImage(_pull(name))
                assert reply.image_ref == source.id
                status = await _status(images, name)
                assert name in status.repo_tags  # one image: the second pull adds its own name
                assert any(d.startswith(name.split(":")[0] + "@sha256:") for d in status.repo_digests)
            # A host trusted to pull but not to resolve serves digests, never tags.
            digest = (await _status(images, "mirror.example/team/busybox:v1")).repo_digests[0].split("@")[1]
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await images.PullImage(_pull("pull-only.example/team/busybox:v1"))
            assert "pull-only.example" in (err.value.details() or "")
            reply = await images.PullImage(_pull(f"pull-only.example/team/busybox@{digest}"))
            assert reply.image_ref == source.id
            # Absent everywhere: NOT_FOUND naming each host's answer.
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await images.PullImage(_pull("mirror.example/team/absent:v1"))
            details = err.value.details() or ""
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert f"http://{dead}" in details and f"http://{registry.address}" in details and "not found" in details


async def test_mirror_over_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "registry.crt", tmp_path / "registry.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    with _registry(tmp_path, tls=(cert, key)) as registry:
        source = registry.source.get("busybox")
        assert source is not None
        for settings, works in (("", False), (f'ca = "{cert}"', True), ("skip_verify = true", True)):
            config = tmp_path / f"certs-{len(settings)}"
            _hosts(config, "secure.example", f'[host."https://{registry.address}"]\n{settings}\n')
            async with _image_service(config) as images:
                request = _pull("secure.example/team/busybox:v1")
                if works:
                    assert (await images.PullImage(request)).image_ref == source.id
                else:
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await images.PullImage(request)
                    assert "certificate verify failed" in (err.value.details() or "")
