"""From the API's Pod to the CRI's configs: the sandbox config (kuberuntime_sandbox.go's
generatePodSandboxConfig) and each container's config (kuberuntime_container.go's
generateContainerConfig), with the labels that let the kubelet find them again."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubelet import labels
from kubelet.etchosts import HostnameError, pod_hostname_and_domain, write_hosts_file
from kubelet.node import machine_capacity
from kubelet.qos import oom_score_adj
from kubelet.resourcefield import ResourceFieldError, resource_field_value
from kubelet.termination import message_file
from kubeling import names
from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod
from protos.runtime.v1 import api_pb2

__all__ = ["PodPaths", "sandbox_config", "container_config", "container_hash", "pod_log_dir", "ConfigError",
           "container_resources",
           "grace_period", "API_VOLUMES", "EMPTY_DIR", "needs_env_sources", "ephemeral_as_container"]

# CRI's cpu shares as the kubelet computes them (MilliCPUToShares): min 2, 1024 per core.
_MIN_SHARES = 2
_QUOTA_PERIOD = 100_000  # µs, the CFS default
ETC_HOSTS = "/etc/hosts"
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
EMPTY_DIR = "kubernetes.io~empty-dir"  # emptyDirs' plugin directory, as upstream's
# The volumes whose files the kubelet writes from the API (kubelet.volumes), by plugin directory.
API_VOLUMES = {"projected": "kubernetes.io~projected", "configMap": "kubernetes.io~configmap",
                "secret": "kubernetes.io~secret", "downwardAPI": "kubernetes.io~downward-api"}


class ConfigError(ValueError):
    """The pod cannot be turned into a runtime config (CreateContainerConfigError)."""


@dataclass(frozen=True)
class PodPaths:
    """Where a node keeps pods' files."""

    logs_dir: Path  # /var/log/pods
    pods_dir: Path  # <state>/pods: volumes
    # The node's directories that are the machine's others (a node's path -> the machine's;
    # `--host-path-mounts`, kind's extraMounts): where a hostPath volume's path really is.
    host_path_mounts: Mapping[str, str] = field(default_factory=dict)

    def host_path(self, path: str) -> str:
        """A hostPath volume's path on the machine: under the longest mount that holds it."""
        for inside in sorted(self.host_path_mounts, key=len, reverse=True):
            if path == inside or path.startswith(inside.rstrip("/") + "/"):
                return self.host_path_mounts[inside] + path[len(inside.rstrip("/")):]
        return path

    def log_dir(self, pod: Pod) -> Path:
        return pod_log_dir(self.logs_dir, pod)

    def volume_dir(self, pod: Pod, plugin: str, name: str) -> Path:
        return self.pods_dir / pod.metadata.uid / "volumes" / plugin / name

    def hosts_file(self, pod: Pod) -> Path:
        """The kubelet-managed /etc/hosts of the pod's containers."""
        return self.pods_dir / pod.metadata.uid / "etc-hosts"

    def container_dir(self, pod: Pod, name: str) -> Path:
        """Where a container's termination message files are (upstream's podDir/containers/<name>)."""
        return self.pods_dir / pod.metadata.uid / "containers" / name

    @property
    def seccomp_dir(self) -> Path:
        """Localhost seccomp profiles are named relative to it (the kubelet's <root>/seccomp)."""
        return self.pods_dir.parent / "seccomp"


def pod_log_dir(root: Path, pod: Pod) -> Path:
    m = pod.metadata
    return root / f"{m.namespace}_{m.name}_{m.uid}"


def grace_period(pod: Pod) -> int:
    """Seconds the pod's containers get between the stop signal and SIGKILL."""
    if pod.metadata.HasField("deletionGracePeriodSeconds"):
        return max(0, pod.metadata.deletionGracePeriodSeconds)
    if pod.spec.HasField("terminationGracePeriodSeconds"):
        return max(0, pod.spec.terminationGracePeriodSeconds)
    return 30


def _pod_labels(pod: Pod) -> dict[str, str]:
    return {labels.POD_NAME: pod.metadata.name, labels.POD_NAMESPACE: pod.metadata.namespace,
            labels.POD_UID: pod.metadata.uid}


def _namespaces(pod: Pod, target_id: str = "") -> api_pb2.NamespaceOption:
    """The pod's network and IPC are shared (or the node's); each container has its own
    PID namespace, so its command is PID 1 there, as upstream — unless the pod shares
    one (shareProcessNamespace), uses the node's (hostPID), or the container targets
    another container's (kubectl debug --target)."""
    pid = api_pb2.NODE if pod.spec.hostPID else api_pb2.POD if pod.spec.shareProcessNamespace else \
        api_pb2.TARGET if target_id else api_pb2.CONTAINER
    return api_pb2.NamespaceOption(network=api_pb2.NODE if pod.spec.hostNetwork else api_pb2.POD, pid=pid,
                                   ipc=api_pb2.NODE if pod.spec.hostIPC else api_pb2.POD,
                                   target_id=target_id if pid == api_pb2.TARGET else "")


def sandbox_config(pod: Pod, paths: PodPaths, attempt: int, cgroup_parent: str = "",
                   dns: api_pb2.DNSConfig | None = None) -> api_pb2.PodSandboxConfig:
    """ConfigError when the pod's hostname or subdomain cannot be used."""
    hostname = ""  # host network: the node's own name, which the runtime uses for an empty one
    if not pod.spec.hostNetwork:
        try:
            hostname, _ = pod_hostname_and_domain(pod, "")
        except HostnameError as exc:
            raise ConfigError(str(exc)) from None
    ports = []
    for container in pod.spec.containers:
        for port in container.ports:
            if port.hostPort:
                ports.append(api_pb2.PortMapping(
                    protocol=port.protocol or "TCP", container_port=port.containerPort,
                    host_port=port.hostPort, host_ip=port.hostIP))
    return api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(name=pod.metadata.name, namespace=pod.metadata.namespace,
                                            uid=pod.metadata.uid, attempt=attempt),
        hostname=hostname, log_directory=str(paths.log_dir(pod)), dns_config=dns,
        port_mappings=ports, labels={**pod.metadata.labels, **_pod_labels(pod)},
        annotations=dict(pod.metadata.annotations),
        linux=api_pb2.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent, sysctls={s.name: s.value for s in pod.spec.securityContext.sysctls},
            security_context=api_pb2.LinuxSandboxSecurityContext(namespace_options=_namespaces(pod))))


def container_hash(container: core_pb2.Container) -> str:
    """Changes when the container's spec does: a running container with another hash is
    replaced. Its resources are left out: they change in place (pods/resize), as upstream's
    hash without resources."""
    hashed = core_pb2.Container()
    hashed.CopyFrom(container)
    hashed.ClearField("resources")
    return hashlib.sha256(hashed.SerializeToString(deterministic=True)).hexdigest()[:16]


def _field_ref(pod: Pod, path: str, pod_ip: str, host_ip: str) -> str:
    m = pod.metadata
    simple = {"metadata.name": m.name, "metadata.namespace": m.namespace, "metadata.uid": m.uid,
              "spec.nodeName": pod.spec.nodeName, "spec.serviceAccountName": pod.spec.serviceAccountName,
              "status.podIP": pod_ip, "status.podIPs": pod_ip, "status.hostIP": host_ip, "status.hostIPs": host_ip}
    if path in simple:
        return simple[path]
    for prefix, mapping in (("metadata.labels", m.labels), ("metadata.annotations", m.annotations)):
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str(mapping.get(path[len(prefix) + 2:-2], ""))
    raise ConfigError(f"unsupported fieldRef.fieldPath {path!r}")


_SECCOMP = {"RuntimeDefault": api_pb2.SecurityProfile.RuntimeDefault,
            "Unconfined": api_pb2.SecurityProfile.Unconfined, "Localhost": api_pb2.SecurityProfile.Localhost}


def _security_context(pod: Pod, container: core_pb2.Container, target_id: str,
                      paths: PodPaths) -> api_pb2.LinuxContainerSecurityContext:
    """The container's security settings, its own over the pod's (upstream's
    determineEffectiveSecurityContext and convertToRuntimeSecurityContext): user and
    groups (the pod's fsGroup among the supplemental groups), capabilities, privileged,
    no_new_privs from allowPrivilegeEscalation: false, the seccomp profile (none set:
    Unconfined, as the kubelet's default seccompDefault: false)."""
    own, pod_sc = container.securityContext, pod.spec.securityContext
    out = api_pb2.LinuxContainerSecurityContext(namespace_options=_namespaces(pod, target_id),
                                                readonly_rootfs=own.readOnlyRootFilesystem,
                                                privileged=own.privileged)
    user = own.runAsUser if own.HasField("runAsUser") else pod_sc.runAsUser if pod_sc.HasField("runAsUser") else None
    group = own.runAsGroup if own.HasField("runAsGroup") else \
        pod_sc.runAsGroup if pod_sc.HasField("runAsGroup") else None
    non_root = own.runAsNonRoot if own.HasField("runAsNonRoot") else pod_sc.runAsNonRoot
    if user is not None:
        out.run_as_user.value = user
    if group is not None:
        out.run_as_group.value = group
    if non_root and user == 0:
        m = pod.metadata
        raise ConfigError(f"container's runAsUser breaks non-root policy (pod: \"{m.name}_{m.namespace}({m.uid})\", "
                          f"container: {container.name})")
    groups = list(pod_sc.supplementalGroups)
    if pod_sc.HasField("fsGroup"):
        groups.append(pod_sc.fsGroup)
    out.supplemental_groups.extend(dict.fromkeys(groups))
    out.capabilities.add_capabilities.extend(own.capabilities.add)
    out.capabilities.drop_capabilities.extend(own.capabilities.drop)
    out.no_new_privs = own.HasField("allowPrivilegeEscalation") and not own.allowPrivilegeEscalation
    profile = own.seccompProfile if own.HasField("seccompProfile") else \
        pod_sc.seccompProfile if pod_sc.HasField("seccompProfile") else None
    if profile is not None and profile.type in _SECCOMP:
        out.seccomp.profile_type = _SECCOMP[profile.type]
        if profile.type == "Localhost":
            out.seccomp.localhost_ref = str(paths.seccomp_dir / profile.localhostProfile)
    return out


def container_resources(pod: Pod, container: core_pb2.Container) -> api_pb2.LinuxContainerResources:
    """The container's cpu and memory settings for the runtime, as a resize compares and
    applies them (the OOM score adjustment is left out: it is fixed at creation)."""
    return _resources(pod, container, None)


def _resources(pod: Pod, container: core_pb2.Container, oom_floor: int | None) -> api_pb2.LinuxContainerResources:
    """`oom_floor` None: no OOM score adjustment (spares reading the machine's memory)."""
    res = api_pb2.LinuxContainerResources()
    if oom_floor is not None:
        res.oom_score_adj = oom_score_adj(pod, container, parse_quantity(machine_capacity(0)["memory"]).int_value(),
                                          oom_floor)
    try:
        requests, limits = container.resources.requests, container.resources.limits
        cpu_request = parse_quantity(requests["cpu"]).milli_value() if "cpu" in requests else 0
        res.cpu_shares = max(_MIN_SHARES, cpu_request * 1024 // 1000)
        if "cpu" in limits:
            res.cpu_period = _QUOTA_PERIOD
            res.cpu_quota = max(1000, parse_quantity(limits["cpu"]).milli_value() * _QUOTA_PERIOD // 1000)
        if "memory" in limits:
            res.memory_limit_in_bytes = parse_quantity(limits["memory"]).int_value()
    except QuantityError as exc:
        raise ConfigError(f"container {container.name}: resources: {exc}") from None
    return res


def _hosts_mount(pod: Pod, paths: PodPaths, pod_ip: str, cluster_domain: str) -> api_pb2.Mount:
    """The pod's managed /etc/hosts, (re)written for this container, as upstream's makeMounts."""
    try:
        hostname, domain = pod_hostname_and_domain(pod, cluster_domain)
    except HostnameError as exc:
        raise ConfigError(str(exc)) from None
    path = paths.hosts_file(pod)
    write_hosts_file(path, [pod_ip] if pod_ip else [], hostname, domain, host_network=pod.spec.hostNetwork,
                     aliases=pod.spec.hostAliases)
    return api_pb2.Mount(container_path=ETC_HOSTS, host_path=str(path))


_PROPAGATION = {"HostToContainer": api_pb2.PROPAGATION_HOST_TO_CONTAINER,
                "Bidirectional": api_pb2.PROPAGATION_BIDIRECTIONAL}


def _expand(text: str, env: Mapping[str, str]) -> str:
    """$(VAR) from the container's environment, $$ for a literal $ (upstream's expansion)."""
    return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def _within(root: Path, sub: str, mount: core_pb2.VolumeMount, container: core_pb2.Container) -> Path:
    """root/sub, refused when a symlink on the way leads outside the volume (upstream's
    subpath safety: a container must not reach the host through a link it planted)."""
    if Path(sub).is_absolute() or ".." in Path(sub).parts:
        raise ConfigError(f"container {container.name}: subPath {sub!r} must be relative, without '..'")
    base = os.path.realpath(root)
    resolved = os.path.realpath(root / sub)
    if resolved != base and not resolved.startswith(base.rstrip("/") + "/"):
        raise ConfigError(f'failed to prepare subPath for volumeMount "{mount.name}" of container '
                          f'"{container.name}": subpath "{sub}" resolves to {resolved}, outside the volume')
    return Path(resolved)


def _mounts(pod: Pod, container: core_pb2.Container, paths: PodPaths, claims: Mapping[str, Path],
            env: Mapping[str, str]) -> list[api_pb2.Mount]:
    volumes = {v.name: v for v in pod.spec.volumes}
    mounts = []
    for mount in container.volumeMounts:
        volume = volumes.get(mount.name)
        if volume is None:
            raise ConfigError(f"container {container.name}: volume {mount.name!r} is not defined in the pod")
        read_only = mount.readOnly
        if volume.HasField("hostPath"):
            source = Path(paths.host_path(volume.hostPath.path))  # its type checked (or made) by the volume manager
        elif volume.HasField("emptyDir"):
            source = paths.volume_dir(pod, EMPTY_DIR, volume.name)
            source.mkdir(parents=True, exist_ok=True)
        elif volume.HasField("persistentVolumeClaim"):
            found = claims.get(volume.name)
            if found is None:
                raise ConfigError(f"volume {volume.name!r}: claim {volume.persistentVolumeClaim.claimName!r} is not "
                                  "mounted yet")
            source = found
            read_only = read_only or volume.persistentVolumeClaim.readOnly
        elif kind := next((k for k in API_VOLUMES if volume.HasField(k)), None):
            source = paths.volume_dir(pod, API_VOLUMES[kind], volume.name)  # written before (kubelet.volumes)
            source.mkdir(parents=True, exist_ok=True)
        else:
            raise ConfigError(f"volume {volume.name!r}: no supported volume type")
        sub = _expand(mount.subPathExpr, env) if mount.subPathExpr else mount.subPath
        if sub:
            source = _within(source, sub, mount, container)
            if not source.exists():
                source.mkdir(parents=True)
        mounts.append(api_pb2.Mount(container_path=mount.mountPath, host_path=str(source), readonly=read_only,
                                    propagation=_PROPAGATION.get(mount.mountPropagation, api_pb2.PROPAGATION_PRIVATE)))
    return mounts


def _key_ref(pod: Pod, kind: str, ref: core_pb2.ConfigMapKeySelector | core_pb2.SecretKeySelector,
             sources: Mapping[tuple[str, str], Mapping[str, str] | None]) -> str | None:
    """A configMapKeyRef's or secretKeyRef's value; None: optional and absent."""
    data = sources.get((f"{kind.lower()}s", ref.name))
    if data is None:
        if ref.optional:
            return None
        raise ConfigError(f'{kind.lower()} "{ref.name}" not found')
    if ref.key not in data:
        if ref.optional:
            return None
        raise ConfigError(f"couldn't find key {ref.key} in {kind} {pod.metadata.namespace}/{ref.name}")
    return data[ref.key]


def _environment(pod: Pod, container: core_pb2.Container, pod_ip: str, host_ip: str,
                 sources: Mapping[tuple[str, str], Mapping[str, str] | None],
                 service_env: Mapping[str, str],
                 allocatable: Mapping[str, str] | None = None) -> list[api_pb2.KeyValue]:
    """upstream's makeEnvironmentVariables: envFrom first (a later one wins), then env, then
    the Service variables the container does not set itself."""
    values: dict[str, str] = {}
    for source in container.envFrom:
        kind, ref = ("ConfigMap", source.configMapRef) if source.HasField("configMapRef") \
            else ("Secret", source.secretRef)
        data = sources.get((f"{kind.lower()}s", ref.name))
        if data is None:
            if ref.optional:
                continue
            raise ConfigError(f'{kind.lower()} "{ref.name}" not found')
        for key, text in data.items():
            name = source.prefix + key
            if not names.env_var_name(name):  # invalid names are skipped, as upstream
                values[name] = text
    for env in container.env:
        # $(VAR) of a variable defined before it (or a Service's) expanded, as upstream's
        value: str | None = _expand(env.value, {**service_env, **values}) if env.value else env.value
        if env.HasField("valueFrom"):
            source = env.valueFrom
            if source.HasField("configMapKeyRef"):
                value = _key_ref(pod, "ConfigMap", source.configMapKeyRef, sources)
            elif source.HasField("secretKeyRef"):
                value = _key_ref(pod, "Secret", source.secretKeyRef, sources)
            elif source.HasField("resourceFieldRef"):
                try:
                    value = resource_field_value(pod, container.name, source.resourceFieldRef,
                                                 allocatable if allocatable is not None else machine_capacity(0))
                except ResourceFieldError as exc:
                    raise ConfigError(f"env {env.name}: {exc}") from None
            else:
                value = _field_ref(pod, source.fieldRef.fieldPath, pod_ip, host_ip)
        if value is not None:
            values.pop(env.name, None)  # keep upstream's order: env after envFrom
            values[env.name] = value
    for name, text in service_env.items():
        values.setdefault(name, text)
    return [api_pb2.KeyValue(key=k, value=v) for k, v in values.items()]


def ephemeral_as_container(ec: core_pb2.EphemeralContainer) -> core_pb2.Container:
    """An ephemeral container run as a container of the pod (the same field numbers;
    targetContainerName's process namespace is not shared here)."""
    return core_pb2.Container.FromString(ec.SerializeToString())


def needs_env_sources(container: core_pb2.Container) -> bool:
    return bool(container.envFrom) or any(e.valueFrom.HasField("configMapKeyRef") or e.valueFrom.HasField(
        "secretKeyRef") for e in container.env)


def container_config(pod: Pod, container: core_pb2.Container, *, init: bool, restart_count: int,
                     paths: PodPaths, pod_ip: str, host_ip: str,
                     cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
                     env_sources: Mapping[tuple[str, str], Mapping[str, str] | None] | None = None,
                     target_id: str = "", service_env: Mapping[str, str] | None = None,
                     claims: Mapping[str, Path] | None = None,
                     allocatable: Mapping[str, str] | None = None, oom_floor: int = -1000) -> api_pb2.ContainerConfig:
    """`target_id`: a running container whose process namespace this one joins (an
    ephemeral container's targetContainerName); `claims`: the host paths of the pod's
    persistentVolumeClaim volumes (the volume manager's); `allocatable`: the node's (the
    limits the downward API gives a container without its own); `oom_floor`: the lowest OOM
    score adjustment the node can give (kubelet.qos.oom_score_floor)."""
    envs = _environment(pod, container, pod_ip, host_ip, env_sources or {}, service_env or {}, allocatable)
    environment = {kv.key: kv.value for kv in envs}
    mounts = _mounts(pod, container, paths, claims or {}, environment)
    if pod_ip and all(m.container_path != ETC_HOSTS for m in mounts):  # a volume there wins
        mounts.append(_hosts_mount(pod, paths, pod_ip, cluster_domain))
    annotations = {labels.RESTART_COUNT: str(restart_count), labels.CONTAINER_HASH: container_hash(container),
                   labels.TERMINATION_GRACE: str(grace_period(pod))}
    if container.terminationMessagePath:
        annotations[labels.TERMINATION_MESSAGE_PATH] = container.terminationMessagePath
        annotations[labels.TERMINATION_MESSAGE_POLICY] = container.terminationMessagePolicy or "File"
        mounts.append(api_pb2.Mount(container_path=container.terminationMessagePath,
                                    host_path=str(message_file(paths.container_dir(pod, container.name)))))
    if container.HasField("restartPolicy"):
        annotations[labels.RESTART_POLICY] = container.restartPolicy
    return api_pb2.ContainerConfig(
        metadata=api_pb2.ContainerMetadata(name=container.name, attempt=restart_count),
        image=api_pb2.ImageSpec(image=container.image, user_specified_image=container.image),
        command=[_expand(part, environment) for part in container.command],
        args=[_expand(part, environment) for part in container.args], working_dir=container.workingDir, envs=envs,
        mounts=mounts, log_path=f"{container.name}/{restart_count}.log",
        stdin=container.stdin, stdin_once=container.stdinOnce, tty=container.tty,
        labels={**_pod_labels(pod), labels.CONTAINER_NAME: container.name,
                labels.CONTAINER_TYPE: labels.INIT if init else labels.APP},
        annotations=annotations,
        linux=api_pb2.LinuxContainerConfig(resources=_resources(pod, container, oom_floor),
                                           security_context=_security_context(pod, container, target_id, paths)))
