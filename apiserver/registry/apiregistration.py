"""apiregistration.k8s.io/v1 APIServices (upstream's kube-aggregator registry): kept as
JSON, as upstream keeps them, with its defaults (service port 443) and validation. The
`Available` condition is the availability controller's (apiserver.aggregator)."""

from __future__ import annotations

from typing import Any

from apiserver.registry.generic.json_strategy import CONDITIONS, JsonStrategy, boolean, integer, obj, string
from apiserver.validation import Checker
from kubeling import names, scheme
from kubeling.dynamic import content_of
from protos.kubeling.v1 import custom_pb2

__all__ = ["APIServiceStrategy", "STRATEGIES"]


class APIServiceStrategy(JsonStrategy):
    resource = scheme.APISERVICES
    garbage_collected = False
    schema = {
        "spec": obj({"service": obj({"namespace": string(), "name": string(), "port": integer(default=443)}),
                     "group": string(), "version": string(), "insecureSkipTLSVerify": boolean(),
                     "caBundle": string(), "groupPriorityMinimum": integer(), "versionPriority": integer()},
                    default={}),
        "status": obj({"conditions": CONDITIONS})}

    def validate_create(self, obj_: custom_pb2.CustomResource, check: Checker) -> None:
        if not check.violations:
            self._validate_name(obj_.metadata.name, content_of(obj_).get("spec") or {}, check)

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        group, version = spec.get("group", ""), spec.get("version", "")
        if not group and version != "v1":
            check.add("spec.group", "Required value: only v1 may have an empty group and it better be legacy kube")
        elif group:
            check.name("spec.group", group, names.dns1123_subdomain)
        if not version:
            check.add("spec.version", "Required value")
        else:
            check.name("spec.version", version, names.dns1035_label)
        if not 0 < spec.get("groupPriorityMinimum", 0) <= 20000:
            check.invalid("spec.groupPriorityMinimum", spec.get("groupPriorityMinimum", 0),
                          "must be positive and less than 20000")
        if not 0 < spec.get("versionPriority", 0) <= 1000:
            check.invalid("spec.versionPriority", spec.get("versionPriority", 0), "must be positive and less than 1000")
        service = spec.get("service")
        if service is None:
            if spec.get("caBundle"):
                check.add("spec.caBundle", "Invalid value: \"<bundle>\": local APIServices may not have a caBundle")
            if spec.get("insecureSkipTLSVerify"):
                check.add("spec.insecureSkipTLSVerify", "Invalid value: true: local APIServices may not have "
                                                        "insecureSkipTLSVerify")
        else:
            for key in ("namespace", "name"):
                if not service.get(key):
                    check.add(f"spec.service.{key}", "Required value")
            port = service.get("port", 443)
            if not 1 <= port <= 65535:
                check.invalid("spec.service.port", port, "must be between 1 and 65535, inclusive")
        if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
            check.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present")

    def validate_update(self, new: custom_pb2.CustomResource, old: custom_pb2.CustomResource,
                        check: Checker) -> None:
        if not check.violations:
            self._validate_name(new.metadata.name, content_of(new).get("spec") or {}, check)

    @staticmethod
    def _validate_name(name: str, spec: dict[str, Any], check: Checker) -> None:
        version, group = spec.get("version", ""), spec.get("group", "")
        expected = f"{version}.{group}" if group else version
        if name != expected:
            check.invalid("metadata.name", name, f"must be {expected}")


STRATEGIES = (APIServiceStrategy,)
