"""Label and field selectors: Kubernetes syntax and matching."""

from __future__ import annotations

import pytest

from kubeling.selectors import FieldSelector, LabelSelector, SelectorError, from_label_selector_proto
from protos.kubeling.v1 import meta_pb2


@pytest.mark.parametrize("selector,labels,expected", [
    ("", {}, True),
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),  # != matches when the key is absent
    ("app!=web", {"app": "web"}, False),
    ("tier in (a, b)", {"tier": "b"}, True),
    ("tier in (a,b)", {}, False),
    ("tier notin (a,b)", {}, True),
    ("tier notin (a,b)", {"tier": "a"}, False),
    ("tier", {"tier": ""}, True),
    ("!tier", {"tier": "x"}, False),
    ("!tier", {}, True),
    ("v>3", {"v": "4"}, True),
    ("v>3", {"v": "3"}, False),
    ("v<3", {"v": "x"}, False),
    ("v<3", {}, False),
    ("a=1,b=2", {"a": "1", "b": "2"}, True),
    ("a=1,b=2", {"a": "1"}, False),
    ("a=", {"a": ""}, True),
    ("example.com/role=x", {"example.com/role": "x"}, True),
])
def test_label_matching(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


@pytest.mark.parametrize("selector", ["a in ()", "a in (b", "=b", "a=b,", "a b", "a>x", "Bad Key=1", "a=b c",
                                      "a in (x y)", "a=!b"])
def test_label_parse_errors(selector: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse(selector)


def test_label_selector_proto() -> None:
    sel = meta_pb2.LabelSelector(matchLabels={"app": "web"}, matchExpressions=[
        meta_pb2.LabelSelectorRequirement(key="tier", operator="In", values=["a", "b"]),
        meta_pb2.LabelSelectorRequirement(key="legacy", operator="DoesNotExist")])
    parsed = from_label_selector_proto(sel)
    assert parsed is not None
    assert parsed.matches({"app": "web", "tier": "a"})
    assert not parsed.matches({"app": "web", "tier": "a", "legacy": "1"})
    assert from_label_selector_proto(meta_pb2.LabelSelector()).matches({"x": "y"})  # empty: everything
    assert from_label_selector_proto(None) is None
    with pytest.raises(SelectorError):
        from_label_selector_proto(meta_pb2.LabelSelector(matchExpressions=[
            meta_pb2.LabelSelectorRequirement(key="a", operator="Near")]))


def test_field_selectors() -> None:
    sel = FieldSelector.parse("spec.nodeName=n1,status.phase!=Failed")
    assert sel.matches({"spec.nodeName": "n1", "status.phase": "Running"})
    assert not sel.matches({"spec.nodeName": "n1", "status.phase": "Failed"})
    assert not sel.matches({"spec.nodeName": "n2"})
    assert sel.exact("spec.nodeName") == "n1" and sel.exact("status.phase") is None
    assert FieldSelector.parse("spec.nodeName==").matches({"spec.nodeName": ""})
    assert FieldSelector.parse(r"metadata.name=a\,b").requirements[0].value == "a,b"
    assert FieldSelector.parse("").empty()
    for bad in ["x", "a=b=c", "=v", "a=b\\"]:
        with pytest.raises(SelectorError):
            FieldSelector.parse(bad)
