"""Running plugin binaries: find by `type` in CNI_PATH, env + stdin per the spec, a timeout,
and plugin errors turned into a typed exception (libcni's invoke package)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kubeling.telemetry import tracer

__all__ = ["PluginError", "Executor", "RawExecutor", "find_plugin"]

_TRACER = tracer(__name__)


class PluginError(Exception):
    """A plugin failed: which plugin, which command, its error code and message."""

    def __init__(self, plugin: str, command: str, msg: str, code: int = 999, details: str = "") -> None:
        self.plugin, self.command, self.code, self.msg, self.details = plugin, command, code, msg, details
        text = f"plugin {plugin} failed ({command}): {msg}"
        if details:
            text += f": {details}"
        super().__init__(text)


def find_plugin(plugin_type: str, path: Sequence[str]) -> str:
    if not plugin_type or "/" in plugin_type:
        raise PluginError(plugin_type or "?", "", f"invalid plugin type {plugin_type!r}", code=7)
    for d in path:
        candidate = Path(d) / plugin_type
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise PluginError(plugin_type, "", f"failed to find plugin {plugin_type!r} in path {list(path)}", code=7)


class Executor(Protocol):
    """How plugins are run; tests may swap it (libcni's Exec interface)."""

    async def run(self, plugin_path: str, env: Mapping[str, str], stdin: bytes,
                  timeout: float) -> tuple[int, bytes, bytes]: ...


@dataclass
class RawExecutor:
    """Runs the binary as a child process."""

    async def run(self, plugin_path: str, env: Mapping[str, str], stdin: bytes,
                  timeout: float) -> tuple[int, bytes, bytes]:
        proc = await asyncio.create_subprocess_exec(
            plugin_path, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=dict(env))
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(stdin)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        finally:
            await _stdin_closed(proc)
        return proc.returncode or 0, out, err


async def _stdin_closed(proc: asyncio.subprocess.Process) -> None:
    """A plugin that exits without reading all its config leaves a BrokenPipeError in
    stdin's close waiter, which Python 3.11 then logs as never retrieved: retrieve it."""
    if proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await proc.stdin.wait_closed()


async def execute(executor: Executor, plugin_type: str, path: Sequence[str], command: str,
                  env: Mapping[str, str], stdin: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """One plugin call; the parsed stdout (None when empty), or PluginError."""
    with _TRACER.start_as_current_span(f"cni {command} {plugin_type}", attributes={
            "cni.plugin.type": plugin_type, "cni.command": command,
            "cni.container_id": env.get("CNI_CONTAINERID", ""), "cni.ifname": env.get("CNI_IFNAME", "")}) as span:
        result = await _execute(executor, plugin_type, path, command, env, stdin, timeout)
        if result and result.get("ips"):
            span.set_attribute("cni.result.ips", [str(ip.get("address", "")) for ip in result["ips"]])
        return result


async def _execute(executor: Executor, plugin_type: str, path: Sequence[str], command: str,
                   env: Mapping[str, str], stdin: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    binary = find_plugin(plugin_type, path)
    full_env = {**os.environ, **env, "CNI_COMMAND": command, "CNI_PATH": os.pathsep.join(path)}
    try:
        code, out, err = await executor.run(binary, full_env, json.dumps(stdin).encode(), timeout)
    except TimeoutError:
        raise PluginError(plugin_type, command, f"timed out after {timeout:g}s", code=11) from None
    except OSError as e:
        raise PluginError(plugin_type, command, f"cannot run {binary}: {e}", code=7) from None
    text = out.decode(errors="replace").strip()
    if code != 0:
        try:
            data = json.loads(text)
            raise PluginError(plugin_type, command, str(data.get("msg") or "unknown error"),
                              int(data.get("code", 999)), str(data.get("details", "")))
        except (json.JSONDecodeError, AttributeError, ValueError, TypeError):
            raise PluginError(plugin_type, command,
                              (err.decode(errors="replace").strip() or text or f"exit status {code}")[:2000]) from None
    if not text:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise PluginError(plugin_type, command, f"printed invalid JSON: {text[:200]!r}") from None
    return data if isinstance(data, dict) else None
