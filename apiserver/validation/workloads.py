"""Validation shared by the workload controllers' resources (ReplicaSet, Deployment, Job),
worded as upstream's pkg/apis/apps and batch validation: a selector that selects, a pod
template that it selects and that is a valid pod, counts that are not negative."""

from __future__ import annotations

from apiserver.validation.checker import Checker
from apiserver.validation.pods import validate_label_selector, validate_pod
from kubeling.errors import FieldViolation
from kubeling.intstr import scaled_value
from kubeling.selectors import SelectorError, from_label_selector_proto
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["validate_selector_and_template", "validate_template", "validate_count", "go_map", "nested",
           "validate_int_or_percent"]


def go_map(labels: dict[str, str]) -> str:
    """A label map as Go's %#v prints it in upstream's messages."""
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"


def validate_count(path: str, value: int, check: Checker) -> None:
    if value < 0:
        check.invalid(path, value, "must be greater than or equal to 0")


def nested(path: str, check: Checker) -> _Nested:
    """A checker whose violations are added to `check` under `path` when it is closed
    (`with nested("spec.x[0]", check) as inner: validate_x(obj, inner)`)."""
    return _Nested(path, check)


class _Nested(Checker):
    def __init__(self, path: str, outer: Checker) -> None:
        super().__init__()
        self._path, self._outer = path, outer

    def __enter__(self) -> _Nested:
        return self

    def __exit__(self, *exc: object) -> None:
        self._outer.violations.extend(
            FieldViolation(f"{self._path}.{v.field}" if v.field else self._path, v.description)
            for v in self.violations)


def validate_int_or_percent(path: str, value: core_pb2.IntOrString, check: Checker) -> int | None:
    """A count or percentage (maxUnavailable, maxSurge): its value out of 100, checked as
    upstream's ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    try:
        n = scaled_value(value, 100, round_up=True)
    except ValueError:
        check.invalid(path, value.strVal, "a valid percent string must be a numeric string followed by an ending "
                                          "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
        return None
    if n < 0:
        check.invalid(path, n, "must be greater than or equal to 0")
    elif value.type == 1 and n > 100:
        check.invalid(path, value.strVal, "must not be greater than 100%")
    return n


def validate_template(template: core_pb2.PodTemplateSpec, path: str, check: Checker) -> None:
    """A pod template at `path`: its labels and annotations, and its spec as a valid pod's
    with no ephemeral containers (upstream's ValidatePodTemplateSpec)."""
    check.labels(f"{path}.metadata.labels", template.metadata.labels)
    check.annotations(f"{path}.metadata.annotations", template.metadata.annotations)
    inner = Checker()
    validate_pod(template.spec, inner)
    if template.spec.ephemeralContainers:
        inner.add("spec.ephemeralContainers", "Forbidden: ephemeral containers not allowed in pod template")
    check.violations.extend(FieldViolation(f"{path}.{v.field}" if v.field else path, v.description)
                            for v in inner.violations)


def validate_selector_and_template(selector: meta_pb2.LabelSelector, has_selector: bool,
                                   template: core_pb2.PodTemplateSpec, kind: str, check: Checker, *,
                                   restart_policies: tuple[str, ...]) -> None:
    """spec.selector and spec.template of a ReplicaSet, Deployment or Job."""
    if not has_selector:
        check.add("spec.selector", "Required value")
    else:
        validate_label_selector(selector, "spec.selector", check)
        if not selector.matchLabels and not selector.matchExpressions:
            check.invalid("spec.selector", "{}", f"empty selector is invalid for {kind}")
        try:
            parsed = from_label_selector_proto(selector)
        except SelectorError:
            parsed = None  # reported above
        labels = dict(template.metadata.labels)
        if parsed is not None and not parsed.empty() and not parsed.matches(labels):
            check.add("spec.template.metadata.labels",
                      f"Invalid value: {go_map(labels)}: `selector` does not match template `labels`")
    validate_template(template, "spec.template", check)
    policy = template.spec.restartPolicy
    if policy and policy not in restart_policies:
        check.add("spec.template.spec.restartPolicy",
                  f'Unsupported value: "{policy}": supported values: '
                  + ", ".join(f'"{p}"' for p in restart_policies))
    if template.spec.HasField("activeDeadlineSeconds") and kind != "job":
        check.add("spec.template.spec.activeDeadlineSeconds", "Forbidden: activeDeadlineSeconds in ReplicaSet "
                                                              "is not Supported")
