"""Where the CPU goes while a benchmark runs: per long-lived process, per short-lived
program, and the machine as a whole.

- Long-lived processes (the apiserver, the scheduler, the kubelet with its CRI server,
  etcd, the shims): their own user + system time from /proc/<pid>/stat, read at the start
  and the end of the window; and, separately, the time of the children they waited for
  (the kubelet's: runc, the CNI plugins and the iptables those run).
- Which programs ran, how often: the kernel's process accounting (acct(2), BSD v3
  records), switched on for the window and off after, counted by command name. (Its CPU
  figures are in 10 ms ticks: a runc or plugin call of a few ms reads 0, so CPU comes
  from the waiting parents above.) Accounting is a machine-wide switch: it is turned off
  at the end even if something else had it on (a benchmark for our own machines).
- The machine: busy time from /proc/stat (everything but idle and iowait); what none of
  the above explains is the kernel's own work (softirqs, the network stack, ...) and
  whatever else ran.
"""

from __future__ import annotations

import ctypes
import os
import struct
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ExecAccounting", "machine_busy_seconds", "process_seconds", "pids_matching"]

_TICK = os.sysconf("SC_CLK_TCK")
_AHZ = 100  # acct(5): v3 records count in units of AHZ
_RECORD = struct.Struct("=BBHIIIIIIf8H16s")  # struct acct_v3, 64 bytes
CNI_PLUGINS = frozenset({"bridge", "host-local", "loopback", "portmap", "firewall", "tuning", "bandwidth",
                         "ptp", "macvlan", "ipvlan", "dhcp", "static", "sbr", "vrf", "host-device", "vlan"})


def process_seconds(pid: int, *, children: bool = False) -> float:
    """A process's own CPU seconds (user + system), or with `children` those of the
    children it waited for (cutime + cstime); 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    first = 13 if children else 11  # cutime, cstime / utime, stime
    return (int(fields[first]) + int(fields[first + 1])) / _TICK


def machine_busy_seconds() -> float:
    """CPU seconds every core spent busy since boot (all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _TICK  # user..steal, minus idle, iowait


def pids_matching(fragment: str) -> list[int]:
    """Processes whose command line contains `fragment`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if fragment in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def _comp(value: int) -> int:
    """comp_t: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


@dataclass
class ExecAccounting:
    """Process accounting for a window: `exits` counts, per command name, the processes
    that ended inside it."""

    by_command: dict[str, float] = field(default_factory=dict)  # in 10 ms ticks: coarse
    exits: Counter[str] = field(default_factory=Counter)
    _file: Path | None = None

    def __enter__(self) -> ExecAccounting:
        fd, name = tempfile.mkstemp(prefix="kubeling-acct-")
        os.close(fd)
        self._file = Path(name)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.acct(str(self._file).encode()) != 0:
            self._file.unlink()
            self._file = None
            raise OSError(ctypes.get_errno(), "acct(2): process accounting is not available")
        return self

    def __exit__(self, *exc: object) -> None:
        ctypes.CDLL(None, use_errno=True).acct(None)
        if self._file is None:
            return
        data = self._file.read_bytes()
        self._file.unlink()
        for offset in range(0, len(data) - _RECORD.size + 1, _RECORD.size):
            record = _RECORD.unpack_from(data, offset)
            version, comm = record[1] & 0x0F, record[-1].split(b"\0", 1)[0].decode(errors="replace")
            if version != 3:
                continue
            utime, stime = _comp(record[10]), _comp(record[11])
            self.by_command[comm] = self.by_command.get(comm, 0.0) + (utime + stime) / _AHZ
            self.exits[comm] += 1

    def grouped_exits(self) -> dict[str, int]:
        """Processes that ended: runc, the CNI plugins, iptables (with xtables helpers), python
        interpreters, the rest."""
        out: Counter[str] = Counter()
        for comm, count in self.exits.items():
            if comm == "runc" or comm.startswith("runc:"):
                out["runc"] += count
            elif comm in CNI_PLUGINS:
                out["cni_plugins"] += count
            elif comm.startswith(("iptables", "ip6tables", "xtables")):
                out["iptables"] += count
            elif comm.startswith("python"):
                out["python"] += count
            else:
                out["other"] += count
        return dict(out)
