"""The ValidatingAdmissionPolicy type checker (apiserver/admission/typecheck.py) on
cel-go's vectors: what it reports, and that what it cannot tell is never reported."""

from __future__ import annotations

import pytest

from apiserver.admission.typecheck import DYN, check, resource_type
from protos.kubeling.v1 import apps_pb2

DEPLOYMENT = resource_type(apps_pb2.Deployment.DESCRIPTOR)
CRONTAB = resource_type(None, {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "replicas": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}})


@pytest.mark.parametrize(("expression", "warnings"), [
    ("object.spec.replicas > 1", []),
    ("object.spec.replicas > '1'", ["found no matching overload for '_>_' applied to '(int, string)'"]),
    ("'got ' + object.spec.replicas", ["found no matching overload for '_+_' applied to '(string, int)'"]),
    ("object.spec.replicas + 1.5 > 2", ["found no matching overload for '_+_' applied to '(int, double)'"]),
    ("object.spec.replicas < 2.5", []),  # comparisons across numbers are allowed
    ("object.spec.maxRetries < 10", ["undefined field 'maxRetries'"]),
    ("object.metadata.name.startsWith('a') && object.kind == 'Deployment'", []),
    ("object.metadata.labels.app == 'x'", []),  # a map's values
    ("object.spec.template.spec.containers.all(c, c.image != '')", []),
    ("params.anything > '1' && variables.v == 2", []),  # dyn: nothing to report
])
def test_deployment(expression: str, warnings: list[str]) -> None:
    assert check(expression, {"object": DEPLOYMENT, "params": DYN}) == warnings


def test_a_crd_schema_types_and_open_parts() -> None:
    assert check("object.spec.replicas > '1'", {"object": CRONTAB}) == \
        ["found no matching overload for '_>_' applied to '(int, string)'"]
    assert check("object.spec.nope == 1", {"object": CRONTAB}) == ["undefined field 'nope'"]
    assert check("object.spec.extra.anything == 1 && object.spec.tags[0] == 'a'", {"object": CRONTAB}) == []
    assert check("object.spec.replicas >", {"object": CRONTAB}) == []  # refused when written, not here
