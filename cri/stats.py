"""ContainerStats and PodSandboxStats from runc's cgroup (v1) figures, as containerd maps them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cri.fsusage import disk_usage
from protos.runtime.v1 import api_pb2

# cgroup v1 reports "no limit" as a huge page-aligned number.
UNLIMITED = 1 << 62


def _u64(value: int) -> api_pb2.UInt64Value:
    return api_pb2.UInt64Value(value=max(0, int(value)))


@dataclass
class CpuSampler:
    """usage_nano_cores needs two samples: keep the previous one per container."""

    last: dict[str, tuple[int, int]] = field(default_factory=dict)

    def usage(self, key: str, total_ns: int, now_ns: int) -> api_pb2.CpuUsage:
        cpu = api_pb2.CpuUsage(timestamp=now_ns, usage_core_nano_seconds=_u64(total_ns))
        previous = self.last.get(key)
        if previous is not None and now_ns > previous[0] and total_ns >= previous[1]:
            cpu.usage_nano_cores.value = (total_ns - previous[1]) * 1_000_000_000 // (now_ns - previous[0])
        self.last[key] = (now_ns, total_ns)
        return cpu

    def forget(self, key: str) -> None:
        self.last.pop(key, None)


def memory_usage(data: dict[str, Any], now_ns: int) -> api_pb2.MemoryUsage:
    memory = data.get("memory") or {}
    usage = int((memory.get("usage") or {}).get("usage", 0))
    limit = int((memory.get("usage") or {}).get("limit", 0))
    raw = memory.get("raw") or {}
    inactive = int(raw.get("total_inactive_file", raw.get("inactive_file", 0)))
    working_set = usage - inactive if usage > inactive else 0
    out = api_pb2.MemoryUsage(
        timestamp=now_ns, working_set_bytes=_u64(working_set), usage_bytes=_u64(usage),
        rss_bytes=_u64(int(raw.get("total_rss", raw.get("rss", 0)))),
        page_faults=_u64(int(raw.get("total_pgfault", raw.get("pgfault", 0)))),
        major_page_faults=_u64(int(raw.get("total_pgmajfault", raw.get("pgmajfault", 0)))))
    if 0 < limit < UNLIMITED:
        out.available_bytes.value = max(0, limit - working_set)
    return out


def directory_usage(path: Path, now_ns: int) -> api_pb2.FilesystemUsage:
    """Bytes and inodes under path (a container's writable layer)."""
    used, inodes = disk_usage(path)
    return api_pb2.FilesystemUsage(timestamp=now_ns, fs_id=api_pb2.FilesystemIdentifier(mountpoint=str(path)),
                                   used_bytes=_u64(used), inodes_used=_u64(inodes))


def network_usage(pid: int, now_ns: int) -> api_pb2.NetworkUsage:
    """Interface counters of the network namespace that pid is in (/proc/PID/net/dev)."""
    out = api_pb2.NetworkUsage(timestamp=now_ns)
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return out
    for line in lines:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if len(fields) < 16 or name.strip() == "lo":
            continue
        usage = api_pb2.NetworkInterfaceUsage(name=name.strip(), rx_bytes=_u64(int(fields[0])),
                                              rx_errors=_u64(int(fields[2])), tx_bytes=_u64(int(fields[8])),
                                              tx_errors=_u64(int(fields[10])))
        if usage.name == "eth0":
            out.default_interface.CopyFrom(usage)
        else:
            out.interfaces.append(usage)
    return out


def now() -> int:
    return time.time_ns()
