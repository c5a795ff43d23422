"""The OCI runtime spec (config.json) of a CRI container, as containerd's spec opts build it.

Inputs are the CRI ContainerConfig, the image's run config and what the sandbox
provides (namespace paths, its /etc files, its cgroup parent); the result is a
plain dict ready to be written for runc. Kubernetes' command semantics: the
container's command replaces the image's Entrypoint, its args replace the Cmd.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cri.seccomp import DEFAULT_PROFILE, SeccompError, seccomp_spec
from protos.runtime.v1 import api_pb2

OCI_VERSION = "1.0.2"

# containerd's default capability set for non-privileged containers.
DEFAULT_CAPABILITIES = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
    "CAP_AUDIT_WRITE",
]
ALL_CAPABILITIES = sorted({
    *DEFAULT_CAPABILITIES, "CAP_DAC_READ_SEARCH", "CAP_LINUX_IMMUTABLE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
    "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG",
    "CAP_LEASE", "CAP_AUDIT_CONTROL", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
})
# Capability numbers (linux/capability.h), for reading a bounding set.
_CAPABILITY_NUMBERS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
    "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
]


def current_capabilities(status: Path = Path("/proc/self/status")) -> list[str]:
    """The capabilities this process may hand on (its bounding set), as containerd's
    WithAllCurrentCapabilities: "all" means these (a VM may lack CAP_SYS_RESOURCE, say)."""
    for line in status.read_text().splitlines():
        if line.startswith("CapBnd:"):
            mask = int(line.split()[1], 16)
            return sorted(name for bit, name in enumerate(_CAPABILITY_NUMBERS) if mask >> bit & 1)
    return list(ALL_CAPABILITIES)


DEFAULT_MASKED_PATHS = [
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
]
DEFAULT_READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
PROPAGATION = {
    api_pb2.PROPAGATION_PRIVATE: "rprivate",
    api_pb2.PROPAGATION_HOST_TO_CONTAINER: "rslave",
    api_pb2.PROPAGATION_BIDIRECTIONAL: "rshared",
}


class SpecError(ValueError):
    """The container config cannot become a runnable spec; the message names the field."""


@dataclass(frozen=True)
class SandboxContext:
    """What a container takes from its sandbox."""

    hostname: str  # the pod's (the node's for host network): the containers' HOSTNAME
    pause_pid: int  # the sandbox's pause process: its ipc/uts (and pid, for POD mode) namespaces
    netns_path: str  # "" for host network
    etc_dir: Path  # holds the sandbox's hosts, resolv.conf, hostname
    shm_path: str = ""  # the sandbox's /dev/shm, shared by its containers ("" for a private one)
    cgroup_parent: str = "/kubeling"
    host_ipc: bool = False
    host_pid: bool = False
    target_pid: int = 0  # namespace_options.pid TARGET: the target container's process
    sysctls: tuple[tuple[str, str], ...] = ()
    seccomp_default: Path = DEFAULT_PROFILE  # the RuntimeDefault profile


def _command(config: api_pb2.ContainerConfig, image: dict[str, Any]) -> list[str]:
    entrypoint = list(image.get("Entrypoint") or [])
    cmd = list(image.get("Cmd") or [])
    if config.command:
        args = [*config.command, *config.args]
    else:
        args = [*entrypoint, *(config.args or cmd)]
    if not args:
        raise SpecError("config.command: no command specified and the image has neither Entrypoint nor Cmd")
    return args


def _env(config: api_pb2.ContainerConfig, image: dict[str, Any], hostname: str) -> list[str]:
    merged: dict[str, str] = {}
    for item in image.get("Env") or []:
        key, _, value = str(item).partition("=")
        merged[key] = value
    if hostname:
        merged["HOSTNAME"] = hostname  # as containerd: after the image's, before the config's own
    for kv in config.envs:
        if not kv.key:
            raise SpecError("config.envs: an environment variable has an empty name")
        merged[kv.key] = kv.value
    return [f"{k}={v}" for k, v in merged.items()]


def _lookup(rootfs: Path, name: str, database: str) -> tuple[int, int] | None:
    """(id, gid-or-0) for a name in the container's /etc/passwd or /etc/group."""
    try:
        lines = (rootfs / "etc" / database).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name:
            try:
                return int(fields[2]), int(fields[3]) if database == "passwd" and len(fields) > 3 else 0
            except ValueError:
                return None
    return None


def _user(config: api_pb2.ContainerConfig, image: dict[str, Any], rootfs: Path) -> dict[str, Any]:
    security = config.linux.security_context
    if security.HasField("run_as_group") and not security.HasField("run_as_user") and not security.run_as_username:
        raise SpecError("config.linux.security_context.run_as_group: a group needs a user: "
                        "set run_as_user or run_as_username too")
    if security.HasField("run_as_user"):
        uid = security.run_as_user.value
        found = _by_uid(rootfs, uid)
        gid = found if found is not None else 0
    elif security.run_as_username:
        match = _lookup(rootfs, security.run_as_username, "passwd")
        if match is None:
            raise SpecError(f"config.linux.security_context.run_as_username: user "
                            f"{security.run_as_username!r} is not in the image's /etc/passwd")
        uid, gid = match
    else:
        uid, gid = _image_user(str(image.get("User") or ""), rootfs)
    if security.HasField("run_as_group"):
        gid = security.run_as_group.value
    # As containerd: the primary group, the groups the image's /etc/group puts the user in
    # (unless the policy is Strict), then the pod's supplemental groups.
    groups = [gid]
    if security.supplemental_groups_policy != api_pb2.Strict:
        groups += _image_groups(rootfs, uid)
    groups += list(security.supplemental_groups)
    return {"uid": uid, "gid": gid, "additionalGids": list(dict.fromkeys(groups))}


def _image_groups(rootfs: Path, uid: int) -> list[int]:
    """Groups whose member list in the image's /etc/group names the user with this uid."""
    names = {fields[0] for fields in _entries(rootfs, "passwd") if len(fields) > 2 and fields[2] == str(uid)}
    out = []
    for fields in _entries(rootfs, "group"):
        if len(fields) > 3 and names & set(fields[3].split(",")) and fields[2].isdigit():
            out.append(int(fields[2]))
    return out


def _entries(rootfs: Path, database: str) -> list[list[str]]:
    try:
        return [line.split(":") for line in (rootfs / "etc" / database).read_text().splitlines()]
    except OSError:
        return []


def _by_uid(rootfs: Path, uid: int) -> int | None:
    try:
        for line in (rootfs / "etc" / "passwd").read_text().splitlines():
            fields = line.split(":")
            if len(fields) > 3 and fields[2] == str(uid):
                return int(fields[3])
    except (OSError, ValueError):
        pass
    return None


def _image_user(spec: str, rootfs: Path) -> tuple[int, int]:
    """The image's User: uid, name, uid:gid or name:group."""
    if not spec:
        return 0, 0
    user, _, group = spec.partition(":")
    if user.isdigit():
        uid = int(user)
        gid = _by_uid(rootfs, uid) or 0
    else:
        match = _lookup(rootfs, user, "passwd")
        if match is None:
            raise SpecError(f"image user {user!r} is not in the image's /etc/passwd")
        uid, gid = match
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            found = _lookup(rootfs, group, "group")
            if found is None:
                raise SpecError(f"image group {group!r} is not in the image's /etc/group")
            gid = found[0]
    return uid, gid


def mount_propagation(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """How the mount holding path propagates: "shared", "slave" or "private"."""
    best, fields = "", [""]
    for line in mountinfo.read_text().splitlines():
        parts = line.split(" - ")[0].split()
        point = parts[4].replace("\\040", " ")
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fields = point, parts[6:]
    if any(f.startswith("shared:") for f in fields):
        return "shared"
    return "slave" if any(f.startswith("master:") for f in fields) else "private"


def _rootfs_propagation(config: api_pb2.ContainerConfig, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """As containerd: a Bidirectional mount needs a shared source and an rshared root (so its
    mounts reach the host); HostToContainer a shared or slave source and at least rslave."""
    wanted = ""
    for index, mount in enumerate(config.mounts):
        if mount.propagation == api_pb2.PROPAGATION_PRIVATE:
            continue
        source = Path(mount.host_path).resolve()
        actual = mount_propagation(source, mountinfo)
        field = f"config.mounts[{index}].propagation"
        if mount.propagation == api_pb2.PROPAGATION_BIDIRECTIONAL:
            if actual != "shared":
                raise SpecError(f"{field}: Bidirectional needs {source} on a shared mount; it is {actual}")
            wanted = "rshared"
        elif actual == "private":
            raise SpecError(f"{field}: HostToContainer needs {source} on a shared or slave mount; it is private")
        elif not wanted:
            wanted = "rslave"
    return wanted


def _mounts(config: api_pb2.ContainerConfig, sandbox: SandboxContext, readonly_rootfs: bool) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
    ]
    if sandbox.shm_path:
        mounts.append({"destination": "/dev/shm", "type": "bind", "source": sandbox.shm_path,
                       "options": ["rbind", "rprivate", "rw"]})
    else:
        mounts.append({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                       "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]})
    wanted = {m.container_path for m in config.mounts}
    # The sandbox's /etc files, unless the container mounts its own (as the kubelet does for /etc/hosts).
    for name in ("hosts", "resolv.conf", "hostname"):
        target = f"/etc/{name}"
        source = sandbox.etc_dir / name
        if target not in wanted and source.exists():
            mode = "ro" if readonly_rootfs else "rw"
            mounts.append({"destination": target, "type": "bind", "source": str(source),
                           "options": ["rbind", "rprivate", mode]})
    for index, mount in enumerate(config.mounts):
        field = f"config.mounts[{index}]"
        if not mount.container_path.startswith("/"):
            raise SpecError(f"{field}.container_path must be absolute, got {mount.container_path!r}")
        if mount.HasField("image"):
            raise SpecError(f"{field}.image: image volumes are not supported")
        if not mount.host_path:
            raise SpecError(f"{field}.host_path is required")
        source = Path(mount.host_path).resolve()  # follow symlinks, as the CRI asks
        if not source.exists():
            raise SpecError(f"{field}.host_path {mount.host_path!r} does not exist")
        options = ["rbind", PROPAGATION.get(mount.propagation, "rprivate"), "ro" if mount.readonly else "rw"]
        mounts.append({"destination": mount.container_path, "type": "bind", "source": str(source),
                       "options": options})
    return mounts


def resources_spec(resources: api_pb2.LinuxContainerResources) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": [{"allow": False, "access": "rwm"}]}
    cpu: dict[str, Any] = {}
    if resources.cpu_shares:
        cpu["shares"] = resources.cpu_shares
    if resources.cpu_quota:
        cpu["quota"] = resources.cpu_quota
    if resources.cpu_period:
        cpu["period"] = resources.cpu_period
    if resources.cpuset_cpus:
        cpu["cpus"] = resources.cpuset_cpus
    if resources.cpuset_mems:
        cpu["mems"] = resources.cpuset_mems
    if cpu:
        out["cpu"] = cpu
    if resources.memory_limit_in_bytes:
        if resources.memory_limit_in_bytes < 0:
            raise SpecError("config.linux.resources.memory_limit_in_bytes must not be negative")
        memory: dict[str, Any] = {"limit": resources.memory_limit_in_bytes}
        if resources.memory_swap_limit_in_bytes:
            memory["swap"] = resources.memory_swap_limit_in_bytes
        out["memory"] = memory
    if resources.hugepage_limits:
        out["hugepageLimits"] = [{"pageSize": h.page_size, "limit": h.limit} for h in resources.hugepage_limits]
    return out


def container_spec(container_id: str, config: api_pb2.ContainerConfig, image: dict[str, Any],
                   rootfs: Path, sandbox: SandboxContext) -> dict[str, Any]:
    """The config.json for one container of a sandbox."""
    security = config.linux.security_context
    privileged = security.privileged
    current = current_capabilities()
    if privileged:
        capabilities = current
    else:
        add = {f"CAP_{c.upper().removeprefix('CAP_')}" for c in security.capabilities.add_capabilities}
        drop = {f"CAP_{c.upper().removeprefix('CAP_')}" for c in security.capabilities.drop_capabilities}
        if "CAP_ALL" in add:
            add = set(current)
        capabilities = sorted((set(DEFAULT_CAPABILITIES) | add) - ({*ALL_CAPABILITIES} if "CAP_ALL" in drop else drop))
    process: dict[str, Any] = {
        "terminal": config.tty,
        "user": _user(config, image, rootfs),
        "args": _command(config, image),
        "env": _env(config, image, sandbox.hostname),
        "cwd": config.working_dir or str(image.get("WorkingDir") or "/"),
        "capabilities": {key: capabilities for key in ("bounding", "effective", "permitted")},
        "noNewPrivileges": security.no_new_privs,
    }
    if config.linux.resources.oom_score_adj:
        process["oomScoreAdj"] = config.linux.resources.oom_score_adj
    if not process["cwd"].startswith("/"):
        raise SpecError(f"config.working_dir must be absolute, got {process['cwd']!r}")

    pid_mode = security.namespace_options.pid
    namespaces: list[dict[str, Any]] = [{"type": "mount"}]
    if sandbox.host_pid or pid_mode == api_pb2.NODE:
        pass  # the host's pid namespace: no entry
    elif pid_mode == api_pb2.POD:
        namespaces.append({"type": "pid", "path": f"/proc/{sandbox.pause_pid}/ns/pid"})
    elif pid_mode == api_pb2.TARGET:
        if not sandbox.target_pid:
            raise SpecError("config.linux.security_context.namespace_options.target_id: no running container")
        namespaces.append({"type": "pid", "path": f"/proc/{sandbox.target_pid}/ns/pid"})
    else:
        namespaces.append({"type": "pid"})
    if not sandbox.host_ipc:
        namespaces.append({"type": "ipc", "path": f"/proc/{sandbox.pause_pid}/ns/ipc"})
    if sandbox.netns_path:
        namespaces.append({"type": "uts", "path": f"/proc/{sandbox.pause_pid}/ns/uts"})
        namespaces.append({"type": "network", "path": sandbox.netns_path})
    # else host network: the host's network and UTS namespaces, as the kubelet does.

    linux: dict[str, Any] = {
        "namespaces": namespaces,
        "resources": resources_spec(config.linux.resources),
        "cgroupsPath": f"{sandbox.cgroup_parent.rstrip('/')}/{container_id}",
        "sysctl": dict(sandbox.sysctls),
    }
    if not privileged:
        linux["maskedPaths"] = list(security.masked_paths) or DEFAULT_MASKED_PATHS
        linux["readonlyPaths"] = list(security.readonly_paths) or DEFAULT_READONLY_PATHS
    try:
        seccomp = seccomp_spec(security, capabilities, sandbox.seccomp_default)
    except SeccompError as exc:
        raise SpecError(str(exc)) from None
    if seccomp is not None:
        linux["seccomp"] = seccomp
    propagation = _rootfs_propagation(config)
    if propagation:
        linux["rootfsPropagation"] = propagation
    return {
        "ociVersion": OCI_VERSION,
        "process": process,
        "root": {"path": str(rootfs), "readonly": security.readonly_rootfs},
        # No "hostname": the container joins the pause's UTS namespace, whose name the
        # pause set (a second sethostname would only repeat it, or fail for long names).
        "mounts": _mounts(config, sandbox, security.readonly_rootfs),
        "annotations": {"io.kubernetes.cri.container-type": "container",
                        "io.kubernetes.cri.container-name": config.metadata.name},
        "linux": linux,
    }


def pause_spec(sandbox_id: str, config: api_pb2.PodSandboxConfig, image: dict[str, Any], rootfs: Path,
               netns_path: str) -> dict[str, Any]:
    """The config.json of a sandbox's pause container: it creates (or, for NODE modes,
    skips) the namespaces the pod's containers then join through its pid."""
    options = config.linux.security_context.namespace_options
    args = [*(image.get("Entrypoint") or []), *(image.get("Cmd") or [])]
    if not args:
        raise SpecError("the sandbox image has neither Entrypoint nor Cmd")
    namespaces: list[dict[str, Any]] = [{"type": "mount"}]
    if options.pid != api_pb2.NODE:
        namespaces.append({"type": "pid"})
    if options.ipc != api_pb2.NODE:
        namespaces.append({"type": "ipc"})
    if netns_path:
        namespaces += [{"type": "uts"}, {"type": "network", "path": netns_path}]
    parent = config.linux.cgroup_parent.rstrip("/")
    spec: dict[str, Any] = {
        "ociVersion": OCI_VERSION,
        "process": {
            "terminal": False, "user": {"uid": 0, "gid": 0}, "args": args, "cwd": "/",
            "env": [str(e) for e in image.get("Env") or []],
            "capabilities": {key: list(DEFAULT_CAPABILITIES) for key in ("bounding", "effective", "permitted")},
            "noNewPrivileges": True,
        },
        "root": {"path": str(rootfs), "readonly": True},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "annotations": {"io.kubernetes.cri.container-type": "sandbox",
                        "io.kubernetes.cri.sandbox-name": config.metadata.name,
                        "io.kubernetes.cri.sandbox-namespace": config.metadata.namespace,
                        "io.kubernetes.cri.sandbox-uid": config.metadata.uid},
        "linux": {"namespaces": namespaces, "cgroupsPath": f"{parent}/{sandbox_id}",
                  "resources": {"devices": [{"allow": False, "access": "rwm"}]},
                  "sysctl": dict(config.linux.sysctls),
                  "maskedPaths": DEFAULT_MASKED_PATHS, "readonlyPaths": DEFAULT_READONLY_PATHS},
    }
    if netns_path:
        spec["hostname"] = sandbox_hostname(config)
    return spec


def sandbox_hostname(config: api_pb2.PodSandboxConfig) -> str:
    """The pod's hostname: the config's, or the node's when it names none (as containerd)."""
    return config.hostname or os.uname().nodename
