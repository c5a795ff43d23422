"""The webhooks configured now: the webhook configurations in the apiserver's watch cache,
read again only when the cache changed (so a new configuration counts from the next
request, as upstream's informer-fed source), sorted as upstream calls them: by
configuration name, then in the configuration's order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apiserver.admission.request import rule_matches
from apiserver.registry.admissionregistration.rules import compiled_selector
from apiserver.storage.cacher.watch_cache import WatchCache
from kubeling.dynamic import content_of
from kubeling.selectors import LabelSelector

__all__ = ["Webhook", "WebhookSource"]


@dataclass(frozen=True, eq=False)
class Webhook:
    configuration: str
    name: str
    rules: tuple[dict[str, Any], ...]
    failure_policy: str
    match_policy: str
    namespace_selector: LabelSelector | None
    object_selector: LabelSelector | None
    side_effects: str
    timeout: float
    review_versions: tuple[str, ...]
    client_config: dict[str, Any]
    match_conditions: tuple[dict[str, Any], ...]
    reinvoke: bool  # reinvocationPolicy IfNeeded (mutating webhooks)

    @property
    def fails_open(self) -> bool:
        return self.failure_policy == "Ignore"

    def rule_matches(self, attrs: Any, group: str, version: str) -> bool:
        return any(rule_matches(rule, attrs, group, version) for rule in self.rules)


def _webhook(configuration: str, hook: dict[str, Any]) -> Webhook:
    return Webhook(
        configuration=configuration, name=hook.get("name", ""), rules=tuple(hook.get("rules") or ()),
        failure_policy=hook.get("failurePolicy", "Fail"), match_policy=hook.get("matchPolicy", "Equivalent"),
        namespace_selector=compiled_selector(hook.get("namespaceSelector")),
        object_selector=compiled_selector(hook.get("objectSelector")), side_effects=hook.get("sideEffects", "Unknown"),
        timeout=float(hook.get("timeoutSeconds", 10)), review_versions=tuple(hook.get("admissionReviewVersions") or ()),
        client_config=hook.get("clientConfig") or {}, match_conditions=tuple(hook.get("matchConditions") or ()),
        reinvoke=hook.get("reinvocationPolicy") == "IfNeeded")


class WebhookSource:
    """Call it for the webhooks (cheap when nothing changed: one counter read)."""

    def __init__(self, cache: WatchCache) -> None:
        self._cache = cache
        self._seen = -1
        self._hooks: tuple[Webhook, ...] = ()

    def __call__(self) -> tuple[Webhook, ...]:
        if self._cache.changes != self._seen:
            self._seen = self._cache.changes
            configurations = sorted((e.obj for e in self._cache.store.values()), key=lambda o: o.metadata.name)
            self._hooks = tuple(_webhook(c.metadata.name, hook) for c in configurations
                                for hook in content_of(c).get("webhooks") or [])
        return self._hooks
