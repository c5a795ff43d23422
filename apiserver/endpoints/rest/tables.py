"""Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl shows, computed
as upstream's printers (pkg/printers/internalversion) compute them.

Printers take the object's Kubernetes JSON (a dict), so list, get and watch share them.
Columns with priority 1 are the `-o wide` ones; kubectl hides them otherwise.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from kubeling.timestamps import human_duration
from kubeling.volumeutil import DEFAULT_CLASS_ANNOTATIONS

__all__ = ["table", "human_duration", "pod_status"]

Obj = dict[str, Any]
# Columns (name, type, priority) and the function that makes a row's cells.
Printer = tuple[list[tuple[str, str, int]], Callable[[Obj, float], list[Any]]]
_NONE = "<none>"


def _since(stamp: str | None, now: float) -> str:
    if not stamp:
        return "<unknown>"
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return human_duration(now - when)


def _age(obj: Obj, now: float) -> str:
    return _since(obj.get("metadata", {}).get("creationTimestamp"), now)


# ------------------------------------------------------------------ pods


def pod_status(pod: Obj) -> tuple[str, int, int, str]:
    """(STATUS, ready containers, restarts, time of the last restart or "") as printPod."""
    spec, status = pod.get("spec", {}), pod.get("status", {})
    reason = status.get("reason") or status.get("phase", "")
    restarts, ready, last_restart = 0, 0, ""

    def note_restart(cs: Obj) -> None:
        nonlocal last_restart
        finished = cs.get("lastState", {}).get("terminated", {}).get("finishedAt", "")
        if finished > last_restart:
            last_restart = finished

    initializing = False
    init_statuses = status.get("initContainerStatuses", [])
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount", 0)
        note_restart(cs)
        state = cs.get("state", {})
        term, wait = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if term is not None:
            if term.get("reason"):
                reason = "Init:" + term["reason"]
            elif term.get("signal"):
                reason = f"Init:Signal:{term['signal']}"
            else:
                reason = f"Init:ExitCode:{term.get('exitCode', 0)}"
        elif wait is not None and wait.get("reason") and wait["reason"] != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers', []))}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in status.get("conditions", []))
    if not initializing or initialized:
        restarts, has_running = 0, False
        for cs in reversed(status.get("containerStatuses", [])):
            restarts += cs.get("restartCount", 0)
            note_restart(cs)
            state = cs.get("state", {})
            wait, term = state.get("waiting"), state.get("terminated")
            if wait is not None and wait.get("reason"):
                reason = wait["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif cs.get("ready") and "running" in state:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in status.get("conditions", []))
            reason = "Running" if ready_condition else "NotReady"
    if pod.get("metadata", {}).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif status.get("phase") not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return reason, ready, restarts, last_restart


def _pod_row(pod: Obj, now: float) -> list[Any]:
    reason, ready, restarts, last = pod_status(pod)
    spec, status = pod.get("spec", {}), pod.get("status", {})
    restarts_text = f"{restarts} ({_since(last, now)} ago)" if last else str(restarts)
    gates = spec.get("readinessGates", [])
    return [pod["metadata"]["name"], f"{ready}/{len(spec.get('containers', []))}", reason, restarts_text,
            _age(pod, now), status.get("podIP") or _NONE, spec.get("nodeName") or _NONE,
            status.get("nominatedNodeName") or _NONE, f"{len(gates)}" if gates else _NONE]


_POD_COLUMNS = [("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
                ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1), ("Nominated Node", "string", 1),
                ("Readiness Gates", "string", 1)]


# ------------------------------------------------------------------ nodes


def _node_row(node: Obj, now: float) -> list[Any]:
    meta, spec, status = node["metadata"], node.get("spec", {}), node.get("status", {})
    ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    if ready is None:
        conditions = ["Unknown"]
    else:
        conditions = ["Ready" if ready.get("status") == "True" else
                      "NotReady" if ready.get("status") == "False" else "Unknown"]
    if spec.get("unschedulable"):
        conditions.append("SchedulingDisabled")
    roles = sorted({k.split("/", 1)[1] for k in meta.get("labels", {})
                    if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]}
                   | ({meta["labels"]["kubernetes.io/role"]}
                      if meta.get("labels", {}).get("kubernetes.io/role") else set()))
    info = status.get("nodeInfo", {})
    addresses = status.get("addresses", [])

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), _NONE)

    return [meta["name"], ",".join(conditions), ",".join(roles) or _NONE, _age(node, now),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


_NODE_COLUMNS = [("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
                 ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
                 ("OS-Image", "string", 1), ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)]


# ------------------------------------------------------------------ others


def _event_row(ev: Obj, now: float) -> list[Any]:
    """A core v1 Event's row, or an events.k8s.io one's (the same event under its newer names)."""
    first = ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime") \
        or ev.get("metadata", {}).get("creationTimestamp")
    series = ev.get("series") or {}
    last = ev.get("lastTimestamp") or ev.get("deprecatedLastTimestamp") or series.get("lastObservedTime") \
        or ev.get("eventTime") or first
    ref = ev.get("involvedObject") or ev.get("regarding") or {}
    source = ev.get("source") or ev.get("deprecatedSource") or {}
    source_text = source.get("component", "") + (f", {source['host']}" if source.get("host") else "")
    count = ev.get("count") or ev.get("deprecatedCount") or series.get("count", 0)
    message = str(ev.get("message") or ev.get("note") or "")
    return [_since(last, now), ev.get("type", ""), ev.get("reason", ""),
            f"{ref.get('kind', '').lower()}/{ref.get('name', '')}", ref.get("fieldPath", ""),
            source_text or ev.get("reportingComponent", ev.get("reportingController", "")), message.strip(),
            _since(first, now), count if count > 1 else 1, ev["metadata"]["name"]]


_EVENT_COLUMNS = [("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
                  ("Object", "string", 0), ("Subobject", "string", 1), ("Source", "string", 1),
                  ("Message", "string", 0), ("First Seen", "string", 1), ("Count", "integer", 1),
                  ("Name", "string", 1)]


def _namespace_row(ns: Obj, now: float) -> list[Any]:
    return [ns["metadata"]["name"], ns.get("status", {}).get("phase", ""), _age(ns, now)]


def _lease_row(lease: Obj, now: float) -> list[Any]:
    return [lease["metadata"]["name"], lease.get("spec", {}).get("holderIdentity") or _NONE, _age(lease, now)]


def _default_row(obj: Obj, now: float) -> list[Any]:
    """Upstream's DefaultTableConvertor (and the RBAC kinds' printer): the name and when it was made."""
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp", "")]


def _binding_row(binding: Obj, now: float) -> list[Any]:
    ref = binding.get("roleRef", {})
    subjects = binding.get("subjects", [])

    def of(kind: str) -> str:
        return ", ".join((f"{s.get('namespace', '')}:{s['name']}" if kind == "ServiceAccount" else s["name"])
                         for s in subjects if s.get("kind") == kind)

    return [binding["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", _age(binding, now),
            of("User"), of("Group"), of("ServiceAccount")]


_DEFAULT_COLUMNS = [("Name", "string", 0), ("Created At", "date", 0)]
_BINDING_COLUMNS = [("Name", "string", 0), ("Role", "string", 0), ("Age", "string", 0), ("Users", "string", 1),
                    ("Groups", "string", 1), ("ServiceAccounts", "string", 1)]

# ---------------------------------------------------------------- workloads

def _selector(sel: Obj | None) -> str:
    """metav1.FormatLabelSelector."""
    if not sel:
        return _NONE
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op, key, values = expr.get("operator", ""), expr.get("key", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or _NONE


def _containers(template: Obj) -> tuple[str, str]:
    containers = (template.get("spec") or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _deployment_row(d: Obj, now: float) -> list[Any]:
    spec, status = d.get("spec", {}), d.get("status", {})
    names, images = _containers(spec.get("template", {}))
    return [d["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(d, now), names, images,
            _selector(spec.get("selector"))]


def _replicaset_row(rs: Obj, now: float) -> list[Any]:
    spec, status = rs.get("spec", {}), rs.get("status", {})
    names, images = _containers(spec.get("template", {}))
    return [rs["metadata"]["name"], spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(rs, now), names, images, _selector(spec.get("selector"))]


def _labels(labels: Obj | None) -> str:
    """labels.FormatLabels."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or _NONE


def _daemonset_row(ds: Obj, now: float) -> list[Any]:
    spec, status = ds.get("spec", {}), ds.get("status", {})
    names, images = _containers(spec.get("template", {}))
    node_selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector")
    return [ds["metadata"]["name"], status.get("desiredNumberScheduled", 0), status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0), status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
            _labels(node_selector), _age(ds, now), names, images, _selector(spec.get("selector"))]


def _statefulset_row(sts: Obj, now: float) -> list[Any]:
    spec, status = sts.get("spec", {}), sts.get("status", {})
    names, images = _containers(spec.get("template", {}))
    return [sts["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", _age(sts, now),
            names, images]


def _controllerrevision_row(cr: Obj, now: float) -> list[Any]:
    owner = next((r for r in cr["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    controller = _NONE
    if owner is not None:
        group = owner.get("apiVersion", "").rpartition("/")[0]
        kind = owner.get("kind", "").lower()
        controller = f"{kind}.{group}/{owner.get('name', '')}" if group else f"{kind}/{owner.get('name', '')}"
    return [cr["metadata"]["name"], controller, cr.get("revision", 0), _age(cr, now)]


def _cronjob_row(cj: Obj, now: float) -> list[Any]:
    spec, status = cj.get("spec", {}), cj.get("status", {})
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    names, images = _containers(job_spec.get("template", {}))
    last = status.get("lastScheduleTime")
    return [cj["metadata"]["name"], spec.get("schedule", ""), spec.get("timeZone") or _NONE,
            bool(spec.get("suspend", False)), len(status.get("active") or []),
            human_duration(now - _seconds(last)) if last else _NONE, _age(cj, now), names, images,
            _selector(job_spec.get("selector"))]


def _replicationcontroller_row(rc: Obj, now: float) -> list[Any]:
    spec, status = rc.get("spec", {}), rc.get("status", {})
    names, images = _containers(spec.get("template", {}))
    return [rc["metadata"]["name"], spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(rc, now), names, images, _labels(spec.get("selector"))]


def _hpa_targets(spec: Obj, status: Obj) -> str:
    """upstream's formatHPAMetrics (Resource and ContainerResource metrics; the others as
    their kind)."""
    specs, statuses = spec.get("metrics") or [], status.get("currentMetrics") or []
    if not specs:
        return _NONE
    shown: list[str] = []
    count = 0
    for i, metric in enumerate(specs):
        kind = metric.get("type", "")
        key = {"Resource": "resource", "ContainerResource": "containerResource"}.get(kind)
        if key is None:
            shown.append(f"<{kind.lower()}>")
        else:
            source = metric.get(key) or {}
            target = source.get("target") or {}
            current = ((statuses[i] if i < len(statuses) else {}).get(key) or {}).get("current") or {}
            name = source.get("name", "")
            prefix = f"{name} of container {source.get('container', '')}" if key == "containerResource" else name
            if "averageValue" in target:
                shown.append(f"{prefix}: {current.get('averageValue', '<unknown>')}/{target['averageValue']}")
            else:
                now = f"{current['averageUtilization']}%" if "averageUtilization" in current else "<unknown>"
                goal = f"{target['averageUtilization']}%" if "averageUtilization" in target else "<auto>"
                shown.append(f"{prefix}: {now}/{goal}")
        if len(shown) > 2:
            shown = shown[:2]
            return ", ".join(shown) + f" + {len(specs) - count} more..."
        count += 1
    return ", ".join(shown)


def _hpa_row(hpa: Obj, now: float) -> list[Any]:
    spec, status = hpa.get("spec", {}), hpa.get("status", {})
    ref = spec.get("scaleTargetRef") or {}
    if "targetCPUUtilizationPercentage" in spec or hpa.get("apiVersion") == "autoscaling/v1":  # v1's one target
        current = status.get("currentCPUUtilizationPercentage")
        target = spec.get("targetCPUUtilizationPercentage")
        targets = f"{f'{current}%' if current is not None else '<unknown>'}/" \
                  f"{f'{target}%' if target is not None else '<auto>'}"
    else:
        targets = _hpa_targets(spec, status)
    return [hpa["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", targets,
            spec.get("minReplicas", "<unset>"), spec.get("maxReplicas", 0), status.get("currentReplicas", 0),
            _age(hpa, now)]


def _seconds(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _job_status(job: Obj) -> str:
    """Upstream's printJob status column."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        kind = cond.get("type")
        if kind == "Complete":
            return "Complete"
        if kind == "Failed":
            return "Failed"
        if kind == "FailureTarget":
            return "FailureTarget"
        if kind == "Suspended":
            return "Suspended"
    return "Running"


def _job_row(job: Obj, now: float) -> list[Any]:
    spec, status = job.get("spec", {}), job.get("status", {})
    completions = spec.get("completions")
    shown = f"{status.get('succeeded', 0)}/{completions}" if completions is not None else \
        f"{status.get('succeeded', 0)}/1 of {spec.get('parallelism', 1)}"
    duration = ""
    if status.get("startTime"):
        end = _seconds(status["completionTime"]) if status.get("completionTime") else now
        duration = human_duration(end - _seconds(status["startTime"]))
    names, images = _containers(spec.get("template", {}))
    return [job["metadata"]["name"], _job_status(job), shown, duration, _age(job, now), names, images,
            _selector(spec.get("selector"))]


def _priorityclass_row(pc: Obj, now: float) -> list[Any]:
    return [pc["metadata"]["name"], pc.get("value", 0), bool(pc.get("globalDefault", False)), _age(pc, now),
            pc.get("preemptionPolicy", "")]


def _pdb_row(pdb: Obj, now: float) -> list[Any]:
    spec = pdb.get("spec", {})
    shown = {k: str(spec[k]) if k in spec else "N/A" for k in ("minAvailable", "maxUnavailable")}
    return [pdb["metadata"]["name"], shown["minAvailable"], shown["maxUnavailable"],
            (pdb.get("status") or {}).get("disruptionsAllowed", 0), _age(pdb, now)]


# ---------------------------------------------------------------- services (upstream's printers.go)

def _more(items: list[str], limit: int = 3) -> str:
    shown = ",".join(items[:limit])
    return shown + (f" + {len(items) - limit} more..." if len(items) > limit else "")


def _service_external_ip(spec: Obj, status: Obj) -> str:
    kind, external = spec.get("type", "ClusterIP"), list(spec.get("externalIPs") or [])
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname", "") for i in (status.get("loadBalancer") or {}).get("ingress", [])]
        return ",".join(ingress + external) or "<pending>"
    return ",".join(external) or _NONE


def _service_row(svc: Obj, now: float) -> list[Any]:
    spec = svc.get("spec", {})
    ports = [f"{p.get('port', 0)}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
             else f"{p.get('port', 0)}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []]
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or _NONE
    return [svc["metadata"]["name"], spec.get("type", ""), spec.get("clusterIP") or _NONE,
            _service_external_ip(spec, svc.get("status") or {}), ",".join(ports) or _NONE, _age(svc, now), selector]


def _endpoints_row(ep: Obj, now: float) -> list[Any]:
    shown = [f"{a['ip']}:{p.get('port', 0)}" if p else a["ip"]
             for subset in ep.get("subsets") or [] for p in (subset.get("ports") or [None])
             for a in subset.get("addresses") or []]
    return [ep["metadata"]["name"], _more(shown) or _NONE, _age(ep, now)]


def _endpointslice_row(es: Obj, now: float) -> list[Any]:
    ports = [str(p["port"]) if "port" in p else "<unset>" for p in es.get("ports") or []]
    addresses = [a for e in es.get("endpoints") or [] for a in e.get("addresses") or []]
    return [es["metadata"]["name"], es.get("addressType", ""), _more(ports) or "<unset>",
            _more(addresses) or "<unset>", _age(es, now)]


_SERVICE_PRINTERS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj, float], list[Any]]]] = {
    "services": ([("Name", "string", 0), ("Type", "string", 0), ("Cluster-IP", "string", 0),
                  ("External-IP", "string", 0), ("Port(s)", "string", 0), ("Age", "string", 0),
                  ("Selector", "string", 1)], _service_row),
    "endpoints": ([("Name", "string", 0), ("Endpoints", "string", 0), ("Age", "string", 0)], _endpoints_row),
    "endpointslices": ([("Name", "string", 0), ("AddressType", "string", 0), ("Ports", "string", 0),
                        ("Endpoints", "string", 0), ("Age", "string", 0)], _endpointslice_row),
}

# ---------------------------------------------------------------- storage (upstream's printers.go)

_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _access_modes(modes: list[str] | None) -> str:
    """upstream's GetAccessModesAsString: each mode once, in its fixed order."""
    given = set(modes or [])
    return ",".join(short for mode, short in _ACCESS_MODES.items() if mode in given)


def _pv_row(pv: Obj, now: float) -> list[Any]:
    spec, status = pv.get("spec", {}), pv.get("status") or {}
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""
    return [pv["metadata"]["name"], (spec.get("capacity") or {}).get("storage", ""),
            _access_modes(spec.get("accessModes")), spec.get("persistentVolumeReclaimPolicy", ""),
            status.get("phase", ""), claim, spec.get("storageClassName", ""),
            spec.get("volumeAttributesClassName") or "<unset>", status.get("reason", ""), _age(pv, now),
            spec.get("volumeMode", "<unset>")]


def _pvc_row(pvc: Obj, now: float) -> list[Any]:
    spec, status = pvc.get("spec", {}), pvc.get("status") or {}
    phase = "Terminating" if pvc["metadata"].get("deletionTimestamp") else status.get("phase", "")
    bound = phase == "Bound"
    return [pvc["metadata"]["name"], phase, spec.get("volumeName", ""),
            (status.get("capacity") or {}).get("storage", "") if bound else "",
            _access_modes(status.get("accessModes")) if bound else "", spec.get("storageClassName", ""),
            spec.get("volumeAttributesClassName") or "<unset>", _age(pvc, now), spec.get("volumeMode", "<unset>")]


def _storageclass_row(sc: Obj, now: float) -> list[Any]:
    annotations = sc["metadata"].get("annotations") or {}
    default = any(annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)
    name = sc["metadata"]["name"] + (" (default)" if default else "")
    return [name, sc.get("provisioner", ""), sc.get("reclaimPolicy", "Delete"),
            sc.get("volumeBindingMode", "Immediate"), bool(sc.get("allowVolumeExpansion", False)), _age(sc, now)]


def _csidriver_row(driver: Obj, now: float) -> list[Any]:
    spec = driver.get("spec", {})
    tokens = ",".join(t.get("audience", "") for t in spec.get("tokenRequests") or []) or _NONE
    return [driver["metadata"]["name"], bool(spec.get("attachRequired", True)),
            bool(spec.get("podInfoOnMount", False)), bool(spec.get("storageCapacity", False)), tokens,
            bool(spec.get("requiresRepublish", False)), ",".join(spec.get("volumeLifecycleModes") or []) or _NONE,
            _age(driver, now)]


def _volumeattachment_row(va: Obj, now: float) -> list[Any]:
    spec = va.get("spec", {})
    pv = (spec.get("source") or {}).get("persistentVolumeName", "")
    attached = bool((va.get("status") or {}).get("attached", False))
    return [va["metadata"]["name"], spec.get("attacher", ""), pv, spec.get("nodeName", ""), attached, _age(va, now)]



def _quota_row(quota: Obj, now: float) -> list[Any]:
    """Upstream's printResourceQuota: used/hard per resource, limits.* in a column of their own."""
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        (limits if name.startswith("limits.") else requests).append(f"{name}: {used.get(name, '0')}/{hard[name]}")
    return [quota["metadata"]["name"], _age(quota, now), ", ".join(requests), ", ".join(limits)]

_STORAGE_PRINTERS: dict[str, Printer] = {
    "resourcequotas": ([("Name", "string", 0), ("Age", "string", 0), ("Request", "string", 0),
                        ("Limit", "string", 0)], _quota_row),
    "persistentvolumes": ([("Name", "string", 0), ("Capacity", "string", 0), ("Access Modes", "string", 0),
                           ("Reclaim Policy", "string", 0), ("Status", "string", 0), ("Claim", "string", 0),
                           ("StorageClass", "string", 0), ("VolumeAttributesClass", "string", 0),
                           ("Reason", "string", 0), ("Age", "string", 0), ("VolumeMode", "string", 1)], _pv_row),
    "persistentvolumeclaims": ([("Name", "string", 0), ("Status", "string", 0), ("Volume", "string", 0),
                                ("Capacity", "string", 0), ("Access Modes", "string", 0),
                                ("StorageClass", "string", 0), ("VolumeAttributesClass", "string", 0),
                                ("Age", "string", 0), ("VolumeMode", "string", 1)], _pvc_row),
    "storageclasses": ([("Name", "string", 0), ("Provisioner", "string", 0), ("ReclaimPolicy", "string", 0),
                        ("VolumeBindingMode", "string", 0), ("AllowVolumeExpansion", "string", 0),
                        ("Age", "string", 0)], _storageclass_row),
    "csidrivers": ([("Name", "string", 0), ("AttachRequired", "boolean", 0), ("PodInfoOnMount", "boolean", 0),
                    ("StorageCapacity", "boolean", 0), ("TokenRequests", "string", 0),
                    ("RequiresRepublish", "boolean", 0), ("Modes", "string", 0), ("Age", "string", 0)],
                   _csidriver_row),
    "csinodes": ([("Name", "string", 0), ("Drivers", "integer", 0), ("Age", "string", 0)],
                 lambda n, now: [n["metadata"]["name"], len((n.get("spec") or {}).get("drivers") or []),
                                 _age(n, now)]),
    "volumeattachments": ([("Name", "string", 0), ("Attacher", "string", 0), ("PV", "string", 0),
                           ("Node", "string", 0), ("Attached", "boolean", 0), ("Age", "string", 0)],
                          _volumeattachment_row),
    "csistoragecapacities": ([("Name", "string", 0), ("StorageClassName", "string", 0), ("Capacity", "string", 0)],
                             lambda c, now: [c["metadata"]["name"], c.get("storageClassName", ""),
                                             c.get("capacity", "")]),
}

_WIDE = [("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1)]
_WORKLOAD_PRINTERS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj, float], list[Any]]]] = {
    "deployments": ([("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "integer", 0),
                     ("Available", "integer", 0), ("Age", "string", 0), *_WIDE], _deployment_row),
    "replicasets": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                     ("Ready", "integer", 0), ("Age", "string", 0), *_WIDE], _replicaset_row),
    "jobs": ([("Name", "string", 0), ("Status", "string", 0), ("Completions", "string", 0),
              ("Duration", "string", 0), ("Age", "string", 0), *_WIDE], _job_row),
    "cronjobs": ([("Name", "string", 0), ("Schedule", "string", 0), ("Timezone", "string", 0),
                  ("Suspend", "boolean", 0), ("Active", "integer", 0), ("Last Schedule", "string", 0),
                  ("Age", "string", 0), *_WIDE], _cronjob_row),
    "daemonsets": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                    ("Ready", "integer", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
                    ("Node Selector", "string", 0), ("Age", "string", 0), *_WIDE], _daemonset_row),
    "statefulsets": ([("Name", "string", 0), ("Ready", "string", 0), ("Age", "string", 0),
                      ("Containers", "string", 1), ("Images", "string", 1)], _statefulset_row),
    "controllerrevisions": ([("Name", "string", 0), ("Controller", "string", 0), ("Revision", "integer", 0),
                             ("Age", "string", 0)], _controllerrevision_row),
    "horizontalpodautoscalers": ([("Name", "string", 0), ("Reference", "string", 0), ("Targets", "string", 0),
                                  ("MinPods", "string", 0), ("MaxPods", "integer", 0), ("Replicas", "integer", 0),
                                  ("Age", "string", 0)], _hpa_row),
    "replicationcontrollers": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                                ("Ready", "integer", 0), ("Age", "string", 0), *_WIDE],
                               _replicationcontroller_row),
    "priorityclasses": ([("Name", "string", 0), ("Value", "integer", 0), ("Global-Default", "boolean", 0),
                         ("Age", "string", 0), ("PreemptionPolicy", "string", 0)], _priorityclass_row),
    "poddisruptionbudgets": ([("Name", "string", 0), ("Min Available", "string", 0),
                              ("Max Unavailable", "string", 0), ("Allowed Disruptions", "integer", 0),
                              ("Age", "string", 0)], _pdb_row),
}

def _param_ref(binding: Obj) -> str:
    ref = (binding.get("spec") or {}).get("paramRef")
    if not ref:
        return "<unset>"
    if ref.get("selector") is not None:
        return f"{ref['namespace']}/*" if ref.get("namespace") else f"*/{_selector(ref['selector'])}"
    return f"{ref['namespace']}/{ref.get('name', '')}" if ref.get("namespace") else str(ref.get("name", ""))


def _param_kind(policy: Obj) -> str:
    kind = (policy.get("spec") or {}).get("paramKind")
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}" if kind else "<unset>"


def _webhook_row(config: Obj, now: float) -> list[Any]:
    return [config["metadata"]["name"], len(config.get("webhooks") or []), _age(config, now)]


def _policy_row(policy: Obj, now: float) -> list[Any]:
    return [policy["metadata"]["name"], len((policy.get("spec") or {}).get("validations") or []),
            _param_kind(policy), _age(policy, now)]


def _policy_binding_row(binding: Obj, now: float) -> list[Any]:
    return [binding["metadata"]["name"], (binding.get("spec") or {}).get("policyName", ""), _param_ref(binding),
            _age(binding, now)]


def _apiservice_row(apiservice: Obj, now: float) -> list[Any]:
    spec, status = apiservice.get("spec") or {}, apiservice.get("status") or {}
    service = spec.get("service")
    where = f"{service.get('namespace', '')}/{service.get('name', '')}" if service else "Local"
    available = next((c for c in status.get("conditions") or [] if c.get("type") == "Available"), None)
    shown = "Unknown" if available is None else available.get("status", "Unknown") if \
        available.get("status") == "True" else f"{available.get('status')} ({available.get('reason', '')})"
    return [apiservice["metadata"]["name"], where, shown, _age(apiservice, now)]


_WEBHOOK_COLUMNS = [("Name", "string", 0), ("Webhooks", "integer", 0), ("Age", "string", 0)]
def _flowschema_row(fs: Obj, now: float) -> list[Any]:
    spec = fs.get("spec") or {}
    dangling = next((c.get("status", "") for c in (fs.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Dangling"), "?")
    return [fs["metadata"]["name"], (spec.get("priorityLevelConfiguration") or {}).get("name", ""),
            spec.get("matchingPrecedence", 0), (spec.get("distinguisherMethod") or {}).get("type") or _NONE,
            _age(fs, now), dangling]


def _prioritylevel_row(pl: Obj, now: float) -> list[Any]:
    spec = pl.get("spec") or {}
    limited = spec.get("limited") or {}
    queuing = (limited.get("limitResponse") or {}).get("queuing") or {}
    shares = limited.get("nominalConcurrencyShares", (spec.get("exempt") or {}).get("nominalConcurrencyShares", 0))
    return [pl["metadata"]["name"], spec.get("type", ""), shares, queuing.get("queues", _NONE),
            queuing.get("handSize", _NONE), queuing.get("queueLengthLimit", _NONE), _age(pl, now)]


_FLOWCONTROL_PRINTERS: dict[str, Printer] = {
    "flowschemas": ([("Name", "string", 0), ("PriorityLevel", "string", 0), ("MatchingPrecedence", "string", 0),
                     ("DistinguisherMethod", "string", 0), ("Age", "string", 0), ("MissingPL", "string", 0)],
                    _flowschema_row),
    "prioritylevelconfigurations": ([("Name", "string", 0), ("Type", "string", 0),
                                     ("NominalConcurrencyShares", "string", 0), ("Queues", "string", 0),
                                     ("HandSize", "string", 0), ("QueueLengthLimit", "string", 0),
                                     ("Age", "string", 0)], _prioritylevel_row),
}


def _ingress_row(ing: Obj, now: float) -> list[Any]:
    """upstream's printIngress: CLASS, HOSTS (formatHosts: up to three hosts, then "+ N
    more..." counting every rule past the third; "*" when none names one), ADDRESS
    (the load balancer's, sorted and unique), PORTS (80, and 443 with TLS)."""
    spec = ing.get("spec") or {}
    rules = spec.get("rules") or []
    hosts: list[str] = []
    more = False
    for rule in rules:  # formatHosts, step by step: hostless rules count, but show nothing
        more = more or len(hosts) == 3
        if not more and rule.get("host"):
            hosts.append(rule["host"])
    shown = (",".join(hosts) + (f" + {len(rules) - 3} more..." if more else "")) if hosts else "*"
    addresses = {i.get("ip") or i.get("hostname", "") for i in
                 ((ing.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []}
    return [ing["metadata"]["name"], spec.get("ingressClassName") or _NONE, shown,
            ",".join(sorted(a for a in addresses if a)), "80, 443" if spec.get("tls") else "80", _age(ing, now)]


def _ingressclass_row(ic: Obj, now: float) -> list[Any]:
    spec = ic.get("spec") or {}
    parameters = spec.get("parameters")
    shown = _NONE if not parameters else \
        f"{parameters.get('kind', '')}.{parameters.get('apiGroup') or ''}/{parameters.get('name', '')}"
    return [ic["metadata"]["name"], spec.get("controller", ""), shown, _age(ic, now)]


_NETWORKING_PRINTERS: dict[str, Printer] = {
    "ingresses": ([("Name", "string", 0), ("Class", "string", 0), ("Hosts", "string", 0), ("Address", "string", 0),
                   ("Ports", "string", 0), ("Age", "string", 0)], _ingress_row),
    "ingressclasses": ([("Name", "string", 0), ("Controller", "string", 0), ("Parameters", "string", 0),
                        ("Age", "string", 0)], _ingressclass_row),
    "networkpolicies": ([("Name", "string", 0), ("Pod-Selector", "string", 0), ("Age", "string", 0)],
                        lambda np, now: [np["metadata"]["name"],
                                         _selector((np.get("spec") or {}).get("podSelector")) or _NONE,
                                         _age(np, now)]),
}


def _csr_condition(status: dict[str, Any]) -> str:
    """upstream's extractCSRStatus: Denied, else Approved, else Pending; then Failed, Issued."""
    kinds = {c.get("type") for c in status.get("conditions") or []}
    shown = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    return shown + (",Failed" if "Failed" in kinds else "") + (",Issued" if status.get("certificate") else "")


def _csr_row(csr: Obj, now: float) -> list[Any]:
    spec = csr.get("spec") or {}
    seconds = spec.get("expirationSeconds")
    return [csr["metadata"]["name"], _age(csr, now), spec.get("signerName") or _NONE, spec.get("username", ""),
            human_duration(seconds) if seconds else _NONE, _csr_condition(csr.get("status") or {})]


_CERTIFICATES_PRINTERS: dict[str, Printer] = {
    "certificatesigningrequests": ([("Name", "string", 0), ("Age", "string", 0), ("SignerName", "string", 0),
                                    ("Requestor", "string", 0), ("RequestedDuration", "string", 0),
                                    ("Condition", "string", 0)], _csr_row),
}


_ADMISSION_PRINTERS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj, float], list[Any]]]] = {
    "validatingwebhookconfigurations": (_WEBHOOK_COLUMNS, _webhook_row),
    "mutatingwebhookconfigurations": (_WEBHOOK_COLUMNS, _webhook_row),
    "validatingadmissionpolicies": ([("Name", "string", 0), ("Validations", "integer", 0),
                                     ("ParamKind", "string", 0), ("Age", "string", 0)], _policy_row),
    "runtimeclasses": ([("Name", "string", 0), ("Handler", "string", 0), ("Age", "string", 0)],
                       lambda rc, now: [rc["metadata"]["name"], rc.get("handler", ""), _age(rc, now)]),
    "apiservices": ([("Name", "string", 0), ("Service", "string", 0), ("Available", "string", 0),
                     ("Age", "string", 0)], _apiservice_row),
    "validatingadmissionpolicybindings": ([("Name", "string", 0), ("PolicyName", "string", 0),
                                           ("ParamRef", "string", 0), ("Age", "string", 0)], _policy_binding_row),
}

_PRINTERS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj, float], list[Any]]]] = {
    "pods": (_POD_COLUMNS, _pod_row),
    "nodes": (_NODE_COLUMNS, _node_row),
    "events": (_EVENT_COLUMNS, _event_row),
    "namespaces": ([("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)], _namespace_row),
    "leases": ([("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)], _lease_row),
    "serviceaccounts": ([("Name", "string", 0), ("Secrets", "integer", 0), ("Age", "string", 0)],
                        lambda sa, now: [sa["metadata"]["name"], len(sa.get("secrets", [])), _age(sa, now)]),
    "configmaps": ([("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
                   lambda cm, now: [cm["metadata"]["name"], len(cm.get("data", {})) + len(cm.get("binaryData", {})),
                                    _age(cm, now)]),
    "secrets": ([("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
                lambda s, now: [s["metadata"]["name"], s.get("type", ""), len(s.get("data", {})), _age(s, now)]),
    "roles": (_DEFAULT_COLUMNS, _default_row),
    "clusterroles": (_DEFAULT_COLUMNS, _default_row),
    "rolebindings": (_BINDING_COLUMNS, _binding_row),
    "clusterrolebindings": (_BINDING_COLUMNS, _binding_row),
    **_WORKLOAD_PRINTERS,
    **_SERVICE_PRINTERS,
    **_STORAGE_PRINTERS,
    **_ADMISSION_PRINTERS,
    **_FLOWCONTROL_PRINTERS,
    **_NETWORKING_PRINTERS,
    **_CERTIFICATES_PRINTERS,
}


def table(resource: str, objects: list[Obj], *, include_object: str = "Metadata", headers: bool = True,
          list_meta: Obj | None = None, now: float | None = None, printer: Printer | None = None) -> Obj:
    """A meta.k8s.io/v1 Table of `objects` (Kubernetes JSON dicts with kind/apiVersion), in
    `printer`'s columns (a custom resource's), else the resource's printer's, else
    upstream's default ones."""
    columns, row = printer or _PRINTERS.get(resource, (_DEFAULT_COLUMNS, _default_row))
    at = time.time() if now is None else now
    rows = []
    for obj in objects:
        entry: Obj = {"cells": row(obj, at)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": obj.get("metadata", {})}
        rows.append(entry)
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {}, "rows": rows}
    out["columnDefinitions"] = [
        {"name": name, "type": typ, "format": "name" if name == "Name" else "", "description": "",
         "priority": priority} for name, typ, priority in columns] if headers else []
    return out
