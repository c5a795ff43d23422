"""The real kubectl against the REST facade of a whole cluster (apiserver, scheduler, a
kubelet running pods under runc): what a user types, and what kubectl prints back.

kubectl runs as a subprocess awaited off the event loop, so the in-process apiserver
keeps serving it."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from controllers.manager import ControllerManager
from tests.e2e.conftest import Cluster
from tests.e2e.kubectl import Kubectl
from tests.wait import until

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo hello from web; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.3; done"]
    ports:
    - containerPort: 8080
"""


async def _lines_until(proc: asyncio.subprocess.Process, last: str, timeout: float = 30) -> list[str]:
    """What `proc` prints, line by line, up to the first line containing `last`."""
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        while not lines or last not in lines[-1]:
            line = await proc.stdout.readline()
            assert line, f"ended before {last!r}: {lines}"
            lines.append(line.decode())
    return lines


async def _stop(proc: asyncio.subprocess.Process) -> str:
    if proc.returncode is None:
        proc.terminate()
    out, _ = await proc.communicate()
    return out.decode()


async def test_kubectl_pod_lifecycle(cluster: Cluster, kubectl: Kubectl, tmp_path: Path) -> None:
    await cluster.add_node(1)
    node = next(iter(cluster.kubelets))
    _, out, _ = await kubectl("get", "nodes", "-o", "wide")
    header, row = out.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and "INTERNAL-IP" in header
    assert row.split()[:3] == [node, "Ready", "<none>"]

    watch = await kubectl.start("get", "pods", "-w")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    _, out, _ = await kubectl("apply", "-f", str(manifest))
    assert out.strip() == "pod/web created"
    await kubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=60s")
    statuses = [line.split()[2] for line in (await _lines_until(watch, " Running "))[1:]]
    await _stop(watch)
    assert statuses[0] == "Pending" and "ContainerCreating" in statuses and statuses[-1] == "Running", statuses

    _, out, _ = await kubectl("get", "pods")
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out.splitlines()[1].split()[:4] == ["web", "1/1", "Running", "0"]
    _, out, _ = await kubectl("get", "pods", "-o", "wide")
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                                           "NOMINATED", "NODE", "READINESS", "GATES"]
    pod = json.loads((await kubectl("get", "pod", "web", "-o", "json"))[1])
    assert out.splitlines()[1].split()[5:7] == [pod["status"]["podIP"], node]
    assert pod["kind"] == "Pod" and pod["spec"]["containers"][0]["ports"] == [{"containerPort": 8080,
                                                                               "protocol": "TCP"}]
    assert isinstance(pod["metadata"]["generation"], int)
    _, out, _ = await kubectl("get", "pods", "-A")
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"] and out.splitlines()[1].split()[:2] == ["default",
                                                                                                            "web"]

    # The object as YAML, applied server-side, changes nothing but its field ownership
    # (kubectl moves kubectl-client-side-apply's fields to its own "kubectl" Apply entry);
    # applied again, nothing at all; a client-side apply neither.
    exported = tmp_path / "web.yaml"
    exported.write_text((await kubectl("get", "pod", "web", "-o", "yaml"))[1])
    await kubectl("apply", "--server-side", "-f", str(exported))
    after = json.loads((await kubectl("get", "pod", "web", "-o", "json", "--show-managed-fields"))[1])
    assert ("kubectl", "Apply") in {(e["manager"], e["operation"]) for e in after["metadata"]["managedFields"]}
    assert after["spec"] == pod["spec"] and after["metadata"]["labels"] == pod["metadata"]["labels"]
    exported.write_text((await kubectl("get", "pod", "web", "-o", "yaml"))[1])
    version = after["metadata"]["resourceVersion"]
    _, out, _ = await kubectl("apply", "--server-side", "-f", str(exported))
    assert out.strip() == "pod/web serverside-applied"
    _, out, _ = await kubectl("apply", "-f", str(manifest))
    assert out.strip() == "pod/web unchanged"
    assert json.loads((await kubectl("get", "pod", "web", "-o", "json"))[1])["metadata"]["resourceVersion"] == version

    _, out, _ = await kubectl("logs", "web")
    assert out.startswith("hello from web\n")
    _, out, _ = await kubectl("logs", "web", "--tail=1", "--timestamps")
    stamp, text = out.rstrip("\n").split(" ", 1)
    assert len(out.splitlines()) == 1 and stamp.startswith("20") and text.startswith("tick ")
    follow = await kubectl.start("logs", "-f", "web")
    assert follow.stdout is not None
    first = await asyncio.wait_for(follow.stdout.readline(), 10)
    assert first == b"hello from web\n"
    later = await asyncio.wait_for(follow.stdout.readline(), 10)
    assert later.startswith(b"tick ")
    await _stop(follow)

    await kubectl("label", "pod", "web", "tier=frontend")
    await kubectl("annotate", "pod", "web", "owner=alice")
    _, out, _ = await kubectl("get", "pods", "-l", "tier=frontend", "-o", "name")
    assert out.strip() == "pod/web"
    await kubectl("edit", "pod", "web", env={"KUBE_EDITOR": "sed -i s/owner:\\ alice/owner:\\ bob/"})
    _, out, _ = await kubectl("get", "pod", "web", "-o", "jsonpath={.metadata.annotations.owner}")
    assert out == "bob"

    _, out, _ = await kubectl("describe", "pod", "web")
    # kubectl's describe: "Node:  <node>/<its InternalIP>"
    assert re.search(rf"^Node:\s+{re.escape(node)}/\d+\.\d+\.\d+\.\d+$", out, re.M), out
    assert "Scheduled" in out and "Successfully assigned default/web" in out and "Started" in out
    _, out, _ = await kubectl("get", "events")
    assert "pod/web" in out and "Scheduled" in out

    code, _, err = await kubectl("get", "pod", "nope", ok=False)
    assert code == 1 and err.strip() == 'Error from server (NotFound): pods "nope" not found'
    code, _, err = await kubectl("create", "-f", str(manifest), ok=False)
    assert code == 1 and "Error from server (AlreadyExists): error when creating" in err
    assert 'pods "web" already exists' in err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(POD.replace("name: web\n  labels",
                                   "name: web2\n  labels").replace("  containers:", "  colour: blue\n  containers:"))
    code, _, err = await kubectl("create", "-f", str(unknown), ok=False)
    assert code == 1 and "Error from server (BadRequest)" in err
    assert 'strict decoding error: unknown field "spec.colour"' in err
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(POD.replace("name: web\n  labels", "name: web3\n  labels").replace("    image: busybox\n", ""))
    code, _, err = await kubectl("create", "-f", str(invalid), ok=False)
    assert code == 1 and 'The Pod "web3" is invalid' in err and "spec.containers[0].image" in err

    _, out, _ = await kubectl("delete", "pod", "web")
    assert out.strip() in ('pod "web" deleted', 'pod "web" deleted from default namespace')  # older and newer kubectl
    code, _, _ = await kubectl("get", "pod", "web", ok=False)  # delete waited until it was gone
    assert code == 1


async def test_kubectl_namespaces_nodes_and_leases(cluster: Cluster, kubectl: Kubectl) -> None:
    # `create namespace` sends protobuf: the facade reads that encoding for Namespaces.
    _, out, _ = await kubectl("create", "namespace", "team")
    assert out.strip() == "namespace/team created"
    _, out, _ = await kubectl("get", "ns", "team")
    assert out.splitlines()[1].split()[:2] == ["team", "Active"]
    _, out, _ = await kubectl("run", "idle", "-n", "team", "--image=busybox", "--", "sleep", "60")
    assert out.strip() == "pod/idle created"
    _, out, _ = await kubectl("get", "pods", "-n", "team", "-o", "jsonpath={.items[*].spec.containers[0].args}")
    assert out == '["sleep","60"]'
    _, out, _ = await kubectl("delete", "namespace", "team")  # waits for the namespace to be finalized
    assert out.strip() == 'namespace "team" deleted'
    code, _, err = await kubectl("get", "ns", "team", ok=False)
    assert code == 1 and 'namespaces "team" not found' in err

    await kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata:\n  name: handmade\n")
    await kubectl("cordon", "handmade")
    _, out, _ = await kubectl("get", "node", "handmade")
    assert out.splitlines()[1].split()[:2] == ["handmade", "Unknown,SchedulingDisabled"]
    await kubectl("delete", "node", "handmade")
    _, out, _ = await kubectl("explain", "pod.spec.containers")  # from the OpenAPI v3 schemas
    assert "FIELD: containers <[]Container>" in out and "image\t<string>" in out and "livenessProbe\t<Probe>" in out
    _, out, _ = await kubectl("get", "leases", "-n", "kube-system")
    assert out.splitlines()[0].split() == ["NAME", "HOLDER", "AGE"] and "kube-scheduler" in out


LIMIT_RANGE = """\
apiVersion: v1
kind: LimitRange
metadata:
  name: mem-limit-range
spec:
  limits:
  - default:
      memory: 512Mi
    defaultRequest:
      memory: 256Mi
    type: Container
"""


async def test_kubectl_limits_and_quotas_in_a_namespace(cluster: Cluster, controllers: ControllerManager,
                                                       kubectl: Kubectl, tmp_path: Path) -> None:
    """The documentation's "Configure Default Memory Requests and Limits for a Namespace"
    and "Configure a Pod Quota for a Namespace" with kubectl: the LimitRange's default is
    the container's memory limit on the node; a pod past the quota is refused."""
    node = await cluster.add_node(1)
    ns = "default-mem-example"
    await kubectl("create", "namespace", ns)
    (tmp_path / "limits.yaml").write_text(LIMIT_RANGE)
    await kubectl("-n", ns, "apply", "-f", str(tmp_path / "limits.yaml"))
    await kubectl("-n", ns, "run", "default-mem-demo", "--image=busybox", "--restart=Never", "--command", "--",
                  "sleep", "3600")
    running = await cluster.wait_pod("default-mem-demo", lambda p: p.status.phase == "Running", namespace=ns)
    resources = running.spec.containers[0].resources
    assert (dict(resources.requests), dict(resources.limits)) == ({"memory": "256Mi"}, {"memory": "512Mi"})
    assert running.metadata.annotations["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: memory request for container default-mem-demo; memory limit for container " \
        "default-mem-demo"
    assert node.runtime is not None
    applied = await node.runtime.container_status(running.status.containerStatuses[0].containerID.split("://")[-1])
    assert applied.resources.linux.memory_limit_in_bytes == 512 * 1024 ** 2

    await kubectl("-n", ns, "create", "quota", "pod-demo", "--hard=pods=1")

    async def counted() -> bool:
        _, out, _ = await kubectl("-n", ns, "get", "quota", "pod-demo", "-o", "json")
        return bool(json.loads(out).get("status", {}).get("used", {}).get("pods") == "1")

    await until(counted, "the quota counted", timeout=30)
    code, _, err = await kubectl("-n", ns, "run", "second", "--image=busybox", "--restart=Never", "--command", "--",
                                 "sleep", "3600", ok=False)
    assert code == 1 and 'Error from server (Forbidden): pods "second" is forbidden: exceeded quota: pod-demo, ' \
        "requested: pods=1, used: pods=1, limited: pods=1" in err, err
    # its `sleep` (PID 1, no handler) ignores SIGTERM: a short grace, not the 30 s default, ends it
    await kubectl("-n", ns, "delete", "pod", "default-mem-demo", "--grace-period=1")
