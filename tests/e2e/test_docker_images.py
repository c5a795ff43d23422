"""A developer's own image, made with the Docker engine (`docker build` from a local base:
no registry outside is reachable, as for the compose image), into a running cluster both
ways: `kubeling image load` straight from the engine, then run by `kubectl run`; and
`docker push` to the cluster's local registry at localhost:PORT, then pulled by a
Deployment on both nodes. The images are removed from the engine at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.dockerengine import DockerEngine, docker_engine
from cluster.plan import ClusterPlan
from tests.e2e.images import one_per_node
from tests.e2e.kubectl import Kubectl

TAG = f"kbl-app-{os.getpid()}"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    work = tmp_path_factory.mktemp("docker")
    found = docker_engine(work)
    try:
        yield found
    finally:
        found.run("image", "rm", "-f", f"{TAG}-base:1", f"{TAG}:1", check=False)
        found.stop()


def _build(engine: DockerEngine, work: Path) -> str:
    """A base made with `docker import` (the host's static busybox), an app built FROM it."""
    rootfs = work / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        tar.add("/bin/busybox", arcname="bin/busybox")
    engine.run("import", "-c", 'CMD ["/bin/busybox", "sh"]', str(rootfs), f"{TAG}-base:1")
    context = work / "context"
    context.mkdir()
    (context / "msg").write_text("built-by-docker\n")
    (context / "Dockerfile").write_text(f'FROM {TAG}-base:1\nCOPY msg /msg\nCMD ["/bin/busybox", "cat", "/msg"]\n')
    # the classic builder: Debian's engine without a buildx plugin; DOCKER_CONFIG: no ~/.docker
    subprocess.run([engine.docker, "build", "-q", "-t", f"{TAG}:1", str(context)], check=True, capture_output=True,
                   timeout=300, env={**os.environ, "DOCKER_BUILDKIT": "0", "DOCKER_CONFIG": str(work / "config")})
    return f"{TAG}:1"


async def test_an_image_built_with_docker_runs_loaded_and_pushed(engine: DockerEngine, tmp_path: Path) -> None:
    image = _build(engine, tmp_path)
    state = tmp_path / "state"
    prefix = f"dk{os.getpid() % 1000}-"
    started = _kubeling("up", "--nodes", "2", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
                        "--no-ingress", "--no-network-policy")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        plan = ClusterPlan.load(state)
        assert plan is not None
        kubectl = Kubectl(state / "kubeconfig")
        # straight from the engine (kind's `load docker-image`)
        loaded = _kubeling("image", "load", image, "--state-dir", str(state))
        assert loaded.returncode == 0, loaded.stderr
        assert [line.split()[:3] for line in loaded.stdout.splitlines()] == \
            [[f"{n}:", "loaded", f"docker.io/library/{image}"] for n in plan.nodes], loaded.stdout
        await kubectl("run", "loaded", f"--image={image}", "--restart=Never",
                      f'--overrides={{"spec": {{"nodeName": "{plan.nodes[1]}"}}}}')
        await kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/loaded", "--timeout=60s")
        _, out, _ = await kubectl("logs", "loaded")
        assert out.strip() == "built-by-docker"

        # `docker push` to the local registry (Docker speaks plain HTTP to localhost unasked)
        pushed = f"localhost:{plan.registry_port}/{TAG}:2"
        engine.run("tag", image, pushed)
        try:
            engine.run("push", pushed, timeout=120)
        finally:
            engine.run("image", "rm", pushed, check=False)
        await kubectl("apply", "-f", "-", stdin=one_per_node("pushed", pushed))
        await kubectl("rollout", "status", "deployment/pushed", "--timeout=90s")
        _, out, _ = await kubectl("get", "pods", "-l", "app=pushed", "-o", "json")
        pods = json.loads(out)["items"]
        assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(plan.nodes)
        for pod in pods:
            _, log, _ = await kubectl("logs", pod["metadata"]["name"])
            assert log.strip() == "built-by-docker"
    finally:
        stopped = _kubeling("down", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stderr
