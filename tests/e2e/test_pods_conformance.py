"""sig-node conformance tests of how pods run — commands and arguments, environment
(downward API, variable expansion, ConfigMaps, Secrets, Services), init containers,
restart policies, the pod lifecycle through the API, logs and exec over WebSockets,
QoS, ephemeral containers, probes — mirrored on a real kubelet and CRI runtime with
busybox (whose image runs `sh` by default) in place of upstream's agnhost. Each test
names the upstream tests it mirrors; the pods of one test run side by side."""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

import aiohttp

from cri.images.builtin import DEFAULT_BUSYBOX, BuiltinImage, build_image, busybox_layer
from kubeling.quantity import parse_quantity
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.e2e.test_node_conformance import _events, _finished, _logs
from tests.wait import until

TESTER = "kubeling.test/entrypoint-tester:1"


def _env(name: str, value: str = "", **source: object) -> core_pb2.EnvVar:
    if source:
        return core_pb2.EnvVar(name=name, valueFrom=core_pb2.EnvVarSource(**source))  # type: ignore[arg-type]
    return core_pb2.EnvVar(name=name, value=value)


def _field(path: str) -> core_pb2.ObjectFieldSelector:
    return core_pb2.ObjectFieldSelector(fieldPath=path)


def _resource(resource: str, divisor: str = "") -> core_pb2.ResourceFieldSelector:
    return core_pb2.ResourceFieldSelector(resource=resource, divisor=divisor)


async def test_commands_and_environment(cluster: Cluster, kubectl: Kubectl) -> None:
    """Containers, without command and arguments / with arguments / with command / with
    command and arguments ('[sig-node] Containers should use the image defaults if command
    and args are blank' / 'should be able to override the image's default arguments|command|
    command and arguments'); DownwardAPI, environment for name, namespace and ip / host ip /
    Pod UID / CPU and memory limits and requests / default CPU and memory limits
    ('[sig-node] Downward API should provide ... as env vars'); Environment variables,
    expansion / command expansion / command argument expansion ('[sig-node] Variable
    Expansion should allow composing env vars into new env vars | substituting values in a
    container's command|args'); ConfigMap, from environment field / from environment
    variables; Secrets, pod environment field / pod environment from source ('... should be
    consumable via environment variable | via the environment'); Pods, service environment
    variables ('[sig-node] Pods should contain environment variables for services'); Pods,
    assigned hostip ('... should get a host IP'); Kubelet, log output, default ('[sig-node]
    Kubelet when scheduling a busybox command in a pod should print the output to logs')."""
    node = await cluster.add_node(1)
    assert node.cri is not None
    # upstream's agnhost entrypoint-tester: an image with an entrypoint and default arguments
    build_image(node.cri.images, BuiltinImage(TESTER, entrypoint=["/bin/echo"], cmd=["default", "arguments"]),
                DEFAULT_BUSYBOX, "busybox-static", busybox_layer)
    client = cluster.client
    await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name="configmap-test",
                                                                                   namespace="default"),
                                                      data={"data-1": "value-1", "data-2": "value-2"}))
    await client.secrets.create(core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="secret-test", namespace="default"),
                                                data={"data-1": b"value-1", "data-2": b"value-2"}))
    await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="fooservice", namespace="default"),
        spec=core_pb2.ServiceSpec(selector={"name": "srv"}, ports=[core_pb2.ServicePort(
            port=8765, targetPort=core_pb2.IntOrString(intVal=8080), protocol="TCP")])))
    service = await until(lambda: client.services.get("fooservice", "default"), timeout=10, what="the Service",
                          check=lambda s: bool(s.spec.clusterIP))

    printenv = ("env",)  # not through sh: it drops names with a dash
    limited = container("dapi-container", *printenv, env=[
        _env("CPU_LIMIT", resourceFieldRef=_resource("limits.cpu")),
        _env("MEMORY_LIMIT", resourceFieldRef=_resource("limits.memory")),
        _env("CPU_REQUEST", resourceFieldRef=_resource("requests.cpu", "1m")),
        _env("MEMORY_REQUEST", resourceFieldRef=_resource("requests.memory"))])
    limited.resources.limits.update({"cpu": "1250m", "memory": "64Mi"})
    limited.resources.requests.update({"cpu": "250m", "memory": "32Mi"})
    runs = {
        "client-containers-blank": core_pb2.Container(name="c", image=TESTER),
        "client-containers-args": core_pb2.Container(name="c", image=TESTER, args=["override", "arguments"]),
        "client-containers-command": core_pb2.Container(name="c", image=TESTER, command=["/bin/echo", "override",
                                                                                          "command"]),
        "client-containers-both": core_pb2.Container(name="c", image=TESTER, command=["/bin/echo"],
                                                     args=["override", "all"]),
        "downward-api-pod": container("dapi-container", *printenv, env=[
            _env("POD_NAME", fieldRef=_field("metadata.name")),
            _env("POD_NAMESPACE", fieldRef=_field("metadata.namespace")),
            _env("POD_IP", fieldRef=_field("status.podIP")), _env("HOST_IP", fieldRef=_field("status.hostIP")),
            _env("POD_UID", fieldRef=_field("metadata.uid"))]),
        "downward-api-limits": limited,
        "downward-api-defaults": container("dapi-container", *printenv, env=[
            _env("CPU_LIMIT", resourceFieldRef=_resource("limits.cpu")),
            _env("MEMORY_LIMIT", resourceFieldRef=_resource("limits.memory"))]),
        "var-expansion": container("dapi-container", *printenv, env=[
            _env("FOO", "foo-value"), _env("BAR", "bar-value"), _env("FOOBAR", "$(FOO);;$(BAR)")]),
        "var-expansion-command": container("c", "sh", "-c", "echo $(TEST_VAR) command", env=[_env("TEST_VAR",
                                                                                                 "test-value")]),
        "var-expansion-args": core_pb2.Container(name="c", image="busybox", command=["sh", "-c"],
                                                 args=["echo $(TEST_VAR) args"], env=[_env("TEST_VAR", "test-value")]),
        "pod-configmaps": container("env-test", *printenv, env=[_env("CONFIG_DATA_1", configMapKeyRef=core_pb2.
                                                                   ConfigMapKeySelector(name="configmap-test",
                                                                                        key="data-1"))],
                                    envFrom=[core_pb2.EnvFromSource(prefix="p-", configMapRef=core_pb2.
                                                                    ConfigMapEnvSource(name="configmap-test"))]),
        "pod-secrets": container("secret-env-test", *printenv, env=[_env("SECRET_DATA", secretKeyRef=core_pb2.
                                                                         SecretKeySelector(name="secret-test",
                                                                                           key="data-1"))],
                                 envFrom=[core_pb2.EnvFromSource(prefix="s-", secretRef=core_pb2.SecretEnvSource(
                                     name="secret-test"))]),
        "client-envvars": container("env3cont", *printenv),
        "busybox-scheduling": container("busybox", "sh", "-c", "echo 'Hello World'"),
    }
    for name, c in runs.items():
        await client.pods.create(pod(name, c, restart_policy="Never"))

    outputs = {}
    for name in runs:
        done = await _finished(cluster, name)
        outputs[name] = await _logs(cluster, name)
        assert done.status.phase == "Succeeded", (name, outputs[name])
    env = {name: dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
           for name, text in outputs.items()}

    assert outputs["client-containers-blank"] == "default arguments\n"  # the image's entrypoint and Cmd
    assert outputs["client-containers-args"] == "override arguments\n"  # the entrypoint kept, Cmd replaced
    assert outputs["client-containers-command"] == "override command\n"  # the image's Cmd not appended
    assert outputs["client-containers-both"] == "override all\n"

    dapi = await client.pods.get("downward-api-pod", "default")
    assert {k: env["downward-api-pod"][k] for k in ("POD_NAME", "POD_NAMESPACE", "POD_IP", "HOST_IP", "POD_UID")} == {
        "POD_NAME": "downward-api-pod", "POD_NAMESPACE": "default", "POD_IP": dapi.status.podIP,
        "HOST_IP": node.config.node_ip, "POD_UID": dapi.metadata.uid}
    assert dapi.status.hostIP == node.config.node_ip  # Pods, assigned hostip
    limits = env["downward-api-limits"]
    assert (limits["CPU_LIMIT"], limits["MEMORY_LIMIT"], limits["CPU_REQUEST"], limits["MEMORY_REQUEST"]) == (
        "2", str(64 * 1024 * 1024), "250", str(32 * 1024 * 1024))
    allocatable = (await client.nodes.get(node.config.node_name)).status.allocatable
    defaults = env["downward-api-defaults"]
    assert defaults["CPU_LIMIT"] == allocatable["cpu"]
    assert defaults["MEMORY_LIMIT"] == str(parse_quantity(allocatable["memory"]).int_value())

    assert env["var-expansion"]["FOOBAR"] == "foo-value;;bar-value"
    assert outputs["var-expansion-command"] == "test-value command\n"
    assert outputs["var-expansion-args"] == "test-value args\n"
    assert env["pod-configmaps"]["CONFIG_DATA_1"] == "value-1"
    assert (env["pod-configmaps"]["p-data-1"], env["pod-configmaps"]["p-data-2"]) == ("value-1", "value-2")
    assert env["pod-secrets"]["SECRET_DATA"] == "value-1"
    assert (env["pod-secrets"]["s-data-1"], env["pod-secrets"]["s-data-2"]) == ("value-1", "value-2")
    services = env["client-envvars"]
    ip = service.spec.clusterIP
    assert {k: services[k] for k in ("FOOSERVICE_SERVICE_HOST", "FOOSERVICE_SERVICE_PORT", "FOOSERVICE_PORT",
                                     "FOOSERVICE_PORT_8765_TCP_PORT", "FOOSERVICE_PORT_8765_TCP_PROTO",
                                     "FOOSERVICE_PORT_8765_TCP", "FOOSERVICE_PORT_8765_TCP_ADDR")} == {
        "FOOSERVICE_SERVICE_HOST": ip, "FOOSERVICE_SERVICE_PORT": "8765", "FOOSERVICE_PORT": f"tcp://{ip}:8765",
        "FOOSERVICE_PORT_8765_TCP_PORT": "8765", "FOOSERVICE_PORT_8765_TCP_PROTO": "tcp",
        "FOOSERVICE_PORT_8765_TCP": f"tcp://{ip}:8765", "FOOSERVICE_PORT_8765_TCP_ADDR": ip}
    assert outputs["busybox-scheduling"] == "Hello World\n"


async def test_init_containers_and_restart_policies(cluster: Cluster) -> None:
    """init-container-starts-app-restartalways-pod / -restartnever-pod /
    init-container-fails-stops-app-restartnever-pod / -restartalways-pod ('[sig-node]
    InitContainer should invoke init containers on a RestartAlways|RestartNever pod' / 'should
    not start app containers (and fail the pod) if init containers fail on a
    RestartNever|RestartAlways pod'); Container Runtime, Restart Policy, Pod Phases ('[sig-node]
    Container Runtime blackbox test when starting a container that exits should run with the
    expected status'); Kubelet, failed pod, terminated reason / delete ('[sig-node] Kubelet
    when scheduling a busybox command that always fails in a pod should have an terminated
    reason / should be possible to delete')."""
    await cluster.add_node(1)
    client = cluster.client
    ok, fails = container("init1", "true"), container("init1", "false")
    await client.pods.create(pod("pod-init-always", container("run1", "sleep", "3600"),
                                 init=(ok, container("init2", "true"))))
    await client.pods.create(pod("pod-init-never", container("run1", "true"), restart_policy="Never",
                                 init=(ok, container("init2", "true"))))
    await client.pods.create(pod("pod-init-fails-never", container("run1", "true"), restart_policy="Never",
                                 init=(fails, container("init2", "true"))))
    await client.pods.create(pod("pod-init-fails-always", container("run1", "sleep", "3600"),
                                 init=(fails, container("init2", "true"))))
    for name, policy, code in (("terminate-cmd-rpa", "Always", 0), ("terminate-cmd-rpof", "OnFailure", 1),
                               ("terminate-cmd-rpof-ok", "OnFailure", 0), ("terminate-cmd-rpn", "Never", 1)):
        await client.pods.create(pod(name, container("c", "sh", "-c", f"exit {code}"), restart_policy=policy))
    await client.pods.create(pod("bin-false", container("bin-false", "/bin/false"), restart_policy="Never"))

    always = await cluster.wait_pod("pod-init-always", lambda p: p.status.phase == "Running")
    assert [s.state.terminated.exitCode for s in always.status.initContainerStatuses] == [0, 0]
    assert {c.type: c.status for c in always.status.conditions}["Initialized"] == "True"
    never = await _finished(cluster, "pod-init-never")
    assert never.status.phase == "Succeeded"
    assert [s.state.terminated.reason for s in never.status.initContainerStatuses] == ["Completed", "Completed"]
    failed = await _finished(cluster, "pod-init-fails-never")
    assert failed.status.phase == "Failed"
    assert failed.status.initContainerStatuses[0].state.terminated.exitCode == 1
    assert not failed.status.containerStatuses[0].state.HasField("running")
    assert not failed.status.containerStatuses[0].state.HasField("terminated")  # never started
    retried = await cluster.wait_pod("pod-init-fails-always", lambda p: p.status.initContainerStatuses[0].restartCount
                                     >= 3 if p.status.initContainerStatuses else False, timeout=90)
    assert retried.status.phase == "Pending"
    assert retried.status.containerStatuses[0].state.waiting.reason == "PodInitializing"
    conditions = {c.type: c for c in retried.status.conditions}
    assert conditions["Initialized"].status == "False" and conditions["Initialized"].reason == \
        "ContainersNotInitialized"

    restarting = await cluster.wait_pod("terminate-cmd-rpa", lambda p: p.status.containerStatuses[0].restartCount
                                        >= 2 if p.status.containerStatuses else False, timeout=60)
    assert restarting.status.phase == "Running"
    retried_failure = await cluster.wait_pod("terminate-cmd-rpof", lambda p: p.status.containerStatuses[0]
                                             .restartCount >= 1 if p.status.containerStatuses else False, timeout=60)
    assert retried_failure.status.phase == "Running"
    done = await _finished(cluster, "terminate-cmd-rpof-ok")
    assert (done.status.phase, done.status.containerStatuses[0].restartCount) == ("Succeeded", 0)
    done = await _finished(cluster, "terminate-cmd-rpn")
    assert (done.status.phase, done.status.containerStatuses[0].restartCount) == ("Failed", 0)

    false = await _finished(cluster, "bin-false")
    assert len(false.status.containerStatuses) == 1
    assert false.status.containerStatuses[0].state.terminated.reason == "Error"
    await client.pods.delete("bin-false", "default")
    await cluster.wait_gone("bin-false")


def _tls(cluster: Cluster) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    context.load_cert_chain(cluster.pki / "admin.crt", cluster.pki / "admin.key")
    return context


async def test_pod_lifecycle_through_the_api(cluster: Cluster, kubectl: Kubectl) -> None:
    """Pods, lifecycle ('[sig-node] Pods should be submitted and removed'); Pods, update
    ('... should be updated'); Pods, ActiveDeadlineSeconds ('... should allow
    activeDeadlineSeconds to be updated'); Pods, remote command execution over websocket /
    logs from websockets ('... should support remote command execution over websockets /
    retrieving logs from the container over websockets'); Pods, QOS ('[sig-node] Pods
    Extended Pods Set QOS Class should be set on Pods with matching resource requests and
    limits'); Ephemeral Container Creation / update ephemeral containers ('[sig-node]
    Ephemeral Containers will start an ephemeral container in an existing pod / should
    update the ephemeral containers in an existing pod')."""
    await cluster.add_node(1)
    client = cluster.client
    _, listed_at = await client.pods.list_all("default")
    watch = client.pods.watch("default", resource_version=listed_at, label_selector="time=submitted")
    made = pod("pod-submit-remove", container("c", "sleep", "3600"), grace=30)
    made.metadata.labels["time"] = "submitted"
    await client.pods.create(made)
    guaranteed = container("agnhost", "sleep", "3600")
    for kind in (guaranteed.resources.limits, guaranteed.resources.requests):
        kind.update({"cpu": "100m", "memory": "100Mi"})
    await client.pods.create(pod("pod-qos-class", guaranteed))
    await client.pods.create(pod("pod-update", container("c", "sleep", "3600")))
    await client.pods.create(pod("pod-update-activedeadlineseconds", container("c", "sleep", "3600")))
    await client.pods.create(pod("pod-exec-websocket", container("main", "sh", "-c", "echo container is alive; "
                                                                  "sleep 3600")))
    await client.pods.create(pod("ephemeral-containers-target-pod", container("test-container-1", "sleep", "3600")))
    for name in ("pod-submit-remove", "pod-qos-class", "pod-update", "pod-update-activedeadlineseconds",
                 "pod-exec-websocket", "ephemeral-containers-target-pod"):
        await cluster.wait_pod(name, lambda p: p.status.phase == "Running")

    # submitted and removed: the watch saw it added, then its deletion (graceful, then gone)
    await client.pods.delete("pod-submit-remove", "default", grace_period_seconds=30)
    seen = []
    async for event in watch:
        seen.append((event.type, event.object.metadata.HasField("deletionTimestamp")))
        if event.type == "DELETED":
            break
    assert seen[0] == ("ADDED", False) and seen[-1][0] == "DELETED" and (("MODIFIED", True) in seen), seen
    assert (await client.pods.list_all("default", label_selector="time=submitted"))[0] == []

    qos = await client.pods.get("pod-qos-class", "default")
    assert qos.status.qosClass == "Guaranteed"

    updated = await client.pods.get("pod-update", "default")
    updated.metadata.labels["time"] = "updated"
    await client.pods.update(updated)
    assert [p.metadata.name for p in (await client.pods.list_all("default", label_selector="time=updated"))[0]] == [
        "pod-update"]

    deadline = await client.pods.get("pod-update-activedeadlineseconds", "default")
    deadline.spec.activeDeadlineSeconds = 5
    await client.pods.update(deadline)
    ended = await cluster.wait_pod("pod-update-activedeadlineseconds", lambda p: p.status.phase == "Failed",
                                   timeout=60)
    assert ended.status.reason == "DeadlineExceeded"

    base = f"wss://{cluster.apiserver.rest_address}/api/v1/namespaces/default/pods/pod-exec-websocket"
    async with aiohttp.ClientSession() as session:
        query = "command=echo&command=remote%20execution%20test&stdout=1&stderr=1"
        async with session.ws_connect(f"{base}/exec?{query}", protocols=["channel.k8s.io"], ssl=_tls(cluster)) as ws:
            received = b""
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x01":
                    received += message.data[1:]
        assert received == b"remote execution test\n"
        async with session.ws_connect(f"{base}/log?container=main", protocols=["binary.k8s.io"],
                                      ssl=_tls(cluster)) as ws:
            logged = b""
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY:
                    logged += message.data
                    if b"\n" in logged:
                        break
        assert logged == b"container is alive\n"

    # kubectl logs' options through pods/log (beyond the list)
    assert (await kubectl("logs", "pod-exec-websocket", "--since=1h"))[1] == "container is alive\n"
    assert (await kubectl("logs", "pod-exec-websocket", "--since-time=2099-01-01T00:00:00Z"))[1] == ""
    stamped = (await kubectl("logs", "pod-exec-websocket", "--timestamps"))[1]
    assert stamped.startswith("20") and stamped.endswith("Z container is alive\n"), stamped
    assert (await kubectl("logs", "pod-exec-websocket", "--limit-bytes=9"))[1] == "container"
    code, _, err = await kubectl("logs", "pod-exec-websocket", "--since=1h", "--since-time=2099-01-01T00:00:00Z",
                                 ok=False)
    assert code != 0 and "at most one of" in err, err

    for i in (1, 2):
        await kubectl("debug", "ephemeral-containers-target-pod", "--image=busybox", f"--container=debugger-{i}",
                      "--", "sh", "-c", f"echo ephemeral {i}; sleep 3600")
        def running(p: core_pb2.Pod, count: int = i) -> bool:
            statuses = p.status.ephemeralContainerStatuses
            return len(statuses) == count and all(s.state.HasField("running") for s in statuses)
        await cluster.wait_pod("ephemeral-containers-target-pod", running)
        assert await _logs(cluster, "ephemeral-containers-target-pod", f"debugger-{i}") == f"ephemeral {i}\n"
    target = await client.pods.get("ephemeral-containers-target-pod", "default")
    assert [c.name for c in target.spec.ephemeralContainers] == ["debugger-1", "debugger-2"]


async def test_probes(cluster: Cluster, kubectl: Kubectl) -> None:
    """Pod liveness probe, using local file, no restart / restart; using http endpoint,
    failure / restart / multiple restarts (slow); using tcp socket, no restart; Pod readiness
    probe, with initial delay / failure ('[sig-node] Probing container ...'), with upstream's
    pods at short periods: busybox's httpd serves /healthz until the container removes the
    file; the probe rounds are counted by an exec probe, so the test waits on them."""
    await cluster.add_node(1)
    client = cluster.client

    def probe(**handler: object) -> core_pb2.Probe:  # upstream's failureThreshold 1, after the server is up
        return core_pb2.Probe(periodSeconds=1, failureThreshold=1, initialDelaySeconds=1,
                              **handler)  # type: ignore[arg-type]

    def exec_probe(command: str) -> core_pb2.Probe:
        return probe(exec=core_pb2.ExecAction(command=["sh", "-c", command]))
    count_rounds = exec_probe("echo >> /tmp/rounds")
    http_get = core_pb2.HTTPGetAction(path="/healthz", port=core_pb2.IntOrString(intVal=8080))
    serve = "mkdir /www; echo ok > /www/healthz; httpd -p 8080 -h /www; "
    pods = {
        "liveness-exec-ok": container("c", "sh", "-c", "echo ok > /tmp/health; sleep 3600",
                                      livenessProbe=exec_probe("cat /tmp/health"), readinessProbe=count_rounds),
        "liveness-exec-fail": container("c", "sh", "-c", "echo ok > /tmp/health; sleep 3; rm /tmp/health; sleep 3600",
                                        livenessProbe=exec_probe("cat /tmp/health")),
        "liveness-http-ok": container("c", "sh", "-c", serve + "sleep 3600", livenessProbe=probe(httpGet=http_get),
                                      readinessProbe=count_rounds),
        "liveness-http-fail": container("c", "sh", "-c", serve + "sleep 3; rm /www/healthz; sleep 3600",
                                        livenessProbe=probe(httpGet=http_get)),
        "liveness-tcp-ok": container("c", "sh", "-c", "httpd -p 8080 -h /tmp; sleep 3600", livenessProbe=probe(
            tcpSocket=core_pb2.TCPSocketAction(port=core_pb2.IntOrString(intVal=8080))), readinessProbe=count_rounds),
        "readiness-delay": container("c", "sleep", "3600", readinessProbe=core_pb2.Probe(
            exec=core_pb2.ExecAction(command=["true"]), initialDelaySeconds=5, periodSeconds=1)),
        "readiness-fails": container("c", "sh", "-c", "sleep 3600", readinessProbe=exec_probe(
            "echo >> /tmp/rounds; false")),
    }
    for name, c in pods.items():
        await client.pods.create(pod(name, c))

    async def rounds(name: str) -> int:
        _, out, _ = await kubectl("exec", name, "--", "sh", "-c", "wc -l < /tmp/rounds")
        return int(out.strip() or 0)

    # restarts: at least 1, the multiple-restart case up to 3 with the counts only growing
    counts: list[int] = []

    def growing(p: core_pb2.Pod) -> bool:
        if p.status.containerStatuses:
            count = p.status.containerStatuses[0].restartCount
            if not counts or count != counts[-1]:
                counts.append(count)
        return bool(counts) and counts[-1] >= 3
    await cluster.wait_pod("liveness-http-fail", growing, timeout=120)
    assert counts == sorted(counts), counts
    await cluster.wait_pod("liveness-exec-fail", lambda p: p.status.containerStatuses[0].restartCount >= 1
                           if p.status.containerStatuses else False, timeout=60)
    assert any("Liveness probe failed" in m for m in await _events(cluster, "liveness-exec-fail", "Unhealthy"))

    for name in ("liveness-exec-ok", "liveness-http-ok", "liveness-tcp-ok"):
        await until(functools.partial(rounds, name), timeout=60, check=lambda n: n >= 6, what=f"{name}: six rounds")
        alive = await client.pods.get(name, "default")
        assert alive.status.containerStatuses[0].restartCount == 0 and alive.status.containerStatuses[0].ready, name

    delayed = await cluster.wait_pod("readiness-delay", lambda p: p.status.containerStatuses[0].ready
                                     if p.status.containerStatuses else False, timeout=60)
    ready_at = next(c for c in delayed.status.conditions if c.type == "Ready").lastTransitionTime
    started_at = delayed.status.containerStatuses[0].state.running.startedAt
    assert ready_at.seconds - started_at.seconds >= 5 - 1  # not before the initial delay (second precision)
    assert delayed.status.containerStatuses[0].restartCount == 0

    await until(lambda: rounds("readiness-fails"), timeout=60, check=lambda n: n >= 5, what="five failed rounds")
    never_ready = await client.pods.get("readiness-fails", "default")
    status = never_ready.status.containerStatuses[0]
    assert not status.ready and status.restartCount == 0 and status.state.HasField("running")
    assert {c.type: c.status for c in never_ready.status.conditions}["Ready"] == "False"



def _subpath_pod(name: str, expr: str, script: str, **env: str) -> core_pb2.Pod:
    c = container("dapi-container", "sh", "-c", script, env=[
        _env("POD_NAME", value) if key == "POD_NAME" else _env(key, fieldRef=_field(value))
        for key, value in env.items()])
    c.volumeMounts.add(name="workdir1", mountPath="/volume_mount")
    c.volumeMounts.add(name="workdir1", mountPath="/subpath_mount", subPathExpr=expr)
    made = pod(name, c, restart_policy="Never")
    made.spec.volumes.add(name="workdir1", emptyDir=core_pb2.EmptyDirVolumeSource())
    return made


async def test_variable_expansion_in_subpaths_and_managed_etc_hosts(cluster: Cluster, kubectl: Kubectl) -> None:
    """VolumeSubpathEnvExpansion, subpath expansion / subpath with absolute path / subpath
    with backticks / subpath test writes / subpath ready from failed state ('[sig-node]
    Variable Expansion should allow substituting values in a volume subpath | should fail
    substituting values in a volume subpath with absolute path | with backticks | should
    succeed in writing subpaths in container | should verify that a failing subpath
    expansion can be modified during the lifecycle of a container'); Kubelet, managed etc
    hosts ('[sig-node] KubeletManagedEtcHosts should test kubelet managed /etc/hosts file')."""
    await cluster.add_node(1)
    client = cluster.client
    await client.pods.create(_subpath_pod("var-expansion-subpath", "$(POD_NAME)", "test -d /volume_mount/foo",
                                          POD_NAME="foo"))
    await client.pods.create(_subpath_pod("var-expansion-absolute", "$(POD_NAME)", "true", POD_NAME="/tmp"))
    await client.pods.create(_subpath_pod("var-expansion-backticks", "$(POD_NAME)", "true", POD_NAME=".."))
    writes = _subpath_pod("var-expansion-writes", "$(ANNOTATION)", "echo written > /subpath_mount/test.log; "
                          "test -f /volume_mount/mypath/foo/test.log", ANNOTATION="metadata.annotations['mysubpath']")
    writes.metadata.annotations["mysubpath"] = "mypath/foo"
    await client.pods.create(writes)
    fixed = _subpath_pod("var-expansion-modified", "$(ANNOTATION)", "true",
                         ANNOTATION="metadata.annotations['mysubpath']")
    fixed.metadata.annotations["mysubpath"] = "mypath/../../.."  # out of the volume: refused until changed
    await client.pods.create(fixed)

    managed = [container(f"busybox-{i}", "sleep", "3600") for i in (1, 2)]
    own_hosts = container("busybox-3", "sleep", "3600")
    own_hosts.volumeMounts.add(name="host-etc-hosts", mountPath="/etc/hosts", readOnly=True)
    etc_pod = pod("test-pod", *managed, own_hosts)
    etc_pod.spec.volumes.add(name="host-etc-hosts", hostPath=core_pb2.HostPathVolumeSource(path="/etc/hosts"))
    await client.pods.create(etc_pod)
    await client.pods.create(pod("test-host-network-pod", container("busybox-1", "sleep", "3600"),
                                 container("busybox-2", "sleep", "3600"), hostNetwork=True))

    assert (await _finished(cluster, "var-expansion-subpath")).status.phase == "Succeeded"
    assert (await _finished(cluster, "var-expansion-writes")).status.phase == "Succeeded"
    for name in ("var-expansion-absolute", "var-expansion-backticks", "var-expansion-modified"):
        failing = await cluster.wait_pod(name, lambda p: bool(p.status.containerStatuses) and p.status
                                         .containerStatuses[0].state.waiting.reason == "CreateContainerConfigError")
        assert failing.status.phase == "Pending"
    current = await client.pods.get("var-expansion-modified", "default")
    current.metadata.annotations["mysubpath"] = "mypath/tmp"
    await client.pods.update(current)
    assert (await _finished(cluster, "var-expansion-modified")).status.phase == "Succeeded"

    async def hosts(name: str, container_name: str) -> str:
        return (await kubectl("exec", name, "-c", container_name, "--", "cat", "/etc/hosts"))[1]
    await cluster.wait_pod("test-pod", lambda p: p.status.phase == "Running")
    await cluster.wait_pod("test-host-network-pod", lambda p: p.status.phase == "Running")
    for name in ("busybox-1", "busybox-2"):
        assert (await hosts("test-pod", name)).startswith("# Kubernetes-managed hosts file.")
        assert not (await hosts("test-host-network-pod", name)).startswith("# Kubernetes-managed hosts file.")
    assert (await hosts("test-pod", "busybox-3")) == Path("/etc/hosts").read_text()
