"""The pods/exec, pods/attach and pods/portforward subresources: the request's options
(PodExecOptions, PodAttachOptions, PodPortForwardOptions, read from the query as
kube-apiserver's parameter codec reads them) become the URL of the pod's kubelet,
to which the client's upgrade request is then relayed (kube-apiserver's ExecREST,
AttachREST and PortForwardREST with their UpgradeAwareHandler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from multidict import MultiMapping

from apiserver.registry.core.pod_location import PodLocator
from kubeling import errors
from protos.kubeling.v1 import core_pb2

__all__ = ["PodStreams", "stream_params", "forward_ports", "connect_options"]

Query = MultiMapping[str]


def _bool(query: Query, name: str, default: bool) -> bool:
    """As the parameter codec converts a query value: "0" and "false" (any case) are
    false, anything else true; absent takes the options' default."""
    if name not in query:
        return default
    value = query[name]
    return not (value == "0" or value.lower() == "false")


def stream_params(query: Query) -> list[tuple[str, str]]:
    """The kubelet's names for the streams asked for; stdout and stderr default to on
    (SetDefaults_PodExecOptions), and a terminal has no separate stderr."""
    tty = _bool(query, "tty", False)
    stdin, stdout = _bool(query, "stdin", False), _bool(query, "stdout", True)
    stderr = _bool(query, "stderr", True) and not tty
    if not (stdin or stdout or stderr):
        raise errors.BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    wanted = [("input", stdin), ("output", stdout), ("error", stderr), ("tty", tty)]
    return [(name, "1") for name, on in wanted if on]


def forward_ports(query: Query) -> list[int]:
    ports = []
    for value in query.getall("ports", []):
        for part in value.split(","):
            part = part.strip()
            if not part.isdigit() or not 0 < int(part) < 65536:
                raise errors.BadRequest(f'ports: Invalid value: "{part}": must be an integer between 1 and 65535')
            ports.append(int(part))
    return ports


def connect_options(sub: str, query: Query) -> tuple[str, dict[str, Any]]:
    """The options of a pods/exec, attach or portforward request as admission sees them
    (PodExecOptions, PodAttachOptions, PodPortForwardOptions, with their defaults)."""
    if sub == "portforward":
        kind = "PodPortForwardOptions"
        fields: dict[str, Any] = {"ports": [int(p) for v in query.getall("ports", []) for p in v.split(",")
                                            if p.strip().isdigit()]}
    else:
        kind = "PodExecOptions" if sub == "exec" else "PodAttachOptions"
        fields = {"stdin": _bool(query, "stdin", False), "stdout": _bool(query, "stdout", True),
                  "stderr": _bool(query, "stderr", True), "tty": _bool(query, "tty", False),
                  "container": query.get("container", "")}
        if sub == "exec":
            fields["command"] = query.getall("command", [])
    return kind, {"kind": kind, "apiVersion": "v1", **fields}


def _check_running(pod: core_pb2.Pod, refusal: str) -> None:
    """A completed pod has nothing to stream to (the wording is kubectl's, which checks
    this itself before it asks)."""
    if pod.status.phase in ("Succeeded", "Failed"):
        raise errors.BadRequest(refusal.format(phase=pod.status.phase))


@dataclass
class PodStreams:
    locator: PodLocator

    async def exec_url(self, namespace: str, name: str, query: Query) -> str:
        command = query.getall("command", [])
        if not command or not command[0]:
            raise errors.BadRequest("command: Required value: you must specify at least one command for the "
                                    "container")
        params = stream_params(query) + [("command", part) for part in command]
        pod = await self.locator.pod(namespace, name)
        _check_running(pod, "cannot exec into a container in a completed pod; current phase is {phase}")
        return await self.locator.container_url("exec", pod, query.get("container", ""), params)

    async def attach_url(self, namespace: str, name: str, query: Query) -> str:
        params = stream_params(query)
        pod = await self.locator.pod(namespace, name)
        _check_running(pod, "cannot attach a container in a completed pod; current phase is {phase}")
        return await self.locator.container_url("attach", pod, query.get("container", ""), params)

    async def port_forward_url(self, namespace: str, name: str, query: Query) -> str:
        ports = forward_ports(query)
        pod = await self.locator.pod(namespace, name)
        _check_running(pod, "unable to forward port because pod is not running. Current status={phase}")
        return await self.locator.port_forward_url(pod, ports)
