"""Pod validation, worded as upstream's field errors (pkg/apis/core/validation).

`validate_pod` checks a new pod's spec, `validate_pod_update` what an update may change,
`validate_pod_status` a status write; each adds every violation, with its field path, to
the Checker, so that a user sees every problem at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from apiserver.validation.checker import Checker
from kubeling import names
from kubeling.podresources import qos_class
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["SYSTEM_PRIORITY_CLASSES", "validate_node_selector_term", "validate_pod", "validate_pod_status",
           "validate_pod_update", "validate_label_selector", "validate_ephemeral_update", "as_container",
           "validate_pod_resize", "qos_class"]

# The built-in PriorityClasses (the apiserver creates them at start, as upstream).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
_RESTART = ("Always", "OnFailure", "Never")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_PULL = ("Always", "IfNotPresent", "Never")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_DNS = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")


def validate_pod(spec: core_pb2.PodSpec, check: Checker) -> None:
    """spec of a pod being created (upstream ValidatePodSpec); every violation goes to `check`."""
    if check.required("spec.containers", len(spec.containers)):
        pass
    seen: set[str] = set()
    grace = spec.terminationGracePeriodSeconds if spec.HasField("terminationGracePeriodSeconds") else 30
    for i, c in enumerate(spec.initContainers):
        _validate_container(c, f"spec.initContainers[{i}]", seen, check, init=True, grace=grace)
    for i, c in enumerate(spec.containers):
        _validate_container(c, f"spec.containers[{i}]", seen, check, init=False, grace=grace)
    for i, alias in enumerate(spec.hostAliases):
        check.ip(f"spec.hostAliases[{i}].ip", alias.ip)
        for j, hostname in enumerate(alias.hostnames):
            check.name(f"spec.hostAliases[{i}].hostnames[{j}]", hostname, names.dns1123_subdomain)
    for i, gate in enumerate(spec.readinessGates):
        check.name(f"spec.readinessGates[{i}].conditionType", gate.conditionType, names.qualified_name)
    _validate_host_ports(spec, check)
    _validate_security_context(spec, check)
    check.unsupported("spec.restartPolicy", spec.restartPolicy, _RESTART)
    check.unsupported("spec.dnsPolicy", spec.dnsPolicy, _DNS)
    check.non_negative("spec.terminationGracePeriodSeconds", spec.terminationGracePeriodSeconds)
    if spec.HasField("activeDeadlineSeconds") and spec.activeDeadlineSeconds <= 0:
        check.invalid("spec.activeDeadlineSeconds", spec.activeDeadlineSeconds,
                      "must be between 1 and 2147483647, inclusive")
    if spec.HasField("preemptionPolicy"):
        check.unsupported("spec.preemptionPolicy", spec.preemptionPolicy, ("PreemptLowerPriority", "Never"))
    system_priority = SYSTEM_PRIORITY_CLASSES.get(spec.priorityClassName)
    if system_priority is not None and spec.HasField("priority") and spec.priority != system_priority:
        check.invalid("spec.priority", spec.priority,
                      f"must be {system_priority} for priorityClassName {spec.priorityClassName}")
    if spec.nodeName:
        check.name("spec.nodeName", spec.nodeName, names.dns1123_subdomain)
    if spec.hostname:
        check.name("spec.hostname", spec.hostname, names.dns1123_label)
    check.labels("spec.nodeSelector", spec.nodeSelector)
    _validate_volumes(spec, check)
    for i, t in enumerate(spec.tolerations):
        validate_toleration(t, f"spec.tolerations[{i}]", check)
    _validate_affinity(spec.affinity, check)
    for i, tsc in enumerate(spec.topologySpreadConstraints):
        path = f"spec.topologySpreadConstraints[{i}]"
        if tsc.maxSkew <= 0:
            check.invalid(f"{path}.maxSkew", tsc.maxSkew, "must be greater than zero")
        check.required(f"{path}.topologyKey", tsc.topologyKey)
        check.unsupported(f"{path}.whenUnsatisfiable", tsc.whenUnsatisfiable, ("DoNotSchedule", "ScheduleAnyway"))
        if tsc.HasField("minDomains") and tsc.minDomains <= 0:
            check.invalid(f"{path}.minDomains", tsc.minDomains, "must be greater than zero")
        check.unsupported(f"{path}.nodeAffinityPolicy", tsc.nodeAffinityPolicy, ("Honor", "Ignore"))
        check.unsupported(f"{path}.nodeTaintsPolicy", tsc.nodeTaintsPolicy, ("Honor", "Ignore"))
        validate_label_selector(tsc.labelSelector, f"{path}.labelSelector", check)
    gates = set()
    for i, g in enumerate(spec.schedulingGates):
        check.name(f"spec.schedulingGates[{i}].name", g.name, names.qualified_name)
        if g.name in gates:
            check.add(f"spec.schedulingGates[{i}].name", f"Duplicate value: {g.name!r}")
        gates.add(g.name)
    for key, text in spec.overhead.items():
        check.quantity(f"spec.overhead[{key}]", text)


def validate_pod_update(new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
    """Pod specs are immutable except container images, activeDeadlineSeconds,
    added tolerations and removed scheduling gates (upstream ValidatePodUpdate)."""
    a, b = core_pb2.PodSpec(), core_pb2.PodSpec()
    a.CopyFrom(new.spec)
    b.CopyFrom(old.spec)
    # strict=False: a changed number of containers is caught by the comparison below
    for ca, cb in zip(list(a.containers) + list(a.initContainers), list(b.containers) + list(b.initContainers),
                      strict=False):
        ca.image = cb.image
    for s in (a, b):
        s.ClearField("activeDeadlineSeconds")
        s.ClearField("tolerations")
        s.ClearField("schedulingGates")
    old_tolerations = [t.SerializeToString(deterministic=True) for t in old.spec.tolerations]
    new_tolerations = [t.SerializeToString(deterministic=True) for t in new.spec.tolerations]
    if any(t not in new_tolerations for t in old_tolerations):
        check.add("spec.tolerations", "Forbidden: existing toleration can not be modified except its tolerationSeconds")
    if any(g not in {x.name for x in old.spec.schedulingGates} for g in (x.name for x in new.spec.schedulingGates)):
        check.add("spec.schedulingGates", "Forbidden: only deletion is allowed, but found new scheduling gate")
    if a.SerializeToString(deterministic=True) != b.SerializeToString(deterministic=True):
        check.add("spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                          "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                          "(only additions to existing tolerations), `spec.schedulingGates` (only deletions)")


_RESIZABLE = ("cpu", "memory")


def validate_pod_resize(new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
    """pods/resize (upstream's ValidatePodResize): only cpu and memory of app containers
    and sidecars change, within the usual rules, and the pod's QoS class stays."""
    if old.spec.nodeName and old.status.phase in ("Succeeded", "Failed"):
        check.add("spec", "Forbidden: pod resize is not allowed for terminal pods")
    for kind, new_list, old_list in (("containers", new.spec.containers, old.spec.containers),
                                     ("initContainers", new.spec.initContainers, old.spec.initContainers)):
        for i, (c, before) in enumerate(zip(new_list, old_list, strict=True)):
            path = f"spec.{kind}[{i}].resources"
            if c.resources.SerializeToString(deterministic=True) == before.resources.SerializeToString(
                    deterministic=True):
                continue
            if kind == "initContainers" and not (c.HasField("restartPolicy") and c.restartPolicy == "Always"):
                check.add(path, "Forbidden: resources for non-sidecar init containers are immutable")
                continue
            for part in ("requests", "limits"):
                now, then = getattr(c.resources, part), getattr(before.resources, part)
                for name in sorted(set(now) | set(then)):
                    if name not in _RESIZABLE and now.get(name) != then.get(name):
                        check.add(f"{path}.{part}[{name}]", "Forbidden: only cpu and memory resources are mutable")
            _validate_resources(c.resources, path, check)
    if qos_class(new.spec) != qos_class(old.spec):
        check.add("spec", "Forbidden: Pod QOS Class may not change as a result of resizing")


def validate_pod_status(new: core_pb2.Pod, check: Checker) -> None:
    """status of a pod (upstream ValidatePodStatusUpdate, the parts kubeling keeps)."""
    status = new.status
    if status.phase:
        check.unsupported("status.phase", status.phase, _PHASES)
    for i, ip in enumerate(status.podIPs):
        check.ip(f"status.podIPs[{i}].ip", ip.ip)
    if status.podIP:
        check.ip("status.podIP", status.podIP)
    if status.hostIP:
        check.ip("status.hostIP", status.hostIP)
    for i, cond in enumerate(status.conditions):
        check.required(f"status.conditions[{i}].type", cond.type)
        check.unsupported(f"status.conditions[{i}].status", cond.status, ("True", "False", "Unknown"))
    declared = {c.name for c in new.spec.containers}
    for i, cs in enumerate(status.containerStatuses):
        if cs.name not in declared:
            check.invalid(f"status.containerStatuses[{i}].name", cs.name, "must match a container in spec.containers")
    declared_init = {c.name for c in new.spec.initContainers}
    for i, cs in enumerate(status.initContainerStatuses):
        if cs.name not in declared_init:
            check.invalid(f"status.initContainerStatuses[{i}].name", cs.name,
                          "must match a container in spec.initContainers")


def _validate_container(c: core_pb2.Container, path: str, seen: set[str], check: Checker, *, init: bool,
                        grace: int = 30) -> None:
    if check.required(f"{path}.name", c.name):
        check.name(f"{path}.name", c.name, names.dns1123_label)
        if c.name in seen:
            check.add(f"{path}.name", f"Duplicate value: {c.name!r}")
        seen.add(c.name)
    check.required(f"{path}.image", c.image.strip())
    check.unsupported(f"{path}.imagePullPolicy", c.imagePullPolicy, _PULL)
    if c.terminationMessagePolicy:
        check.unsupported(f"{path}.terminationMessagePolicy", c.terminationMessagePolicy,
                          ("FallbackToLogsOnError", "File"))
    port_names: set[str] = set()
    for i, p in enumerate(c.ports):
        pp = f"{path}.ports[{i}]"
        if p.name:
            check.name(f"{pp}.name", p.name, names.port_name)
            if p.name in port_names:
                check.add(f"{pp}.name", f"Duplicate value: {p.name!r}")
            port_names.add(p.name)
        check.port(f"{pp}.containerPort", p.containerPort)
        if p.hostPort:
            check.port(f"{pp}.hostPort", p.hostPort)
        check.unsupported(f"{pp}.protocol", p.protocol, _PROTOCOLS)
        if p.hostIP:
            check.ip(f"{pp}.hostIP", p.hostIP)
    for i, e in enumerate(c.env):
        if check.required(f"{path}.env[{i}].name", e.name):
            check.name(f"{path}.env[{i}].name", e.name, names.env_var_name)
        if e.value and e.HasField("valueFrom"):
            check.invalid(f"{path}.env[{i}].valueFrom", "", "may not be specified when `value` is not empty")
        if e.HasField("valueFrom"):
            source = e.valueFrom
            at = f"{path}.env[{i}].valueFrom"
            kinds = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                     if source.HasField(k)]
            if len(kinds) != 1:
                check.invalid(at, "", "may not have more than one field specified at a time")
            elif source.HasField("fieldRef"):
                check.required(f"{at}.fieldRef.fieldPath", source.fieldRef.fieldPath)
            elif source.HasField("resourceFieldRef"):
                _validate_resource_field(source.resourceFieldRef, f"{at}.resourceFieldRef", check)
            else:
                ref = source.configMapKeyRef if source.HasField("configMapKeyRef") else source.secretKeyRef
                check.required(f"{at}.{kinds[0]}.name", ref.name)
                if check.required(f"{at}.{kinds[0]}.key", ref.key):
                    check.name(f"{at}.{kinds[0]}.key", ref.key, _config_key)
    for i, ef in enumerate(c.envFrom):
        at = f"{path}.envFrom[{i}]"
        kinds = [k for k in ("configMapRef", "secretRef") if ef.HasField(k)]
        if len(kinds) != 1:
            check.invalid(at, "", "may not have more than one field specified at a time")
        else:
            check.required(f"{at}.{kinds[0]}.name", getattr(ef, kinds[0]).name)
        if ef.prefix:
            check.name(f"{at}.prefix", ef.prefix, names.env_var_name)
    _validate_resources(c.resources, f"{path}.resources", check)
    for i, m in enumerate(c.volumeMounts):
        check.required(f"{path}.volumeMounts[{i}].name", m.name)
        check.required(f"{path}.volumeMounts[{i}].mountPath", m.mountPath)
        if m.subPath and m.subPathExpr:
            check.invalid(f"{path}.volumeMounts[{i}].subPathExpr", m.subPathExpr,
                          "subPathExpr and subPath are mutually exclusive")
        for name in ("subPath", "subPathExpr"):
            if getattr(m, name):
                _relative_path(f"{path}.volumeMounts[{i}].{name}", getattr(m, name), check)
        if m.HasField("mountPropagation"):
            check.unsupported(f"{path}.volumeMounts[{i}].mountPropagation", m.mountPropagation,
                              ("Bidirectional", "HostToContainer", "None"))
    sidecar = init and c.HasField("restartPolicy") and c.restartPolicy == "Always"
    if c.HasField("restartPolicy"):
        if init:
            check.unsupported(f"{path}.restartPolicy", c.restartPolicy, ("Always",))
        else:
            check.add(f"{path}.restartPolicy", "Forbidden: may not be set for non-init containers")
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = getattr(c, kind)
        if probe.ByteSize() == 0:
            continue
        if init and not sidecar:
            check.add(f"{path}.{kind}", "Forbidden: may not be set for init containers without restartPolicy=Always")
            continue
        _validate_probe(probe, f"{path}.{kind}", check, liveness_like=kind != "readinessProbe")
    if c.HasField("lifecycle"):
        if init and not sidecar:
            check.add(f"{path}.lifecycle", "Forbidden: may not be set for init containers without restartPolicy=Always")
        else:
            for hook in ("postStart", "preStop"):
                if c.lifecycle.HasField(hook):
                    _validate_handler(getattr(c.lifecycle, hook), f"{path}.lifecycle.{hook}", check, grace)
    for i, rp in enumerate(c.resizePolicy):
        check.unsupported(f"{path}.resizePolicy[{i}].resourceName", rp.resourceName, ("cpu", "memory"))
        check.unsupported(f"{path}.resizePolicy[{i}].restartPolicy", rp.restartPolicy,
                          ("NotRequired", "RestartContainer"))
    _validate_container_security(c.securityContext, f"{path}.securityContext", check)


_RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                    "requests.ephemeral-storage", "requests.memory")


def _validate_resource_field(ref: core_pb2.ResourceFieldSelector, path: str, check: Checker) -> None:
    """upstream's validateContainerResourceFieldSelector (the divisor a quantity)."""
    if check.required(f"{path}.resource", ref.resource):
        check.unsupported(f"{path}.resource", ref.resource, _RESOURCE_FIELDS)
    if ref.divisor:
        check.quantity(f"{path}.divisor", ref.divisor)


def _validate_handler(h: core_pb2.LifecycleHandler, path: str, check: Checker, grace: int) -> None:
    """A lifecycle hook's handler (upstream's validateLifecycleHandler)."""
    _validate_actions(h, ("exec", "httpGet", "tcpSocket", "sleep"), path, check)
    if h.HasField("sleep") and not 0 <= h.sleep.seconds <= grace:
        check.invalid(f"{path}.sleep.seconds", h.sleep.seconds,
                      f"must be non-negative and less than terminationGracePeriodSeconds ({grace})")


_SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")


def _validate_seccomp(profile: core_pb2.SeccompProfile, path: str, check: Checker) -> None:
    check.unsupported(f"{path}.type", profile.type, _SECCOMP_TYPES)
    if profile.type == "Localhost":
        if not profile.localhostProfile:
            check.add(f"{path}.localhostProfile", "Required value: must be set when seccomp type is Localhost")
        else:
            _relative_path(f"{path}.localhostProfile", profile.localhostProfile, check)
    elif profile.HasField("localhostProfile"):
        check.invalid(f"{path}.localhostProfile", profile.localhostProfile,
                      "can only be set when seccomp type is Localhost")


def _validate_container_security(sc: core_pb2.SecurityContext, path: str, check: Checker) -> None:
    """upstream's ValidateSecurityContext."""
    for name in ("runAsUser", "runAsGroup"):
        if sc.HasField(name):
            _id(f"{path}.{name}", getattr(sc, name), check)
    if sc.HasField("procMount"):
        check.unsupported(f"{path}.procMount", sc.procMount, ("Default", "Unmasked"))
        if sc.procMount == "Unmasked":  # kubeling has no user namespaces (hostUsers: false)
            check.invalid(f"{path}.procMount", sc.procMount, "`hostUsers` must be false to use `Unmasked`")
    if sc.HasField("allowPrivilegeEscalation") and not sc.allowPrivilegeEscalation:
        if sc.privileged:
            check.invalid(path, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")
        if "CAP_SYS_ADMIN" in sc.capabilities.add or "SYS_ADMIN" in sc.capabilities.add:
            check.invalid(path, "", "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
                                    "CAP_SYS_ADMIN")
    if sc.HasField("seccompProfile"):
        _validate_seccomp(sc.seccompProfile, f"{path}.seccompProfile", check)


def _validate_probe(p: core_pb2.Probe, path: str, check: Checker, *, liveness_like: bool) -> None:
    _validate_actions(p, ("exec", "httpGet", "tcpSocket", "grpc"), path, check)
    for f in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        check.non_negative(f"{path}.{f}", getattr(p, f))
    if liveness_like and p.successThreshold != 1:
        check.invalid(f"{path}.successThreshold", p.successThreshold, "must be 1")
    if p.HasField("grpc"):
        check.port(f"{path}.grpc.port", p.grpc.port)


def _validate_resources(resources: core_pb2.ResourceRequirements, path: str, check: Checker) -> None:
    """Quantities that parse, each request within its limit."""
    requests = check.resource_list(f"{path}.requests", resources.requests)
    limits = check.resource_list(f"{path}.limits", resources.limits)
    for name, req in requests.items():
        lim = limits.get(name)
        if lim is not None and req.value > lim.value:
            check.invalid(f"{path}.requests", str(req), f"must be less than or equal to {name} limit of {lim}")


def _validate_actions(h: core_pb2.Probe | core_pb2.LifecycleHandler, kinds: tuple[str, ...], path: str,
                      check: Checker) -> None:
    """One handler of `kinds`, and its exec, httpGet or tcpSocket action (probes and hooks alike)."""
    handlers = [kind for kind in kinds if h.HasField(kind)]
    if not handlers:
        check.add(path, "Required value: must specify a handler type")
    elif len(handlers) > 1:
        check.add(f"{path}.{handlers[1]}", "Forbidden: may not specify more than 1 handler type")
    if h.HasField("exec"):
        check.required(f"{path}.exec.command", len(h.exec.command))
    if h.HasField("httpGet"):
        _validate_probe_port(h.httpGet.port, f"{path}.httpGet.port", check)
        check.unsupported(f"{path}.httpGet.scheme", h.httpGet.scheme, ("HTTP", "HTTPS"))
    if h.HasField("tcpSocket"):
        _validate_probe_port(h.tcpSocket.port, f"{path}.tcpSocket.port", check)


def _validate_probe_port(port: core_pb2.IntOrString, path: str, check: Checker) -> None:
    if port.type == 1:
        check.name(path, port.strVal, names.port_name)
    else:
        check.port(path, port.intVal)


def _validate_host_ports(spec: core_pb2.PodSpec, check: Checker) -> None:
    used: set[tuple[str, int, str]] = set()
    for i, c in enumerate(spec.containers):
        for j, p in enumerate(c.ports):
            if not p.hostPort:
                continue
            key = (p.protocol, p.hostPort, p.hostIP)
            if key in used:
                check.add(f"spec.containers[{i}].ports[{j}].hostPort",
                          f"Duplicate value: \"{p.hostPort}/{p.protocol}\"")
            used.add(key)


_MAX_ID = 2147483647


def _id(path: str, value: int, check: Checker) -> None:
    if not 0 <= value <= _MAX_ID:
        check.invalid(path, value, f"must be between 0 and {_MAX_ID}, inclusive")


_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_SYSCTL_MAX = 253
# The sysctls of the IPC namespace (upstream's namespace groups): not with hostIPC.
_IPC_SYSCTLS = ("kernel.shm", "kernel.msg", "kernel.sem", "fs.mqueue.")


def _validate_security_context(spec: core_pb2.PodSpec, check: Checker) -> None:
    """upstream's validatePodSpecSecurityContext and validateSysctls."""
    sc = spec.securityContext
    for name in ("runAsUser", "runAsGroup", "fsGroup"):
        if sc.HasField(name):
            _id(f"spec.securityContext.{name}", getattr(sc, name), check)
    for i, gid in enumerate(sc.supplementalGroups):
        _id(f"spec.securityContext.supplementalGroups[{i}]", gid, check)
    if sc.HasField("fsGroupChangePolicy"):
        check.unsupported("spec.securityContext.fsGroupChangePolicy", sc.fsGroupChangePolicy,
                          ("OnRootMismatch", "Always"))
    if sc.HasField("seccompProfile"):
        _validate_seccomp(sc.seccompProfile, "spec.securityContext.seccompProfile", check)
    seen: set[str] = set()
    for i, sysctl in enumerate(sc.sysctls):
        path = f"spec.securityContext.sysctls[{i}].name"
        name = sysctl.name
        if not name:
            check.add(path, "Required value")
        elif len(name) > _SYSCTL_MAX or not _SYSCTL.match(name):
            check.invalid(path, name, f"must have at most {_SYSCTL_MAX} characters and match regex {_SYSCTL.pattern}")
        elif name in seen:
            check.add(path, f'Duplicate value: "{name}"')
        elif spec.hostNetwork and name.replace("/", ".").startswith("net."):
            check.invalid(path, name, "may not be specified when 'hostNetwork' is true")
        elif spec.hostIPC and name.replace("/", ".").startswith(_IPC_SYSCTLS):
            check.invalid(path, name, "may not be specified when 'hostIPC' is true")
        seen.add(name)


def _validate_volumes(spec: core_pb2.PodSpec, check: Checker) -> None:
    vol_names: set[str] = set()
    for i, v in enumerate(spec.volumes):
        path = f"spec.volumes[{i}]"
        if check.required(f"{path}.name", v.name):
            check.name(f"{path}.name", v.name, names.dns1123_label)
            if v.name in vol_names:
                check.add(f"{path}.name", f"Duplicate value: {v.name!r}")
            vol_names.add(v.name)
        sources = [s for s in _VOLUME_TYPES if v.HasField(s)]
        if len(sources) != 1:
            check.add(path, "Required value: must specify exactly one volume type ("
                            + ", ".join(_VOLUME_TYPES) + ")")
        if v.HasField("hostPath"):
            check.required(f"{path}.hostPath.path", v.hostPath.path)
            if v.hostPath.HasField("type"):
                check.unsupported(f"{path}.hostPath.type", v.hostPath.type, _HOST_PATH_TYPES)
        if v.HasField("emptyDir"):
            check.unsupported(f"{path}.emptyDir.medium", v.emptyDir.medium, ("", "Memory", "HugePages"))
            if v.emptyDir.HasField("sizeLimit"):
                check.quantity(f"{path}.emptyDir.sizeLimit", v.emptyDir.sizeLimit)
        if v.HasField("persistentVolumeClaim"):
            check.required(f"{path}.persistentVolumeClaim.claimName", v.persistentVolumeClaim.claimName)
        if v.HasField("projected"):
            _validate_projected(v.projected, f"{path}.projected", check)
        for kind, name_field in (("configMap", "name"), ("secret", "secretName")):
            if v.HasField(kind):
                source = getattr(v, kind)
                check.required(f"{path}.{kind}.{name_field}", getattr(source, name_field))
                _validate_items(source.items, f"{path}.{kind}.items", check)
                if source.HasField("defaultMode"):
                    _validate_mode(f"{path}.{kind}.defaultMode", source.defaultMode, check)
        if v.HasField("downwardAPI"):
            _validate_downward(v.downwardAPI.items, f"{path}.downwardAPI.items", check)
    for c in list(spec.containers) + list(spec.initContainers):
        for m in c.volumeMounts:
            if m.name and m.name not in vol_names:
                check.add("spec.containers.volumeMounts.name", f"Not found: {m.name!r}")


_VOLUME_TYPES = ("hostPath", "emptyDir", "projected", "configMap", "secret", "downwardAPI", "persistentVolumeClaim")
_HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                    "Socket")
_DOWNWARD_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations")


def _config_key(value: str) -> list[str]:
    if len(value) > 253 or not all(ch.isalnum() or ch in "-._" for ch in value):
        return ["a valid config key must consist of alphanumeric characters, '-', '_' or '.'"]
    return []


def _validate_mode(path: str, mode: int, check: Checker) -> None:
    if not 0 <= mode <= 0o777:
        check.invalid(path, mode, "must be a number between 0 and 0777 (octal), both inclusive")


def _validate_items(items: Sequence[core_pb2.KeyToPath], path: str, check: Checker) -> None:
    for j, item in enumerate(items):
        check.required(f"{path}[{j}].key", item.key)
        _relative_path(f"{path}[{j}].path", item.path, check)
        if item.HasField("mode"):
            _validate_mode(f"{path}[{j}].mode", item.mode, check)


def _validate_downward(items: Sequence[core_pb2.DownwardAPIVolumeFile], path: str, check: Checker) -> None:
    for j, item in enumerate(items):
        _relative_path(f"{path}[{j}].path", item.path, check)
        if item.HasField("resourceFieldRef"):
            if item.HasField("fieldRef"):
                check.invalid(f"{path}[{j}]", "", "fieldRef and resourceFieldRef can not be specified simultaneously")
            check.required(f"{path}[{j}].resourceFieldRef.containerName", item.resourceFieldRef.containerName)
            _validate_resource_field(item.resourceFieldRef, f"{path}[{j}].resourceFieldRef", check)
        elif item.fieldRef.fieldPath not in _DOWNWARD_FIELDS and not item.fieldRef.fieldPath.startswith(
                ("metadata.labels['", "metadata.annotations['")):
            check.unsupported(f"{path}[{j}].fieldRef.fieldPath", item.fieldRef.fieldPath, _DOWNWARD_FIELDS)


def _relative_path(path: str, value: str, check: Checker) -> None:
    if check.required(path, value) and (value.startswith("/") or ".." in value.split("/")):
        check.invalid(path, value, "must be a relative path without '..'")


def _validate_projected(projected: core_pb2.ProjectedVolumeSource, path: str, check: Checker) -> None:
    """As upstream's validateProjectedVolumeSource, for the projections kubeling has."""
    for i, source in enumerate(projected.sources):
        at = f"{path}.sources[{i}]"
        kinds = [k for k in ("serviceAccountToken", "configMap", "secret", "downwardAPI") if source.HasField(k)]
        if len(kinds) != 1:
            check.add(at, "Forbidden: may not specify more or less than 1 volume type")
            continue
        if source.HasField("serviceAccountToken"):
            token = source.serviceAccountToken
            _relative_path(f"{at}.serviceAccountToken.path", token.path, check)
            if token.HasField("expirationSeconds") and token.expirationSeconds < 600:
                check.add(f"{at}.serviceAccountToken.expirationSeconds",
                          "Invalid value: may not specify a duration less than 10 minutes")
            elif token.HasField("expirationSeconds") and token.expirationSeconds > 2**32:
                check.add(f"{at}.serviceAccountToken.expirationSeconds",
                          "Invalid value: may not specify a duration larger than 2^32 seconds")
        elif source.HasField("configMap") or source.HasField("secret"):
            kind = kinds[0]
            ref = getattr(source, kind)
            check.required(f"{at}.{kind}.name", ref.name)
            _validate_items(ref.items, f"{at}.{kind}.items", check)
        else:
            _validate_downward(source.downwardAPI.items, f"{at}.downwardAPI.items", check)


def validate_toleration(t: core_pb2.Toleration, path: str, check: Checker) -> None:
    if t.key:
        check.name(f"{path}.key", t.key, names.qualified_name)
    check.unsupported(f"{path}.operator", t.operator, ("Exists", "Equal"))
    if not t.key and t.operator != "Exists":
        check.invalid(f"{path}.operator", t.operator,
                      "operator must be Exists when `key` is empty, which means \"match all values and all keys\"")
    if t.operator == "Exists" and t.value:
        check.invalid(f"{path}.operator", t.value, "value must be empty when `operator` is 'Exists'")
    if t.effect:
        check.unsupported(f"{path}.effect", t.effect, _TAINT_EFFECTS)
    if t.HasField("tolerationSeconds") and t.effect != "NoExecute":
        check.invalid(f"{path}.effect", t.effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")


def validate_node_selector_term(term: core_pb2.NodeSelectorTerm, path: str, check: Checker) -> None:
    for kind, reqs in (("matchExpressions", term.matchExpressions), ("matchFields", term.matchFields)):
        for i, r in enumerate(reqs):
            rp = f"{path}.{kind}[{i}]"
            check.unsupported(f"{rp}.operator", r.operator, _NODE_OPS)
            if kind == "matchFields" and r.key != "metadata.name":
                check.invalid(f"{rp}.key", r.key, "not a valid field selector key")
            elif kind == "matchExpressions":
                check.name(f"{rp}.key", r.key, names.qualified_name)
            if r.operator in ("In", "NotIn") and not r.values:
                check.add(f"{rp}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
            if r.operator in ("Exists", "DoesNotExist") and r.values:
                check.add(f"{rp}.values",
                          "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            if r.operator in ("Gt", "Lt"):
                if len(r.values) != 1:
                    check.add(f"{rp}.values",
                              "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'")
                elif not r.values[0].lstrip("-").isdigit():
                    check.invalid(f"{rp}.values[0]", r.values[0], "must be an integer")


def validate_label_selector(sel: meta_pb2.LabelSelector, path: str, check: Checker) -> None:
    check.labels(f"{path}.matchLabels", sel.matchLabels)
    for i, r in enumerate(sel.matchExpressions):
        rp = f"{path}.matchExpressions[{i}]"
        check.name(f"{rp}.key", r.key, names.qualified_name)
        check.unsupported(f"{rp}.operator", r.operator, _LABEL_OPS)
        if r.operator in ("In", "NotIn") and not r.values:
            check.add(f"{rp}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if r.operator in ("Exists", "DoesNotExist") and r.values:
            check.add(f"{rp}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")


def _validate_pod_affinity_term(term: core_pb2.PodAffinityTerm, path: str, check: Checker) -> None:
    check.required(f"{path}.topologyKey", term.topologyKey)
    if term.topologyKey:
        check.name(f"{path}.topologyKey", term.topologyKey, names.qualified_name)
    validate_label_selector(term.labelSelector, f"{path}.labelSelector", check)
    validate_label_selector(term.namespaceSelector, f"{path}.namespaceSelector", check)
    for i, ns in enumerate(term.namespaces):
        check.name(f"{path}.namespaces[{i}]", ns, names.dns1123_label)


def _validate_affinity(aff: core_pb2.Affinity, check: Checker) -> None:
    na = aff.nodeAffinity
    base = "spec.affinity.nodeAffinity"
    if na.HasField("requiredDuringSchedulingIgnoredDuringExecution"):
        terms = na.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
        rp = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        if not terms:
            check.add(rp, "Required value: must have at least one node selector term")
        for i, term in enumerate(terms):
            validate_node_selector_term(term, f"{rp}[{i}]", check)
    for i, pref in enumerate(na.preferredDuringSchedulingIgnoredDuringExecution):
        pp = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not 1 <= pref.weight <= 100:
            check.invalid(f"{pp}.weight", pref.weight, "must be in the range 1-100")
        validate_node_selector_term(pref.preference, f"{pp}.preference", check)
    for kind, pa in (("podAffinity", aff.podAffinity), ("podAntiAffinity", aff.podAntiAffinity)):
        base = f"spec.affinity.{kind}"
        for i, pod_term in enumerate(pa.requiredDuringSchedulingIgnoredDuringExecution):
            _validate_pod_affinity_term(pod_term, f"{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", check)
        for i, w in enumerate(pa.preferredDuringSchedulingIgnoredDuringExecution):
            wp = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if not 1 <= w.weight <= 100:
                check.invalid(f"{wp}.weight", w.weight, "must be in the range 1-100")
            _validate_pod_affinity_term(w.podAffinityTerm, f"{wp}.podAffinityTerm", check)


def as_container(ec: core_pb2.EphemeralContainer) -> core_pb2.Container:
    """An ephemeral container's Container fields (the same field numbers)."""
    c = core_pb2.Container()
    c.ParseFromString(ec.SerializeToString())
    return c


def validate_ephemeral_update(new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
    """pods/ephemeralcontainers (upstream ValidatePodEphemeralContainersUpdate): existing
    ephemeral containers stay as they are; new ones are containers without ports, probes
    or resources, named uniquely, targeting an existing container if they target one."""
    old_list, new_list = list(old.spec.ephemeralContainers), list(new.spec.ephemeralContainers)
    for i, prior in enumerate(old_list):
        if i >= len(new_list) or new_list[i].SerializeToString(deterministic=True) != \
                prior.SerializeToString(deterministic=True):
            check.add("spec.ephemeralContainers", f"Forbidden: existing ephemeral containers {prior.name!r} may not "
                                                  "be changed")
            return
    seen = {c.name for c in [*new.spec.containers, *new.spec.initContainers, *old_list]}
    targets = {c.name for c in [*new.spec.containers, *new.spec.initContainers]}
    for i, ec in enumerate(new_list[len(old_list):], start=len(old_list)):
        path = f"spec.ephemeralContainers[{i}]"
        _validate_container(as_container(ec), path, seen, check, init=False)
        for field in ("ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resizePolicy",
                      "restartPolicy"):
            if (ec.ports if field == "ports" else ec.resizePolicy if field == "resizePolicy" else ec.HasField(field)):
                check.add(f"{path}.{field}", "Forbidden: cannot be set for an Ephemeral Container")
        if ec.resources.limits or ec.resources.requests:
            check.add(f"{path}.resources", "Forbidden: cannot be set for an Ephemeral Container")
        if ec.targetContainerName and ec.targetContainerName not in targets:
            check.add(f"{path}.targetContainerName", f"Not found: {ec.targetContainerName!r}")
