"""sig-node conformance tests of what the kubelet does with a container — lifecycle
hooks, termination messages, gRPC probes, security contexts, sysctls, hostAliases,
readiness gates — mirrored on a real kubelet and CRI runtime with busybox in place of
upstream's agnhost and etcd images: the server that records hook calls is busybox's
httpd (its log names each path asked for), the gRPC health server the test's own
(grpcio's health servicer, reached by a host-network pod). Each test names the upstream
tests it mirrors; the pods of one test run side by side in one cluster."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kubeling import errors
from protos.kubeling.v1 import core_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.wait import until

HOOK_PATHS = ("poststart-exec", "poststart-http", "prestop-exec", "prestop-http")


async def _logs(cluster: Cluster, name: str, container_name: str = "") -> str:
    chunks = [c async for c in cluster.client.pods.logs(name, "default", container=container_name)]
    return b"".join(chunks).decode()


async def _events(cluster: Cluster, name: str, reason: str) -> list[str]:
    events, _ = await cluster.client.events.list_all("default", field_selector=f"involvedObject.name={name}")
    return [e.message for e in events if e.reason == reason]


async def _finished(cluster: Cluster, name: str) -> core_pb2.Pod:
    return await cluster.wait_pod(name, lambda p: p.status.phase in ("Succeeded", "Failed"), timeout=120)


def _hook(**handler: object) -> core_pb2.LifecycleHandler:
    return core_pb2.LifecycleHandler(**handler)  # type: ignore[arg-type]


def _http(ip: str, path: str) -> core_pb2.LifecycleHandler:
    return _hook(httpGet=core_pb2.HTTPGetAction(host=ip, port=core_pb2.IntOrString(intVal=8080), path=f"/{path}"))


def _wget(ip: str, path: str) -> core_pb2.LifecycleHandler:
    return _hook(exec=core_pb2.ExecAction(command=["wget", "-q", "-O-", f"http://{ip}:8080/{path}"]))


async def test_container_lifecycle_hooks(cluster: Cluster) -> None:
    """Pod Lifecycle, post start exec hook / post start http hook / prestop exec hook /
    prestop http hook ('[sig-node] Container Lifecycle Hook when create a pod with
    lifecycle hook should execute poststart|prestop exec|http hook properly') and Pods,
    prestop hook ('[sig-node] PreStop should call prestop when killing a pod'): the
    handler pod records each call; postStart calls come once the container started,
    preStop calls before the pod is gone."""
    await cluster.add_node(1)
    client = cluster.client
    files = " ".join(HOOK_PATHS)
    server = container("agnhost-container", "sh", "-c", f"mkdir /www; for p in {files}; do echo ok > /www/$p; done; "
                       "exec httpd -f -vv -p 8080 -h /www")
    await client.pods.create(pod("pod-handle-http-request", server))
    handler = await cluster.wait_pod("pod-handle-http-request", lambda p: p.status.phase == "Running" and
                                     p.status.podIP != "")
    ip = handler.status.podIP

    hooked = {
        "pod-with-poststart-exec-hook": core_pb2.Lifecycle(postStart=_wget(ip, "poststart-exec")),
        "pod-with-poststart-http-hook": core_pb2.Lifecycle(postStart=_http(ip, "poststart-http")),
        "pod-with-prestop-exec-hook": core_pb2.Lifecycle(preStop=_wget(ip, "prestop-exec")),
        "pod-with-prestop-http-hook": core_pb2.Lifecycle(preStop=_http(ip, "prestop-http")),
    }
    for name, lifecycle in hooked.items():
        await client.pods.create(pod(name, container(name, "sleep", "3600", lifecycle=lifecycle), grace=15))
    for name in hooked:
        await cluster.wait_pod(name, lambda p: p.status.phase == "Running")

    async def asked(path: str) -> bool:
        return f"url:/{path}" in await _logs(cluster, "pod-handle-http-request")
    # postStart ran before the pod was Running (the kubelet waits for it)
    assert await asked("poststart-exec") and await asked("poststart-http")
    assert not await asked("prestop-exec") and not await asked("prestop-http")
    for name in ("pod-with-prestop-exec-hook", "pod-with-prestop-http-hook"):
        await client.pods.delete(name, "default")
    for name in ("pod-with-prestop-exec-hook", "pod-with-prestop-http-hook"):
        await cluster.wait_gone(name)
    assert await asked("prestop-exec") and await asked("prestop-http")
    # the postStart pods' `sleep` ignores SIGTERM: a short grace, not their 15 s, ends them
    for name in ("pod-with-poststart-exec-hook", "pod-with-poststart-http-hook"):
        await client.pods.delete(name, "default", grace_period_seconds=1)


async def test_hooks_that_fail_or_hang(cluster: Cluster) -> None:
    """Bad input: a postStart hook that fails is a FailedPostStartHook event with upstream's
    message and the container is killed and started again; a preStop hook that fails is a
    FailedPreStopHook event; one that hangs is cut at the grace period and the pod still
    goes; a sleep hook waits its seconds (upstream: 'should execute prestop sleep hook')."""
    await cluster.add_node(1)
    client = cluster.client
    failing = core_pb2.Lifecycle(postStart=_hook(exec=core_pb2.ExecAction(command=["sh", "-c", "echo no; exit 3"])))
    await client.pods.create(pod("poststart-fails", container("c", "sleep", "3600", lifecycle=failing)))
    hanging = core_pb2.Lifecycle(preStop=_hook(exec=core_pb2.ExecAction(command=["sleep", "600"])))
    await client.pods.create(pod("prestop-hangs", container("c", "sleep", "3600", lifecycle=hanging), grace=3))
    broken = core_pb2.Lifecycle(preStop=_hook(exec=core_pb2.ExecAction(command=["false"])))
    await client.pods.create(pod("prestop-fails", container("c", "sleep", "3600", lifecycle=broken), grace=3))
    sleeping = core_pb2.Lifecycle(preStop=_hook(sleep=core_pb2.SleepAction(seconds=1)))
    await client.pods.create(pod("prestop-sleeps", container("c", "sleep", "3600", lifecycle=sleeping), grace=5))

    restarted = await cluster.wait_pod("poststart-fails", lambda p: bool(p.status.containerStatuses) and
                                       p.status.containerStatuses[0].restartCount >= 1, timeout=90)
    assert restarted.status.phase in ("Pending", "Running")
    messages = await until(lambda: _events(cluster, "poststart-fails", "FailedPostStartHook"), timeout=10,
                           what="FailedPostStartHook")
    assert messages[0].startswith("Exec lifecycle hook ([sh -c echo no; exit 3]) for Container \"c\" in Pod "
                                  "\"poststart-fails_default("), messages[0]
    assert "exited with 3" in messages[0] and 'message: "no\\n"' in messages[0], messages[0]

    for name in ("prestop-hangs", "prestop-fails", "prestop-sleeps"):
        await cluster.wait_pod(name, lambda p: p.status.phase == "Running")
        await client.pods.delete(name, "default")
    for name in ("prestop-hangs", "prestop-fails", "prestop-sleeps"):
        await cluster.wait_gone(name, timeout=60)
    assert await _events(cluster, "prestop-fails", "FailedPreStopHook") == ["PreStopHook failed"]
    assert await _events(cluster, "prestop-sleeps", "FailedPreStopHook") == []


async def test_termination_messages(cluster: Cluster) -> None:
    """Container Runtime, TerminationMessage, from log output of succeeding container /
    from file of succeeding container / from container's log output of failing container;
    TerminationMessagePath, non-root user and non-default path ('[sig-node] Container
    Runtime blackbox test on terminated container should report termination message ...');
    and the 4 KiB limit of one message."""
    await cluster.add_node(1)
    fallback = "FallbackToLogsOnError"
    cases = {
        # name: (script, policy, path, user, expected message)
        "succeeds-logs": ("echo -n DONE", fallback, "", None, ""),
        "succeeds-file": ("echo -n OK > /dev/termination-log", fallback, "", None, "OK"),
        "fails-logs": ("echo -n DONE; false", fallback, "", None, "DONE"),
        "non-root-path": ("echo -n DONE > /dev/termination-custom-log", "File", "/dev/termination-custom-log", 1000,
                          "DONE"),
        "too-long": ("head -c 5000 /dev/zero | tr '\\0' x > /dev/termination-log", "File", "", None, "x" * 4096),
    }
    for name, (script, policy, path, user, _) in cases.items():
        c = container("termination-message-container", "sh", "-c", script, terminationMessagePolicy=policy)
        if path:
            c.terminationMessagePath = path
        if user is not None:
            c.securityContext.runAsUser = user
        await cluster.client.pods.create(pod(name, c, restart_policy="Never"))
    for name, (*_, expected) in cases.items():
        done = await _finished(cluster, name)
        terminated = done.status.containerStatuses[0].state.terminated
        assert terminated.message == expected, (name, terminated.message[:100])


@pytest.fixture
async def health_server() -> AsyncIterator[int]:
    """A gRPC health server on a free loopback port (the etcd of upstream's test)."""
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(grace=None)


def _closed_port() -> int:
    with socket.socket() as s:  # bound then released: nobody listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_grpc_liveness_probes(cluster: Cluster, kubectl: Kubectl, health_server: int) -> None:
    """Pod liveness probe, using grpc call, success / failure ('[sig-node] Probing container
    should *not* be restarted with a GRPC liveness probe' / 'should be restarted with a GRPC
    liveness probe'): the probes go to the pods' IP, here the node's (host network)."""
    await cluster.add_node(1)

    def probed(name: str, port: int) -> core_pb2.Pod:
        probe = core_pb2.Probe(grpc=core_pb2.GRPCAction(port=port), periodSeconds=1, failureThreshold=1,
                               initialDelaySeconds=1)
        # the exec readiness probe counts the probe rounds, so the test waits on them, not on time
        counter = core_pb2.Probe(exec=core_pb2.ExecAction(command=["sh", "-c", "echo >> /tmp/rounds"]),
                                 periodSeconds=1)
        return pod(name, container("etcd", "sleep", "3600", livenessProbe=probe, readinessProbe=counter),
                   hostNetwork=True)
    await cluster.client.pods.create(probed("grpc-healthy", health_server))
    await cluster.client.pods.create(probed("grpc-unhealthy", _closed_port()))
    await cluster.wait_pod("grpc-unhealthy", lambda p: bool(p.status.containerStatuses) and
                           p.status.containerStatuses[0].restartCount >= 1, timeout=90)
    messages = await _events(cluster, "grpc-unhealthy", "Unhealthy")
    assert any(m.startswith("Liveness probe failed: timeout: failed to connect service") for m in messages), messages

    async def rounds() -> int:
        _, out, _ = await kubectl("exec", "grpc-healthy", "--", "sh", "-c", "wc -l < /tmp/rounds")
        return int(out.strip() or 0)
    await cluster.wait_pod("grpc-healthy", lambda p: p.status.phase == "Running")
    await until(rounds, timeout=60, check=lambda n: n >= 8, what="eight probe rounds")
    healthy = await cluster.client.pods.get("grpc-healthy", "default")
    assert healthy.status.containerStatuses[0].restartCount == 0
    assert await _events(cluster, "grpc-healthy", "Unhealthy") == []


def _id_pod(name: str, script: str, **security: object) -> core_pb2.Pod:
    c = container(name, "sh", "-c", script)
    for key, value in security.items():
        if key != "pod":
            setattr(c.securityContext, key, value) if not isinstance(value, core_pb2.Capabilities) else \
                c.securityContext.capabilities.CopyFrom(value)
    return pod(name, c, restart_policy="Never")


async def test_security_contexts(cluster: Cluster) -> None:
    """Security Context, runAsUser=65534 / privileged=false / readOnlyRootFilesystem=false /
    RunAsGroup at container level / RunAsGroup at pod level / allowPrivilegeEscalation=false
    ('[sig-node] Security Context ...') and Kubelet, pod with read only root file system
    ('[sig-node] Kubelet when scheduling a read only busybox container should not write to
    root filesystem'); beyond the list: privileged=true, capabilities added and dropped."""
    await cluster.add_node(1)
    client = cluster.client
    pod_group = _id_pod("pod-level-group", "id -u; id -g")
    pod_group.spec.securityContext.runAsUser, pod_group.spec.securityContext.runAsGroup = 1001, 2002
    pods = {
        "run-as-65534": (_id_pod("run-as-65534", "id -u", runAsUser=65534), "Succeeded", "65534\n"),
        "unprivileged": (_id_pod("unprivileged", "ip link add dummy0 type dummy 2>&1 || true", privileged=False),
                         "Succeeded", "ip: RTNETLINK answers: Operation not permitted\n"),
        # (the dummy link driver may be missing from the node's kernel: an MTU change needs CAP_NET_ADMIN too)
        "privileged": (_id_pod("privileged", "ip link set lo mtu 1400 && echo made", privileged=True),
                       "Succeeded", "made\n"),
        "writable-rootfs": (_id_pod("writable-rootfs", "echo x > /file && echo written",
                                    readOnlyRootFilesystem=False), "Succeeded", "written\n"),
        "read-only-rootfs": (_id_pod("read-only-rootfs", "echo x > /file", readOnlyRootFilesystem=True), "Failed",
                             "sh: can't create /file: Read-only file system\n"),
        "container-level-group": (_id_pod("container-level-group", "id -u; id -g", runAsUser=1001, runAsGroup=2002),
                                  "Succeeded", "1001\n2002\n"),
        "pod-level-group": (pod_group, "Succeeded", "1001\n2002\n"),
        "no-new-privs": (_id_pod("no-new-privs", "grep NoNewPrivs /proc/self/status", runAsUser=1000,
                                 allowPrivilegeEscalation=False), "Succeeded", "NoNewPrivs:\t1\n"),
        "may-escalate": (_id_pod("may-escalate", "grep NoNewPrivs /proc/self/status", runAsUser=1000,
                                 allowPrivilegeEscalation=True), "Succeeded", "NoNewPrivs:\t0\n"),
        # CAP_NET_ADMIN is 12: 0x1000 in the effective set once added, and CAP_CHOWN (0) dropped
        "capabilities": (_id_pod("capabilities", "grep CapEff /proc/self/status",
                                 capabilities=core_pb2.Capabilities(add=["NET_ADMIN"], drop=["CHOWN"])),
                         "Succeeded", None),
    }
    for made, _, _ in pods.values():
        await client.pods.create(made)
    for name, (_, phase, output) in pods.items():
        done = await _finished(cluster, name)
        text = await _logs(cluster, name)
        assert done.status.phase == phase, (name, text)
        if output is not None:
            assert text == output, (name, text)
    effective = int((await _logs(cluster, "capabilities")).split()[-1], 16)
    assert effective & (1 << 12) and not effective & 1, hex(effective)


async def test_sysctls(cluster: Cluster) -> None:
    """Sysctl, test sysctls / Sysctls, reject invalid sysctls ('[sig-node] Sysctls should
    support sysctls' / 'should reject invalid sysctls'), and an unsafe sysctl the node does
    not allow: the pod Failed, SysctlForbidden, as upstream's kubelet rejects it."""
    await cluster.add_node(1)
    client = cluster.client
    safe = pod("sysctl-safe", container("test-container", "sysctl", "kernel.shm_rmid_forced"), restart_policy="Never")
    safe.spec.securityContext.sysctls.add(name="kernel.shm_rmid_forced", value="1")
    await client.pods.create(safe)

    invalid = pod("sysctl-invalid", container("test-container", "true"), restart_policy="Never")
    for name, value in (("foo-", "bar"), ("kernel.shmmax", "100000000"), ("safe-and-unsafe", "100000000"),
                        ("bar..", "42")):
        invalid.spec.securityContext.sysctls.add(name=name, value=value)
    with pytest.raises(errors.Invalid) as refused:
        await client.pods.create(invalid)
    text = str(refused.value)
    assert 'Invalid value: "foo-"' in text and 'Invalid value: "bar.."' in text, text
    assert "safe-and-unsafe" not in text and "kernel.shmmax" not in text, text

    unsafe = pod("sysctl-unsafe", container("test-container", "true"), restart_policy="Never")
    unsafe.spec.securityContext.sysctls.add(name="kernel.msgmax", value="10000000000")
    await client.pods.create(unsafe)

    done = await _finished(cluster, "sysctl-safe")
    assert done.status.phase == "Succeeded"
    assert await _logs(cluster, "sysctl-safe") == "kernel.shm_rmid_forced = 1\n"
    rejected = await _finished(cluster, "sysctl-unsafe")
    assert (rejected.status.phase, rejected.status.reason) == ("Failed", "SysctlForbidden")
    assert rejected.status.message == 'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted'
    assert not rejected.status.containerStatuses or not rejected.status.containerStatuses[0].state.HasField("running")


async def test_host_aliases_and_readiness_gates(cluster: Cluster, kubectl: Kubectl) -> None:
    """Kubelet, hostAliases ('[sig-node] Kubelet when scheduling an agnhost Pod with
    hostAliases should write entries to /etc/hosts'); readiness gates (upstream's 'Pods
    should support pod readiness gates', not in the list): Ready only once the gate's
    condition, set by `kubectl patch --subresource=status`, is True."""
    await cluster.add_node(1)
    aliased = pod("busybox-host-aliases", container("busybox", "cat", "/etc/hosts"), restart_policy="Never",
                  hostAliases=[core_pb2.HostAlias(ip="123.45.67.89", hostnames=["foo", "bar"])])
    await cluster.client.pods.create(aliased)
    gated = pod("pod-ready", container("c", "sleep", "3600"),
                readinessGates=[core_pb2.PodReadinessGate(conditionType="k8s.io/test-condition1")])
    await cluster.client.pods.create(gated)

    await _finished(cluster, "busybox-host-aliases")
    assert "123.45.67.89\tfoo\tbar\n" in await _logs(cluster, "busybox-host-aliases")

    def ready(p: core_pb2.Pod) -> core_pb2.PodCondition:
        return next(c for c in p.status.conditions if c.type == "Ready")
    running = await cluster.wait_pod("pod-ready", lambda p: p.status.phase == "Running" and
                                     ready(p).reason == "ReadinessGatesNotReady")
    assert ready(running).message == \
        'corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist.'
    await kubectl("patch", "pod", "pod-ready", "--subresource=status", "--type=strategic", "-p",
                      '{"status":{"conditions":[{"type":"k8s.io/test-condition1","status":"True"}]}}')
    now = await cluster.wait_pod("pod-ready", lambda p: ready(p).status == "True")
    assert any(c.type == "k8s.io/test-condition1" and c.status == "True" for c in now.status.conditions)


async def test_native_sidecars(cluster: Cluster) -> None:
    """Init containers with restartPolicy Always (upstream's '[sig-node] Containers
    Lifecycle' sidecar tests, not in the list): started first and kept running, the next
    init container and the app containers after it; restarted when they exit, whatever
    the pod's restartPolicy; the pod ends with its app containers, the sidecar stopped
    after them."""
    await cluster.add_node(1)
    client = cluster.client
    server = container("proxy", "sh", "-c", "mkdir /www; echo up > /www/up; exec httpd -f -p 8081 -h /www",
                       restartPolicy="Always",
                       readinessProbe=core_pb2.Probe(exec=core_pb2.ExecAction(command=["wget", "-q", "-O-",
                                                                                       "http://127.0.0.1:8081/up"]),
                                                     periodSeconds=1))
    check = container("needs-proxy", "wget", "-q", "-O-", "http://127.0.0.1:8081/up")
    app = container("app", "sh", "-c", "wget -q -O- http://127.0.0.1:8081/up && sleep 1")
    await client.pods.create(pod("job-with-sidecar", app, restart_policy="Never", init=(server, check)))
    flaky = container("flaky", "sh", "-c", "sleep 1; exit 1", restartPolicy="Always")
    await client.pods.create(pod("restarted-sidecar", container("app", "sleep", "3600"), init=(flaky,)))

    done = await _finished(cluster, "job-with-sidecar")
    assert done.status.phase == "Succeeded", done.status
    inits = {s.name: s for s in done.status.initContainerStatuses}
    assert inits["needs-proxy"].state.terminated.exitCode == 0  # the sidecar answered it
    assert await _logs(cluster, "job-with-sidecar", "app") == "up\n"
    stopped = await cluster.wait_pod("job-with-sidecar", lambda p: next(
        s for s in p.status.initContainerStatuses if s.name == "proxy").state.HasField("terminated"))
    proxy = next(s for s in stopped.status.initContainerStatuses if s.name == "proxy").state.terminated
    app_end = stopped.status.containerStatuses[0].state.terminated.finishedAt
    assert (proxy.finishedAt.seconds, proxy.finishedAt.nanos) >= (app_end.seconds, app_end.nanos)

    again = await cluster.wait_pod("restarted-sidecar", lambda p: bool(p.status.initContainerStatuses) and
                                   p.status.initContainerStatuses[0].restartCount >= 2, timeout=90)
    assert again.status.phase == "Running"
    assert again.status.containerStatuses[0].restartCount == 0


async def test_in_place_pod_resize(cluster: Cluster, kubectl: Kubectl) -> None:
    """In-place resize (upstream's '[sig-node] Pod InPlace Resize Container' tests, not in the
    list): `kubectl patch --subresource resize` changes a running container's CPU without a
    restart (the runtime's UpdateContainerResources), the status tells what is applied; a
    resize the node can never take is PodResizePending/Infeasible; one that would change the
    QoS class or another resource is refused."""
    node = await cluster.add_node(1)
    c = container("c", "sleep", "3600")
    c.resources.requests.update({"cpu": "100m", "memory": "64Mi"})
    c.resources.limits.update({"cpu": "200m", "memory": "128Mi"})
    await cluster.client.pods.create(pod("resizable", c))
    running = await cluster.wait_pod("resizable", lambda p: p.status.phase == "Running")
    container_id = running.status.containerStatuses[0].containerID.split("://")[-1]

    def patch(resources: str) -> list[str]:
        return ["patch", "pod", "resizable", "--subresource", "resize", "-p",
                '{"spec":{"containers":[{"name":"c","resources":' + resources + "}]}}"]
    await kubectl(*patch('{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}'))
    resized = await cluster.wait_pod("resizable", lambda p: p.status.containerStatuses[0].resources.limits.get(
        "cpu") == "300m")
    assert resized.status.containerStatuses[0].restartCount == 0
    assert resized.status.containerStatuses[0].allocatedResources["cpu"] == "150m"
    assert resized.metadata.generation == 2
    assert node.runtime is not None
    applied = (await node.runtime.container_status(container_id)).resources.linux
    assert (applied.cpu_quota, applied.cpu_period, applied.memory_limit_in_bytes) == (30000, 100000, 128 * 1024 ** 2)

    await kubectl(*patch('{"requests":{"cpu":"100"},"limits":{"cpu":"100"}}'))
    pending = await cluster.wait_pod("resizable", lambda p: any(
        c.type == "PodResizePending" for c in p.status.conditions))
    condition = next(c for c in pending.status.conditions if c.type == "PodResizePending")
    assert condition.reason == "Infeasible" and condition.message.startswith(
        "Node didn't have enough capacity: cpu, requested: 100000, capacity: "), condition
    assert pending.status.containerStatuses[0].resources.limits["cpu"] == "300m"  # still what is applied

    code, _, err = await kubectl(*patch('{"requests":{"cpu":null,"memory":null},"limits":{"cpu":null,"memory":'
                                        "null}}"), ok=False)
    assert code != 0 and "Pod QOS Class may not change as a result of resizing" in err, err
    code, _, err = await kubectl(*patch('{"limits":{"ephemeral-storage":"1Gi"}}'), ok=False)
    assert code != 0 and "only cpu and memory resources are mutable" in err, err
