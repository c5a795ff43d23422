"""Liveness, readiness and startup probes (pkg/kubelet/prober): one worker per probe
and running container, results kept per container ID.

As upstream: readiness starts as not ready, liveness as healthy; liveness and
readiness wait for the startup probe to succeed; a verdict changes only after
successThreshold / failureThreshold results in a row; a probe that fails to run
(timeout, refused connection) counts as a failure. Exec probes go through the CRI's
ExecSync, httpGet to the pod IP (2xx/3xx succeed), tcpSocket opens a connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from kubelet.runtime import RUNNING, CRICallError, PodRuntimeStatus, Runtime
from kubeling.events import WARNING, EventRecorder
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["ProbeManager", "LIVENESS", "READINESS", "STARTUP"]

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
            for container in pod.spec.containers:
                latest = runtime.latest(container.name)
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
                port = _port(pod, container, probe.tcpSocket.port)
                async with asyncio.timeout(timeout):
                    _, writer = await asyncio.open_connection(host, port)
                writer.close()
                return True, ""
            return False, "unsupported probe handler (exec, httpGet and tcpSocket are)"
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
        url = f"{scheme}://{host}:{_port(pod, container, action.port)}{path}"
        headers = {"User-Agent": "kube-probe/1.32", **{h.name: h.value for h in action.httpHeaders}}
        async with self._session.get(url, headers=headers, allow_redirects=False, ssl=False,
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as reply:
            body = (await reply.content.read(_MAX_OUTPUT)).decode(errors="replace")
            if 200 <= reply.status < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {reply.status} {body}".strip()


def _port(pod: Pod, container: str, port: core_pb2.IntOrString) -> int:
    if port.type == 0:
        return port.intVal
    for c in pod.spec.containers:
        if c.name == container:
            for p in c.ports:
                if p.name == port.strVal:
                    return p.containerPort
    raise ValueError(f"port {port.strVal!r} is not a named port of container {container}")
