"""Audit policies (rule matching as upstream's policy checker) and the log backend's
rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apiserver.audit import DEFAULT_POLICY, AuditLog, parse_policy
from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))


def _policy(*rules: dict[str, object], **extra: object) -> object:
    return parse_policy({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": list(rules), **extra})


def test_the_first_matching_rule_decides() -> None:
    policy = _policy({"level": "None", "users": ["bob"]},
                     {"level": "Request", "userGroups": ["devs"], "verbs": ["create"],
                      "resources": [{"group": "apps", "resources": ["deployments", "*/scale"]}]},
                     {"level": "Metadata", "resources": [{"group": "", "resources": ["pods/*"],
                                                          "resourceNames": ["web"]}], "omitStages": ["Panic"]},
                     {"level": "RequestResponse", "nonResourceURLs": ["/apis*"]},
                     omitStages=["RequestReceived"])
    level_for = policy.level_for  # type: ignore[attr-defined]
    deploy = RequestInfo("create", True, "apps", "deployments", namespace="ns", name="d")
    assert level_for(ALICE, deploy) == ("Request", frozenset({"RequestReceived"}))
    assert level_for(UserInfo("bob"), deploy)[0] == "None"
    assert level_for(ALICE, RequestInfo("create", True, "apps", "statefulsets", "scale", "ns", "s"))[0] == "Request"
    assert level_for(ALICE, RequestInfo("get", True, "", "pods", "log", "ns", "web")) == \
        ("Metadata", frozenset({"RequestReceived", "Panic"}))
    assert level_for(ALICE, RequestInfo("get", True, "", "pods", "log", "ns", "other"))[0] == "None"
    assert level_for(ALICE, RequestInfo.non_resource("get", "/apis/apps"))[0] == "RequestResponse"
    assert level_for(ALICE, RequestInfo.non_resource("get", "/healthz"))[0] == "None"


def test_the_default_policy_keeps_secrets_at_metadata_and_leaves_the_noise_out() -> None:
    policy = parse_policy(DEFAULT_POLICY)
    node = UserInfo("system:node:n1", groups=("system:nodes",))
    assert policy.level_for(node, RequestInfo("update", True, "coordination.k8s.io", "leases",
                                              namespace="kube-node-lease", name="n1"))[0] == "None"
    assert policy.level_for(ALICE, RequestInfo("create", True, "", "secrets", namespace="ns"))[0] == "Metadata"
    assert policy.level_for(ALICE, RequestInfo("update", True, "", "secrets", namespace="ns", name="s"))[0] == \
        "Metadata"
    assert policy.level_for(ALICE, RequestInfo("list", True, "apps", "deployments"))[0] == "Metadata"
    assert policy.level_for(ALICE, RequestInfo("delete", True, "apps", "deployments", namespace="n", name="d"))[0] \
        == "RequestResponse"
    assert policy.level_for(ALICE, RequestInfo.non_resource("get", "/readyz"))[0] == "None"


@pytest.mark.parametrize("document, message", [
    ({"kind": "Policy"}, "expected an audit.k8s.io/v1 Policy"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Loud"}]},
     'rules[0].level: Unsupported value: "Loud"'),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["Later"]},
     'omitStages: Unsupported value: "Later"'),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
        {"level": "None", "nonResourceURLs": ["/x"], "resources": [{"group": ""}]}]},
     "rules cannot apply to both regular resources and non-resource URLs"),
])
def test_bad_policies_name_the_field(document: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(document)


def test_the_log_rotates_and_keeps_its_backups(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.log"), max_size_mb=1, max_backups=2)
    log.max_bytes = 2_000  # a test-sized megabyte
    for i in range(100):
        log.write({"kind": "Event", "auditID": str(i), "padding": "x" * 100})
    log.close()
    backups = sorted(tmp_path.glob("audit-*.log"))
    assert len(backups) == 2 and (tmp_path / "audit.log").stat().st_size <= 2_000
    files = [*backups, tmp_path / "audit.log"]
    ids = [json.loads(line)["auditID"] for f in files for line in f.read_text().splitlines()]
    assert ids == [str(i) for i in range(100 - len(ids), 100)]  # the newest events, in order, none twice
    assert oct((tmp_path / "audit.log").stat().st_mode & 0o777) == "0o600"
