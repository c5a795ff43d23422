"""A real operator framework on a `kubeling up` cluster: the kopf operator of
examples/greeting-operator, run as its users run it (`kopf run`, the admin kubeconfig),
owning the Greeting CustomResourceDefinition. Create → its ConfigMap and Deployment made
(the Deployment's pod running on the node), status written; update → the children
changed; the operator restarted → nothing done twice; delete → the children collected
by the garbage collector through their owner references."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.plan import ClusterPlan
from tests.e2e.kubectl import Kubectl
from tests.wait import until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "greeting-operator"
CIDR = f"10.{165 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


@dataclass
class Operator:
    """`kopf run` as a child process; its log kept for the assertions."""

    kubeconfig: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        kopf = Path(sys.executable).parent / "kopf"
        if not kopf.exists():
            raise AssertionError("kopf is not installed: `make test` installs it (pyproject's test extras)")
        out = self.log.open("ab")
        self.process = subprocess.Popen(
            [str(kopf), "run", "--standalone", "--namespace", "default", str(EXAMPLE / "operator.py")],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)}, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.log.parent)
        out.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
async def up(tmp_path: Path) -> AsyncIterator[ClusterPlan]:
    state = tmp_path / "cluster"
    started = _kubeling("up", "--nodes", "1", "--detach", "--state-dir", str(state), "--cluster-cidr", CIDR,
                        "--node-prefix", f"op{os.getpid() % 1000}-")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None
        yield plan
    finally:
        current = ClusterPlan.load(state)
        if current is not None and (current.supervisor_pid or current.components):
            stopped = _kubeling("down", "--state-dir", str(state))
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr


async def _json(kubectl: Kubectl, *args: str) -> Any:
    _, out, _ = await kubectl("get", *args, "-o", "json")
    return json.loads(out)


async def test_a_kopf_operator_owns_its_custom_resource(up: ClusterPlan, tmp_path: Path) -> None:
    kubeconfig = up.root / "kubeconfig"
    kubectl = Kubectl(kubeconfig)
    _, out, _ = await kubectl("apply", "-f", str(EXAMPLE / "crd.yaml"))
    assert "greetings.kubeling.example created" in out
    await kubectl("wait", "--for", "condition=established", "crd/greetings.kubeling.example", "--timeout=30s")
    operator = Operator(kubeconfig, tmp_path / "kopf.log")
    operator.start()
    try:
        greeting = tmp_path / "greeting.yaml"
        greeting.write_text("apiVersion: kubeling.example/v1\nkind: Greeting\nmetadata:\n  name: hello\n"
                            "spec:\n  message: hello from kopf\n")
        await kubectl("apply", "-f", str(greeting))

        async def created() -> Any:
            g = await _json(kubectl, "greeting", "hello")
            return g if (g.get("status") or {}).get("phase") == "Created" else None
        g = await until(created, "the operator's create handler", timeout=60, interval=0.5)
        assert g["spec"]["replicas"] == 1  # the schema's default
        assert g["status"]["configMap"] == "hello-greeting" and g["status"]["deployment"] == "hello-greeter"
        config_map = await _json(kubectl, "configmap", "hello-greeting")
        assert config_map["data"] == {"message": "hello from kopf"}
        owner = config_map["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Greeting", "hello", g["metadata"]["uid"])
        await until(lambda: _json(kubectl, "deployment", "hello-greeter"), "the greeter available", timeout=90,
                    interval=0.5, check=lambda d: (d.get("status") or {}).get("availableReplicas") == 1)
        _, out, _ = await kubectl("logs", "deployment/hello-greeter")
        assert "hello from kopf" in out  # the pod read the ConfigMap the operator made
        _, out, _ = await kubectl("get", "greetings")
        assert out.split()[:5] == ["NAME", "MESSAGE", "REPLICAS", "PHASE", "AGE"]

        await kubectl("patch", "greeting", "hello", "--type=merge", "-p", '{"spec":{"message":"changed","replicas":2}}')

        async def updated() -> Any:
            g = await _json(kubectl, "greeting", "hello")
            return g if (g.get("status") or {}).get("phase") == "Updated" else None
        await until(updated, "the operator's update handler", timeout=60, interval=0.5)
        assert (await _json(kubectl, "configmap", "hello-greeting"))["data"] == {"message": "changed"}
        assert (await _json(kubectl, "deployment", "hello-greeter"))["spec"]["replicas"] == 2

        # restarted, the operator finds its work done (kopf's last-handled annotation): nothing twice
        before = (await _json(kubectl, "configmap", "hello-greeting"))["metadata"]["resourceVersion"]
        operator.stop()
        handled = operator.text().count("Handler 'create' succeeded")
        operator.start()
        await until(lambda: operator.text().count("Initial authentication has finished") == 2,
                    "the operator back", timeout=60, interval=0.5)
        await kubectl("annotate", "greeting", "hello", "touched=yes")  # an event it sees, and must not act on
        await until(lambda: _json(kubectl, "greeting", "hello"), "the annotation seen", timeout=30,
                    check=lambda g: g["metadata"].get("annotations", {}).get("touched") == "yes")
        _, out, _ = await kubectl("get", "configmaps,deployments", "-o", "name")
        assert sorted(n for n in out.split() if "hello" in n) == ["configmap/hello-greeting",
                                                                  "deployment.apps/hello-greeter"]
        assert (await _json(kubectl, "configmap", "hello-greeting"))["metadata"]["resourceVersion"] == before
        assert operator.text().count("Handler 'create' succeeded") == handled

        await kubectl("delete", "greeting", "hello")

        async def collected() -> bool:
            _, out, _ = await kubectl("get", "configmaps,deployments,replicasets", "-o", "name")
            return not any("hello" in n for n in out.split())
        await until(collected, "the children collected", timeout=60, interval=0.5)
        assert "Traceback" not in operator.text(), operator.text()[-4000:]
    finally:
        operator.stop()
