"""pods/resize over REST on a real etcd: only the containers' cpu and memory change (the
rest of the body is ignored), the generation moves, a change of QoS class or of another
resource is refused with upstream's words."""

from __future__ import annotations

from tests.contract.test_crds import Rest

PODS = "/api/v1/namespaces/default/pods"
STRATEGIC = "application/strategic-merge-patch+json"


async def test_resize_changes_resources_only(http: Rest) -> None:
    code, made, _ = await http.call("POST", PODS, {"metadata": {"name": "r"}, "spec": {"containers": [{
        "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                       "limits": {"cpu": "200m", "memory": "128Mi"}}}]}})
    assert code == 201, made
    code, resized, _ = await http.call("PATCH", f"{PODS}/r/resize", {"metadata": {"labels": {"ignored": "yes"}},
                                                                      "spec": {"containers": [{
        "name": "c", "image": "other", "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}]}},
        content_type=STRATEGIC)
    assert code == 200, resized
    assert resized["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "300m", "memory": "128Mi"}
    assert resized["spec"]["containers"][0]["image"] == "busybox" and "labels" not in resized["metadata"]
    assert resized["metadata"]["generation"] == made["metadata"]["generation"] + 1
    code, got, _ = await http.call("GET", f"{PODS}/r/resize")
    assert code == 200 and got["metadata"]["name"] == "r"

    code, body, _ = await http.call("PATCH", f"{PODS}/r/resize", {"spec": {"containers": [{
        "name": "c", "resources": {"requests": {"cpu": "300m", "memory": "128Mi"}}}]}}, content_type=STRATEGIC)
    assert code == 422 and "Pod QOS Class may not change as a result of resizing" in body["message"], body
    code, body, _ = await http.call("PATCH", f"{PODS}/r/resize", {"spec": {"containers": [{
        "name": "c", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]}}, content_type=STRATEGIC)
    assert code == 422 and "spec.containers[0].resources.limits[ephemeral-storage]: Forbidden: only cpu and " \
        "memory resources are mutable" in body["message"], body
