"""Container lifecycle hooks (pkg/kubelet/lifecycle/handlers.go): the postStart and
preStop handlers of a container, run by the kubelet.

As upstream: `exec` runs in the container through the CRI's ExecSync (a non-zero exit
fails the hook); `httpGet` is a GET to the pod's IP (or `host`) that fails only when
the request cannot be made — any HTTP status is an answer; `sleep` waits its seconds;
`tcpSocket` is kept in the API for compatibility and fails at run time. The messages
are upstream's, as `kubectl describe pod` shows them in FailedPostStartHook and
FailedPreStopHook events.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

from kubelet.probes import container_port
from kubelet.runtime import CRICallError, Runtime
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["HookRunner", "HookError", "pod_ref"]


class HookError(Exception):
    """A hook failed; its text is the message of the hook's event."""


def pod_ref(pod: Pod) -> str:
    """upstream's format.Pod: name_namespace(uid)."""
    return f"{pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid})"


@dataclass
class HookRunner:
    runtime: Runtime
    _session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def run(self, pod: Pod, container: core_pb2.Container, container_id: str,
                  handler: core_pb2.LifecycleHandler, pod_ip: str) -> None:
        """Run one handler to its end (bounded by the caller for preStop); HookError
        when it fails."""
        if handler.HasField("exec"):
            await self._exec(pod, container, container_id, handler.exec)
        elif handler.HasField("httpGet"):
            await self._http(pod, container, handler.httpGet, pod_ip)
        elif handler.HasField("sleep"):
            await asyncio.sleep(max(0, handler.sleep.seconds))
        else:
            raise HookError(f"invalid handler: {_describe(handler)}")

    async def _exec(self, pod: Pod, container: core_pb2.Container, container_id: str,
                    action: core_pb2.ExecAction) -> None:
        command = list(action.command)
        try:
            reply = await self.runtime.exec_sync(container_id, command, 0)
        except CRICallError as exc:
            raise HookError(_exec_message(pod, container, command, exc.details or str(exc), "")) from None
        if reply.exit_code != 0:
            # the error as upstream's remote runtime words it (stderr), then the whole output
            stderr = reply.stderr.decode(errors="replace")
            error = f"command '{' '.join(command)}' exited with {reply.exit_code}: {stderr}"
            raise HookError(_exec_message(pod, container, command, error,
                                          (reply.stdout + reply.stderr).decode(errors="replace")))

    async def _http(self, pod: Pod, container: core_pb2.Container, action: core_pb2.HTTPGetAction,
                    pod_ip: str) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        path = action.path if action.path.startswith("/") else f"/{action.path}"
        try:
            port = container_port(container, action.port)
            url = f"{(action.scheme or 'HTTP').lower()}://{action.host or pod_ip}:{port}{path}"
            headers = {"User-Agent": "kube-lifecycle/1.35", **{h.name: h.value for h in action.httpHeaders}}
            async with self._session.get(url, headers=headers, ssl=False, allow_redirects=True) as reply:
                await reply.read()  # any status is an answer, as upstream's runHTTPHandler
        except (OSError, ValueError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise HookError(f"HTTP lifecycle hook ({action.path}) for Container {_go_quote(container.name)} in Pod "
                            f"{_go_quote(pod_ref(pod))} failed - error: {exc or type(exc).__name__}") from None


def _exec_message(pod: Pod, container: core_pb2.Container, command: list[str], error: str, output: str) -> str:
    return (f"Exec lifecycle hook ({_go_list(command)}) for Container {_go_quote(container.name)} in Pod "
            f"{_go_quote(pod_ref(pod))} failed - error: {error}, message: {_go_quote(output)}")


def _describe(handler: core_pb2.LifecycleHandler) -> str:
    return "tcpSocket" if handler.HasField("tcpSocket") else "no handler"


def _go_list(items: list[str]) -> str:
    """A []string as Go's %v prints it."""
    return "[" + " ".join(items) + "]"


def _go_quote(text: str) -> str:
    """Go's %q of a string (the common escapes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'
