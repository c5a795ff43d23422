"""What selectors see of an object and how a change looks to one watcher (upstream's
storage.SelectionPredicate and its AttrFunc): the storage layer's whole view of labels,
fields and namespaces."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeling.selectors import FieldSelector, LabelSelector

__all__ = ["ADDED", "BOOKMARK", "DELETED", "INITIAL_EVENTS_END", "MODIFIED", "Attrs", "Filter", "change_type"]

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
# On the BOOKMARK that ends a WatchList's initial events (metav1.InitialEventsAnnotationKey).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class Attrs:
    """What selectors look at, computed once per object version."""

    namespace: str
    labels: dict[str, str]
    fields: dict[str, str]
    index: str | None  # the value of the resource's index field, when it has one


@dataclass(frozen=True, slots=True)
class Filter:
    namespace: str = ""
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, a: Attrs) -> bool:
        if self.namespace and a.namespace != self.namespace:
            return False
        return self.labels.matches(a.labels) and self.fields.matches(a.fields)


def change_type(flt: Filter, typ: str, attrs: Attrs, prev_attrs: Attrs | None) -> str | None:
    """What a watcher with this filter sees of a change (None: nothing), from the object's
    selector attributes after (`attrs`) and before (`prev_attrs`, None: it was new)."""
    cur = flt.matches(attrs) if typ != DELETED else False
    was = prev_attrs is not None and flt.matches(prev_attrs)
    if typ == DELETED:
        return DELETED if was else None
    if cur and was:
        return MODIFIED
    if cur:
        return ADDED
    if was:
        return DELETED  # no longer selected: the watcher sees it leave (upstream does the same)
    return None
