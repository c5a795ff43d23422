"""v1 PodTemplates: a pod template kept as an object (upstream's pkg/registry/core/podtemplate):
its pod spec defaulted and validated as a template's (ValidatePodTemplate)."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import validate_template
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["PodTemplateStrategy"]


class PodTemplateStrategy(Strategy[core_pb2.PodTemplate]):
    resource = scheme.PODTEMPLATES

    def default(self, obj: core_pb2.PodTemplate) -> None:
        default_pod_spec(obj.template.spec)

    def validate(self, obj: core_pb2.PodTemplate, check: Checker) -> None:
        validate_template(obj.template, "template", check)
        canonicalize_resources(obj.template.spec)
