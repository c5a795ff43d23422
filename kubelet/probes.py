"""Liveness, readiness and startup probes (pkg/kubelet/prober): one worker per probe
and running container, results kept per container ID.

As upstream: readiness starts as not ready, liveness as healthy; liveness and
readiness wait for the startup probe to succeed; a verdict changes only after
successThreshold / failureThreshold results in a row; a probe that fails to run
(timeout, refused connection) counts as a failure. Exec probes go through the CRI's
ExecSync, httpGet to the pod IP (2xx/3xx succeed), tcpSocket opens a connection, grpc
asks the gRPC health protocol's Check (grpc.health.v1) and wants SERVING.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kubelet.actions import is_sidecar
from kubelet.runtime import RUNNING, CRICallError, PodRuntimeStatus, Runtime
from kubeling.events import WARNING, EventRecorder
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["ProbeManager", "LIVENESS", "READINESS", "STARTUP", "container_port", "find_container"]

log = logging.getLogger(__name__)

LIVENESS, READINESS, STARTUP = "Liveness", "Readiness", "Startup"
_FIELD = {LIVENESS: "livenessProbe", READINESS: "readinessProbe", STARTUP: "startupProbe"}
_MAX_OUTPUT = 10 * 1024  # upstream keeps this much of a probe's output for the event


@dataclass
class _Worker:
    kind: str
    container_id: str
    task: asyncio.Task[None]


@dataclass
class ProbeManager:
    runtime: Runtime
    recorder: EventRecorder
    on_change: Callable[[str], None]  # pod UID whose verdicts changed: sync it again
    node_ip: str = "127.0.0.1"  # where host-network pods are probed
    _workers: dict[tuple[str, str, str], _Worker] = field(default_factory=dict)  # (uid, container, kind)
    _results: dict[tuple[str, str], bool] = field(default_factory=dict)  # (kind, container id) -> verdict
    _session: aiohttp.ClientSession | None = None

    # ---- verdicts, read by SyncPod and the status ----

    def failed(self, kind: str, container_ids: list[str]) -> set[str]:
        return {cid for cid in container_ids if self._results.get((kind, cid)) is False}

    def verdicts(self, kind: str) -> dict[str, bool]:
        return {cid: ok for (k, cid), ok in self._results.items() if k == kind}

    # ---- workers follow the running containers ----

    def sync(self, pod: Pod, runtime: PodRuntimeStatus) -> None:
        uid = pod.metadata.uid
        sandbox = runtime.ready_sandbox
        ip = self.node_ip if pod.spec.hostNetwork else sandbox.ip if sandbox is not None else ""
        wanted: dict[tuple[str, str, str], tuple[str, int, core_pb2.Probe]] = {}
        if not pod.metadata.HasField("deletionTimestamp"):
            sidecars = [c for c in pod.spec.initContainers if is_sidecar(c)]
            for init, container in [*((False, c) for c in pod.spec.containers), *((True, c) for c in sidecars)]:
                latest = runtime.latest(container.name, init=init)
                if latest is None or latest.state != RUNNING:
                    continue
                for kind, name in _FIELD.items():
                    if container.HasField(name):
                        wanted[(uid, container.name, kind)] = (latest.id, latest.started_at, getattr(container, name))
        for key, worker in list(self._workers.items()):
            if key[0] == uid and (key not in wanted or wanted[key][0] != worker.container_id):
                self._drop(key)
        for key, (cid, started_at, probe) in wanted.items():
            if key not in self._workers:
                task = asyncio.create_task(self._run(pod, ip, key[1], key[2], cid, started_at, probe),
                                           name=f"probe-{key[2]}-{pod.metadata.name}-{key[1]}")
                self._workers[key] = _Worker(key[2], cid, task)

    def _drop(self, key: tuple[str, str, str]) -> None:
        worker = self._workers.pop(key)
        worker.task.cancel()
        self._results.pop((worker.kind, worker.container_id), None)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._workers if k[0] == uid]:
            self._drop(key)

    async def close(self) -> None:
        for key in list(self._workers):
            worker = self._workers[key]
            self._drop(key)
            await cancel_and_wait(worker.task)
        if self._session is not None:
            await self._session.close()

    # ---- one worker ----

    def _set(self, uid: str, kind: str, cid: str, ok: bool) -> None:
        if self._results.get((kind, cid)) != ok:
            self._results[(kind, cid)] = ok
            self.on_change(uid)

    async def _run(self, pod: Pod, ip: str, container: str, kind: str, cid: str, started_at: int,
                   probe: core_pb2.Probe) -> None:
        uid = pod.metadata.uid
        where = f"pod {pod.metadata.namespace}/{pod.metadata.name} container {container}"
        period = max(1, probe.periodSeconds or 10)
        successes_needed = max(1, probe.successThreshold or 1)
        failures_allowed = max(1, probe.failureThreshold or 3)
        if kind == READINESS:
            self._set(uid, kind, cid, False)
        delay = started_at / 1e9 + probe.initialDelaySeconds - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        successes = failures = 0
        while True:
            if kind != STARTUP and self._results.get((STARTUP, cid)) is not True and \
                    (uid, container, STARTUP) in self._workers:
                await asyncio.sleep(period)  # not started yet: nothing else is probed
                continue
            ok, output = await self._probe(pod, ip, container, cid, probe)
            if ok:
                successes, failures = successes + 1, 0
                if successes >= successes_needed:
                    self._set(uid, kind, cid, True)
                    if kind == STARTUP:
                        return  # a startup probe stops once it succeeded
            else:
                successes, failures = 0, failures + 1
                log.info("%s: %s probe failed: %s", where, kind.lower(), output)
                self.recorder.pod_event(pod, WARNING, "Unhealthy", f"{kind} probe failed: {output}",
                                        field_path=f"spec.containers{{{container}}}")
                if failures >= failures_allowed:
                    self._set(uid, kind, cid, False)
                    if kind != READINESS:
                        return  # the container will be killed; a new one gets a new worker
            await asyncio.sleep(period)

    async def _probe(self, pod: Pod, ip: str, container: str, cid: str, probe: core_pb2.Probe) -> tuple[bool, str]:
        timeout = max(1, probe.timeoutSeconds or 1)
        try:
            if probe.HasField("exec"):
                reply = await self.runtime.exec_sync(cid, list(probe.exec.command), timeout)
                output = (reply.stdout + reply.stderr)[:_MAX_OUTPUT].decode(errors="replace").strip()
                return reply.exit_code == 0, output or f"command exited with {reply.exit_code}"
            if probe.HasField("httpGet"):
                return await self._http(pod, ip, container, probe.httpGet, timeout)
            if probe.HasField("tcpSocket"):
                host = probe.tcpSocket.host or ip
                port = container_port(find_container(pod, container), probe.tcpSocket.port)
                async with asyncio.timeout(timeout):
                    _, writer = await asyncio.open_connection(host, port)
                writer.close()
                return True, ""
            if probe.HasField("grpc"):
                return await _grpc(ip, probe.grpc, timeout)
            return False, "unsupported probe handler (exec, httpGet, tcpSocket and grpc are)"
        except CRICallError as exc:
            return False, exc.details or str(exc)
        except (OSError, asyncio.TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    async def _http(self, pod: Pod, ip: str, container: str, action: core_pb2.HTTPGetAction,
                    timeout: int) -> tuple[bool, str]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        host = action.host or ip
        scheme = (action.scheme or "HTTP").lower()
        path = action.path if action.path.startswith("/") else f"/{action.path}"
        url = f"{scheme}://{host}:{container_port(find_container(pod, container), action.port)}{path}"
        headers = {"User-Agent": "kube-probe/1.32", **{h.name: h.value for h in action.httpHeaders}}
        async with self._session.get(url, headers=headers, allow_redirects=False, ssl=False,
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as reply:
            body = (await reply.content.read(_MAX_OUTPUT)).decode(errors="replace")
            if 200 <= reply.status < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {reply.status} {body}".strip()


async def _grpc(ip: str, action: core_pb2.GRPCAction, timeout: int) -> tuple[bool, str]:
    """upstream's grpc prober: a plaintext connection to the pod IP, Check(service), and
    its messages."""
    address = f"{ip}:{action.port}"
    async with grpc.aio.insecure_channel(address, options=[("grpc.primary_user_agent", "kube-probe/1.35")]) as channel:
        try:
            async with asyncio.timeout(timeout):
                await channel.channel_ready()
        except TimeoutError:
            return False, f"timeout: failed to connect service {address!r} within {timeout}s: context deadline exceeded"
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=action.service), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                return False, ("this server does not implement the grpc health protocol (grpc.health.v1.Health): "
                               f"{err.details()}")
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"timeout: health rpc did not complete within {timeout}s"
            code = "".join(word.capitalize() for word in err.code().name.split("_"))  # Go's codes.Code names
            return False, f"error: health rpc probe failed: rpc error: code = {code} desc = {err.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return False, f"service unhealthy (responded with \"{name}\")"
    return True, ""


def find_container(pod: Pod, name: str) -> core_pb2.Container:
    """The pod's container (app, or init: a sidecar) of that name."""
    for c in [*pod.spec.containers, *pod.spec.initContainers]:
        if c.name == name:
            return c
    raise ValueError(f"container {name!r} is not in the pod")


def container_port(container: core_pb2.Container, port: core_pb2.IntOrString) -> int:
    """A probe's or hook's port: a number, or the name of one of the container's ports."""
    if port.type == 0:
        return port.intVal
    for p in container.ports:
        if p.name == port.strVal:
            return p.containerPort
    raise ValueError(f"port {port.strVal!r} is not a named port of container {container.name}")
