"""The PodSecurity admission plugin (k8s.io/pod-security-admission): the Pod Security
Standards' baseline and restricted profiles, chosen per namespace by its labels
`pod-security.kubernetes.io/{enforce,warn,audit}` (and `-version`).

- enforce: a pod that violates the level is refused (`pods "p" is forbidden: violates
  PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must
  set securityContext.allowPrivilegeEscalation=false), …`);
- warn: the client is told (`Warning: would violate PodSecurity "…": …`), for pods and
  for the pod templates of workload resources;
- audit: the request's audit events are annotated
  (`pod-security.kubernetes.io/audit-violations`), as is the level enforced
  (`pod-security.kubernetes.io/enforce-policy`).

A pod is checked when created, and when an update changes its spec (ephemeral
containers included); status and metadata-only writes are not. A namespace's labels must
name a level (privileged, baseline, restricted) and a version (`latest` or `v1.N`); each
version is judged as `latest` here. Setting a namespace's enforce level warns about
its pods that violate it. The checks and their words are upstream's, ordered by check
ID, each restricted check replacing the baseline one it tightens; not checked: AppArmor,
SELinux options, Windows host process, probe and lifecycle hosts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from apiserver.admission.chain import (
    CREATE,
    UPDATE,
    AdmissionAttributes,
    add_audit_annotation,
    add_warning,
    forbidden,
)
from kubeling import errors
from kubeling.errors import FieldViolation
from protos.kubeling.v1 import core_pb2

__all__ = ["PodSecurityAdmission", "check_pod", "LEVELS"]

LEVELS = ("privileged", "baseline", "restricted")
MODES = ("enforce", "audit", "warn")
PREFIX = "pod-security.kubernetes.io/"
_VERSION = re.compile(r"^(latest|v1\.(0|[1-9][0-9]*))$")
# the workload kinds whose pod templates get warnings (upstream's PodSpecExtractor)
_TEMPLATES = ("deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs",
              "replicationcontrollers", "podtemplates")
_BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# the sysctls baseline allows at `latest` (the kubelet's safe set)
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})
# the volume types restricted allows (csi and ephemeral among them upstream: the Pod API here has neither)
_RESTRICTED_VOLUMES = tuple(kind for kind in ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                              "persistentVolumeClaim", "projected", "secret")
                            if kind in core_pb2.Volume.DESCRIPTOR.fields_by_name)


@dataclass(frozen=True)
class Violation:
    check: str  # upstream's check ID: the order of the message
    reason: str
    detail: str


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quote(names: Iterable[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _containers(spec: core_pb2.PodSpec) -> list[core_pb2.Container | core_pb2.EphemeralContainer]:
    return [*spec.initContainers, *spec.containers, *spec.ephemeralContainers]


def _containers_must(what: str, names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_quote(names)} {what}"


def _baseline(spec: core_pb2.PodSpec) -> list[Violation]:
    out = []
    containers = _containers(spec)
    bad, extra = [], set()
    for c in containers:
        added = [cap for cap in c.securityContext.capabilities.add if cap not in _BASELINE_CAPABILITIES]
        if added:
            bad.append(c.name)
            extra.update(added)
    if bad:
        out.append(Violation("capabilities_baseline", "non-default capabilities", _containers_must(
            f"must not include {_quote(sorted(extra))} in securityContext.capabilities.add", bad)))
    host = [name for name, on in (("hostIPC", spec.hostIPC), ("hostNetwork", spec.hostNetwork),
                                  ("hostPID", spec.hostPID)) if on]
    if host:
        out.append(Violation("hostNamespaces", "host namespaces", ", ".join(sorted(host))))
    host_paths = [v.name for v in spec.volumes if v.HasField("hostPath")]
    if host_paths:
        out.append(Violation("hostPathVolumes", "hostPath volumes",
                             f"{_plural('volume', 'volumes', len(host_paths))} {_quote(host_paths)}"))
    with_ports, ports = [], set()
    for c in containers:
        used = [str(p.hostPort) for p in c.ports if p.hostPort]
        if used:
            with_ports.append(c.name)
            ports.update(used)
    if with_ports:
        out.append(Violation("hostPorts", "hostPort", f"{_plural('container', 'containers', len(with_ports))} "
                             f"{_quote(with_ports)} {_plural('uses', 'use', len(with_ports))} "
                             f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}"))
    privileged = [c.name for c in containers if c.securityContext.privileged]
    if privileged:
        out.append(Violation("privileged", "privileged",
                             _containers_must("must not set securityContext.privileged=true", privileged)))
    unmasked = [c.name for c in containers if c.securityContext.HasField("procMount") and
                c.securityContext.procMount not in ("", "Default")]
    if unmasked:
        out.append(Violation("procMount", "procMount", _containers_must(
            'must not set securityContext.procMount to "Unmasked"', unmasked)))
    out.extend(_seccomp(spec, restricted=False))
    sysctls = [s.name for s in spec.securityContext.sysctls if s.name not in _SAFE_SYSCTLS]
    if sysctls:
        out.append(Violation("sysctls", "forbidden sysctls", ", ".join(sysctls)))
    return out


def _seccomp(spec: core_pb2.PodSpec, *, restricted: bool) -> list[Violation]:
    """seccompProfile_baseline (no Unconfined) and _restricted (RuntimeDefault or Localhost set)."""
    check = "seccompProfile_restricted" if restricted else "seccompProfile_baseline"
    setters, values, pod_set = [], set(), False
    pod_sc = spec.securityContext
    if pod_sc.HasField("seccompProfile"):
        if pod_sc.seccompProfile.type not in ("RuntimeDefault", "Localhost"):
            setters.append("pod")
            values.add(pod_sc.seccompProfile.type)
        else:
            pod_set = True
    bad, unset = [], []
    for c in _containers(spec):
        if c.securityContext.HasField("seccompProfile"):
            if c.securityContext.seccompProfile.type not in ("RuntimeDefault", "Localhost"):
                bad.append(c.name)
                values.add(c.securityContext.seccompProfile.type)
        elif not pod_set:
            unset.append(c.name)
    if bad:
        setters.append(f"{_plural('container', 'containers', len(bad))} {_quote(bad)}")
    if setters:
        return [Violation(check, "seccompProfile", f"{' and '.join(setters)} must not set "
                                                   f"securityContext.seccompProfile.type to {_quote(sorted(values))}")]
    if restricted and unset:
        return [Violation(check, "seccompProfile", f"pod or {_plural('container', 'containers', len(unset))} "
                          f'{_quote(unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" or '
                          f'"Localhost"')]
    return []


def _restricted(spec: core_pb2.PodSpec) -> list[Violation]:
    out = []
    containers = _containers(spec)
    escalating = [c.name for c in containers if not (c.securityContext.HasField("allowPrivilegeEscalation") and
                                                    not c.securityContext.allowPrivilegeEscalation)]
    if escalating:
        out.append(Violation("allowPrivilegeEscalation", "allowPrivilegeEscalation != false", _containers_must(
            "must set securityContext.allowPrivilegeEscalation=false", escalating)))
    missing_drop, adding, forbidden_caps = [], [], set()
    for c in containers:
        caps = c.securityContext.capabilities
        if "ALL" not in caps.drop:
            missing_drop.append(c.name)
        extra = [cap for cap in caps.add if cap != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.name)
            forbidden_caps.update(extra)
    details = []
    if missing_drop:
        details.append(_containers_must('must set securityContext.capabilities.drop=["ALL"]', missing_drop))
    if adding:
        details.append(_containers_must(f"must not include {_quote(sorted(forbidden_caps))} in "
                                        "securityContext.capabilities.add", adding))
    if details:
        out.append(Violation("capabilities_restricted", "unrestricted capabilities", "; ".join(details)))
    volumes = sorted(v.name for v in spec.volumes if not any(v.HasField(kind) for kind in _RESTRICTED_VOLUMES))
    if volumes:
        out.append(Violation("restrictedVolumes", "restricted volume types",
                             "volumes [" + " ".join(f'"{v}"' for v in volumes) + "] have restricted types"))
    out.extend(_non_root(spec))
    root_setters = (["pod"] if spec.securityContext.HasField("runAsUser") and spec.securityContext.runAsUser == 0
                    else [])
    root = [c.name for c in containers if c.securityContext.HasField("runAsUser") and c.securityContext.runAsUser == 0]
    if root:
        root_setters.append(f"{_plural('container', 'containers', len(root))} {_quote(root)}")
    if root_setters:
        out.append(Violation("runAsUser", "runAsUser=0", f"{' and '.join(root_setters)} must not set runAsUser=0"))
    out.extend(_seccomp(spec, restricted=True))
    return out


def _non_root(spec: core_pb2.PodSpec) -> list[Violation]:
    setters, pod_true = [], False
    if spec.securityContext.HasField("runAsNonRoot"):
        if not spec.securityContext.runAsNonRoot:
            setters.append("pod")
        else:
            pod_true = True
    explicit, implicit = [], []
    for c in _containers(spec):
        if c.securityContext.HasField("runAsNonRoot"):
            if not c.securityContext.runAsNonRoot:
                explicit.append(c.name)
        elif not pod_true:
            implicit.append(c.name)
    if explicit:
        setters.append(f"{_plural('container', 'containers', len(explicit))} {_quote(explicit)}")
    if setters:
        return [Violation("runAsNonRoot", "runAsNonRoot != true",
                          f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")]
    if implicit:
        return [Violation("runAsNonRoot", "runAsNonRoot != true",
                          f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} must set "
                          "securityContext.runAsNonRoot=true")]
    return []


# the baseline checks a restricted one replaces (upstream's OverrideCheckIDs)
_OVERRIDDEN = {"seccompProfile_restricted": "seccompProfile_baseline",
               "capabilities_restricted": "capabilities_baseline", "restrictedVolumes": "hostPathVolumes"}


def check_pod(spec: core_pb2.PodSpec, level: str) -> list[Violation]:
    """The pod spec's violations of the level, in upstream's order."""
    if level == "privileged":
        return []
    found = _baseline(spec)
    if level == "restricted":
        replaced = set(_OVERRIDDEN.values())
        found = [v for v in found if v.check not in replaced] + _restricted(spec)
    return sorted(found, key=lambda v: v.check)


def _message(violations: list[Violation]) -> str:
    return ", ".join(f"{v.reason} ({v.detail})" for v in violations)


@dataclass(frozen=True)
class _Policy:
    level: str
    version: str

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


def _policy(labels: dict[str, str], mode: str) -> _Policy:
    level = labels.get(f"{PREFIX}{mode}", "privileged")
    version = labels.get(f"{PREFIX}{mode}-version", "latest")
    if level not in LEVELS:
        return _Policy("restricted", "latest")  # an unreadable level fails closed, as upstream
    return _Policy(level, version if _VERSION.match(version) else "latest")


def _audit(labels: dict[str, str], spec: core_pb2.PodSpec) -> None:
    """The audit level's verdict, on the request's audit events."""
    audit = _policy(labels, "audit")
    audited = check_pod(spec, audit.level)
    if audited:
        add_audit_annotation("pod-security.kubernetes.io/audit-violations",
                             f'would violate PodSecurity "{audit}": {_message(audited)}')


def _label_violations(labels: dict[str, str]) -> list[FieldViolation]:
    out = []
    for mode in MODES:
        key = f"{PREFIX}{mode}"
        if key in labels and labels[key] not in LEVELS:
            out.append(FieldViolation(f"metadata.labels[{key}]", f'Invalid value: "{labels[key]}": must be one of '
                                                                  "privileged, baseline, restricted"))
        version = f"{key}-version"
        if version in labels and not _VERSION.match(labels[version]):
            out.append(FieldViolation(f"metadata.labels[{version}]", f'Invalid value: "{labels[version]}": must be '
                                                                      "\"latest\" or \"v1.x\""))
    return out


def _template_spec(obj: Any) -> core_pb2.PodSpec | None:
    """The pod template's spec of a workload object (upstream's PodSpecExtractor)."""
    kind = obj.DESCRIPTOR.name
    if kind == "PodTemplate":
        return obj.template.spec
    if kind == "CronJob":
        return obj.spec.jobTemplate.spec.template.spec
    return obj.spec.template.spec if obj.spec.HasField("template") else None


@dataclass
class PodSecurityAdmission:
    namespace_labels: Callable[[str], dict[str, str] | None]
    namespace_pods: Callable[[str], list[core_pb2.Pod]]  # a namespace's pods, from the watch cache
    resources: frozenset[str] = frozenset({"pods", "namespaces", *_TEMPLATES})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.resource == "namespaces":
            self._namespace(attrs)
        elif attrs.resource == "pods":
            self._pod(attrs)
        elif attrs.operation in (CREATE, UPDATE) and not attrs.subresource:
            self._template(attrs)

    def _pod(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation not in (CREATE, UPDATE) or attrs.subresource not in ("", "ephemeralcontainers"):
            return
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        if attrs.operation == UPDATE and isinstance(attrs.old, core_pb2.Pod) and \
                attrs.old.spec.SerializeToString(deterministic=True) == pod.spec.SerializeToString(deterministic=True):
            return  # only the spec is judged: metadata and status writes pass
        labels = self.namespace_labels(attrs.namespace) or {}
        enforce = _policy(labels, "enforce")
        add_audit_annotation("pod-security.kubernetes.io/enforce-policy", str(enforce))
        _audit(labels, pod.spec)
        violations = check_pod(pod.spec, enforce.level)
        if violations:
            raise forbidden(attrs, "pods", f'violates PodSecurity "{enforce}": {_message(violations)}')
        warn = _policy(labels, "warn")
        warned = check_pod(pod.spec, warn.level)
        if warned:
            add_warning(f'would violate PodSecurity "{warn}": {_message(warned)}')

    def _template(self, attrs: AdmissionAttributes) -> None:
        spec = _template_spec(attrs.obj)
        if spec is None:
            return
        labels = self.namespace_labels(attrs.namespace) or {}
        _audit(labels, spec)
        warn = _policy(labels, "warn")
        warned = check_pod(spec, warn.level)
        if warned:
            add_warning(f'would violate PodSecurity "{warn}": {_message(warned)}')

    def _namespace(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation not in (CREATE, UPDATE) or attrs.subresource:
            return
        ns = attrs.obj
        assert isinstance(ns, core_pb2.Namespace)
        labels = dict(ns.metadata.labels)
        bad = _label_violations(labels)
        if bad:
            raise errors.Invalid(f'namespaces "{ns.metadata.name}" is invalid: '
                                 + ", ".join(f"{v.field}: {v.description}" for v in bad), violations=bad)
        if attrs.operation != UPDATE or not isinstance(attrs.old, core_pb2.Namespace):
            return
        before, after = _policy(dict(attrs.old.metadata.labels), "enforce"), _policy(labels, "enforce")
        if before == after or after.level == "privileged":
            return
        offenders = [(p.metadata.name, check_pod(p.spec, after.level)) for p in self.namespace_pods(ns.metadata.name)
                     if p.status.phase not in ("Succeeded", "Failed")]
        offenders = [(name, found) for name, found in offenders if found]
        if offenders:
            add_warning(f'existing pods in namespace "{ns.metadata.name}" violate the new PodSecurity enforce level '
                        f'"{after}"')
            for name, found in sorted(offenders):
                add_warning(f"{name}: {', '.join(dict.fromkeys(v.reason for v in found))}")
