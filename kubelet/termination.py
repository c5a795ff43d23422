"""Termination messages (kuberuntime_container.go: makeMounts' message file,
getTerminationMessage, readLastStringFromContainerLogs; the status manager's limit).

Each container instance gets an empty file of its own under the pod's directory,
bind-mounted at its `terminationMessagePath` and writable by any user (the container
may run as one). When the container has exited, the kubelet reads at most 4 KiB of it
into `state.terminated.message`; with `terminationMessagePolicy: FallbackToLogsOnError`,
a container that failed and wrote nothing there gets the last 80 lines of its log
(at most 2 KiB) instead. All of a pod's messages together stay within 12 KiB.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cri.logs import format_entries
from kubelet import labels
from protos.kubeling.v1 import core_pb2
from protos.runtime.v1 import api_pb2

__all__ = ["message_file", "termination_message", "limit_messages", "FALLBACK_TO_LOGS"]

FALLBACK_TO_LOGS = "FallbackToLogsOnError"
MAX_MESSAGE = 4 * 1024
MAX_LOG_BYTES = 2 * 1024
MAX_LOG_LINES = 80
MAX_POD_MESSAGES = 12 * 1024
_LOG_WINDOW = 256 * 1024  # how much of a log's end is read to find its last lines


def message_file(container_dir: Path) -> Path:
    """A new empty message file for one container instance (`container_dir`: the pod's
    containers/<name>), writable by every user as upstream's (mode 0666)."""
    container_dir.mkdir(parents=True, exist_ok=True)
    path = container_dir / secrets.token_hex(4)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o666)
    os.close(fd)
    os.chmod(path, 0o666)  # past the umask
    return path


def termination_message(status: api_pb2.ContainerStatus) -> str:
    """The message an exited container left (its file, or its log's end), "" when none."""
    path = status.annotations.get(labels.TERMINATION_MESSAGE_PATH, "")
    fallback = (status.annotations.get(labels.TERMINATION_MESSAGE_POLICY) == FALLBACK_TO_LOGS
                and status.exit_code != 0 and status.reason != "ContainerCannotRun")
    text = ""
    if path:
        for mount in status.mounts:
            if mount.container_path == path:
                try:
                    with open(mount.host_path, "rb") as handle:
                        text = handle.read(MAX_MESSAGE).decode(errors="replace")
                except OSError:
                    text = ""
                break
    if not text and fallback and status.log_path:
        text = _log_tail(Path(status.log_path))
    return text


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _LOG_WINDOW))
            raw = handle.read()
    except OSError:
        return ""
    first = raw.find(b"\n") + 1 if size > _LOG_WINDOW else 0  # the window's first line may be cut
    lines = format_entries(raw[first:], False)
    return b"".join(lines[-MAX_LOG_LINES:])[:MAX_LOG_BYTES].decode(errors="replace")


def limit_messages(pod_spec: core_pb2.PodSpec, status: core_pb2.PodStatus) -> None:
    """Cut each terminated message to its share of the pod's 12 KiB (the status
    manager's normalizeStatus)."""
    count = len(pod_spec.containers) + len(pod_spec.initContainers) + len(pod_spec.ephemeralContainers)
    share = MAX_POD_MESSAGES // count if count else MAX_POD_MESSAGES
    for statuses in (status.containerStatuses, status.initContainerStatuses, status.ephemeralContainerStatuses):
        for cs in statuses:
            for state in (cs.state, cs.lastState):
                if state.HasField("terminated") and len(state.terminated.message) > share:
                    state.terminated.message = state.terminated.message[:share]
