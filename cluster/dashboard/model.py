"""What the dashboard shows of each object: plain rows (JSON for the page), the same
columns kubectl's tables show, and a pod's scheduling explanation as chart data."""

from __future__ import annotations

import time
from typing import Any

from cluster.why import results_of
from protos.kubeling.v1 import apps_pb2, core_pb2
from scheduler.framework.results import REJECTED

__all__ = ["deployment_row", "event_row", "node_row", "pod_detail", "pod_row", "timeline", "trace_id", "why_chart"]

POD_TRACE_ANNOTATION = "kubeling.io/traceparent"  # the Create's trace context (kubeling.telemetry)


def _time(ts: Any) -> str:
    """RFC 3339 at second precision, as the API writes metav1.Time; "" when unset."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts.seconds)) if ts.seconds else ""


def node_row(node: core_pb2.Node) -> dict[str, Any]:
    ready = next((c.status for c in node.status.conditions if c.type == "Ready"), "Unknown")
    roles = sorted(k.split("/", 1)[1] for k in node.metadata.labels if k.startswith("node-role.kubernetes.io/"))
    return {"name": node.metadata.name, "ready": ready, "roles": roles or ["<none>"],
            "taints": [f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in node.spec.taints],
            "podCIDR": node.spec.podCIDR, "version": node.status.nodeInfo.kubeletVersion,
            "address": next((a.address for a in node.status.addresses if a.type == "InternalIP"), ""),
            "created": _time(node.metadata.creationTimestamp)}


def _pod_status(pod: core_pb2.Pod) -> str:
    """kubectl's STATUS column, in short: a waiting or terminated reason before the phase."""
    if pod.metadata.HasField("deletionTimestamp"):
        return "Terminating"
    for status in pod.status.containerStatuses:
        if status.state.HasField("waiting") and status.state.waiting.reason:
            return status.state.waiting.reason
        if status.state.HasField("terminated") and status.state.terminated.reason and pod.status.phase == "Running":
            return status.state.terminated.reason
    return pod.status.reason or pod.status.phase or "Pending"


def pod_row(pod: core_pb2.Pod) -> dict[str, Any]:
    statuses = pod.status.containerStatuses
    return {"namespace": pod.metadata.namespace, "name": pod.metadata.name, "status": _pod_status(pod),
            "ready": f"{sum(1 for s in statuses if s.ready)}/{len(pod.spec.containers)}",
            "restarts": sum(s.restartCount for s in statuses), "node": pod.spec.nodeName, "ip": pod.status.podIP,
            "created": _time(pod.metadata.creationTimestamp),
            "explained": results_of(dict(pod.metadata.annotations)) is not None}


def deployment_row(deployment: apps_pb2.Deployment) -> dict[str, Any]:
    return {"namespace": deployment.metadata.namespace, "name": deployment.metadata.name,
            "ready": f"{deployment.status.readyReplicas}/{deployment.spec.replicas}",
            "upToDate": deployment.status.updatedReplicas, "available": deployment.status.availableReplicas,
            "created": _time(deployment.metadata.creationTimestamp)}


def event_row(event: core_pb2.Event) -> dict[str, Any]:
    obj = event.involvedObject
    last = event.lastTimestamp if event.lastTimestamp.seconds else event.eventTime
    return {"namespace": event.metadata.namespace, "name": event.metadata.name, "type": event.type,
            "reason": event.reason, "object": f"{obj.kind.lower()}/{obj.name}", "message": event.message,
            "count": event.count or 1, "last": _time(last)}


def why_chart(results: dict[str, Any]) -> dict[str, Any]:
    """Per node evaluated: its filter verdict (the first plugin that rejected it), each
    Score plugin's weighted score, the total; the winner; the nodes summed up unnamed.
    Nodes in the order `kubeling why` prints them: the winner, then by total."""
    filters: dict[str, Any] = dict(results.get("filter-result") or {})
    rejected: dict[str, int] = filters.pop(REJECTED, {}) or {}
    scores: dict[str, dict[str, dict[str, int]]] = results.get("score-result") or {}
    final: dict[str, int] = results.get("finalscore-result") or {}
    selected = results.get("selected-node", "") or ""
    plugins = sorted({p for per_node in scores.values() for p in per_node})
    nodes = []
    for node in sorted(filters, key=lambda n: (n != selected, n not in final, -final.get(n, 0), n)):
        verdicts: dict[str, str] = filters[node] or {}
        failed = next(((p, v) for p, v in verdicts.items() if v != "passed"), None)
        nodes.append({"node": node, "feasible": failed is None,
                      "filter": "passed" if failed is None else f"{failed[0]}: {failed[1].split(': ', 1)[-1]}",
                      "scores": {p: s["weighted"] for p, s in scores.get(node, {}).items()},
                      "total": final.get(node), "selected": node == selected})
    return {"attempt": results.get("attempt"), "selected": selected, "plugins": plugins, "nodes": nodes,
            "rejected": rejected, "postfilter": results.get("postfilter-result") or {},
            "prefilter": results.get("prefilter-result") or {}}


def pod_detail(pod: core_pb2.Pod) -> dict[str, Any]:
    """The pod's page: its row, containers with their state, and the why-chart's data."""
    statuses = {s.name: s for s in pod.status.containerStatuses}
    containers = []
    for spec in pod.spec.containers:
        status = statuses.get(spec.name)
        state = "Waiting"
        if status is not None:
            state = next((name.capitalize() for name in ("running", "terminated", "waiting")
                          if status.state.HasField(name)), "Waiting")
        containers.append({"name": spec.name, "image": spec.image, "state": state,
                           "ready": bool(status and status.ready), "restarts": status.restartCount if status else 0})
    results = results_of(dict(pod.metadata.annotations))
    conditions = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                  for c in pod.status.conditions]
    return {"pod": pod_row(pod), "containers": containers, "conditions": conditions,
            "why": why_chart(results) if results is not None else None}


def trace_id(pod: core_pb2.Pod) -> str:
    """The trace the pod's start belongs to (W3C traceparent `00-<trace>-<span>-<flags>`)."""
    parts = pod.metadata.annotations.get(POD_TRACE_ANNOTATION, "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def timeline(trace: dict[str, Any], limit: int = 300) -> list[dict[str, Any]]:
    """A trace in Jaeger's JSON shape as rows of a timeline: each span's service, name,
    start (ms from the trace's first span), duration (ms) and depth in the tree, in start
    order; the `limit` longest kept when there are more (etcd calls and CRI polls add up)."""
    spans = trace.get("spans") or []
    if not spans:
        return []
    services = {pid: (p or {}).get("serviceName", "") for pid, p in (trace.get("processes") or {}).items()}
    parents = {s["spanID"]: next((r["spanID"] for r in s.get("references") or [] if r.get("refType") == "CHILD_OF"),
                                 "") for s in spans}

    def depth(span_id: str) -> int:
        seen = 0
        while parents.get(span_id) and parents[span_id] in parents and seen < 64:
            span_id, seen = parents[span_id], seen + 1
        return seen

    kept = sorted(spans, key=lambda s: -int(s.get("duration", 0)))[:limit]
    origin = min(int(s["startTime"]) for s in spans)
    rows = [{"service": services.get(s.get("processID", ""), ""), "name": s.get("operationName", ""),
             "startMs": (int(s["startTime"]) - origin) / 1000, "durationMs": int(s.get("duration", 0)) / 1000,
             "depth": depth(s["spanID"])} for s in kept]
    return sorted(rows, key=lambda r: (r["startMs"], r["depth"]))
